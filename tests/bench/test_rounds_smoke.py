"""`python -m bench.rounds --bare` runs end to end: the governed gateway, the gateway's skeleton
and the bare proxy each answer every call of a short round, and the report holds the three
ratios for each pair. Timings are never asserted (DESIGN §11)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]


def test_one_round_with_the_skeleton_reports_every_pair(tmp_path: Path) -> None:
    out = tmp_path / "rounds.json"
    argv = ["--rounds", "1", "--seconds", "0.3", "--no-ghz", "--bare", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "bench.rounds", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["bare"] is True
    ratios = report["load"]["ratios"]
    for pair in ("governed_vs_proxy", "bare_vs_proxy", "governed_vs_bare"):
        for figure in ("cpu", "throughput", "p50"):
            summary = ratios[f"{pair}_{figure}"]
            assert summary["n"] == 1 and summary["median"] > 0, (pair, figure, summary)
    (cells,) = report["load"]["raw"]
    assert set(cells) == {f"{s}_{n}" for s in ("governed", "proxy", "bare") for n in (1, 64)}
    for name, cell in cells.items():
        assert cell["calls"] > 0 and cell["errors"] == 0 and cell["bad"] == 0, (name, cell)
        assert cell["context_switches_per_call"] > 0, (name, cell)  # the server's threads
