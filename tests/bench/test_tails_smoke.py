"""`bench.tails --gc-ab` runs end to end in a tiny mode: both columns on both gateways without
an error or an unexpected answer, and the GC A/B is what it says through real `capgate serve`
processes: the gateway as shipped ends with its start-up heap frozen (ADR 0041), the one with
the policy made a no-op with nothing frozen. Timings are never asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]


def test_tails_gc_ab_runs_and_only_the_shipped_gateway_freezes(tmp_path: Path) -> None:
    out = tmp_path / "tails.json"
    argv = ["-m", "bench.tails", "--blocks", "1", "--seconds", "0.3", "--inflight", "4"]
    done = subprocess.run(
        [sys.executable, *argv, "--gc-ab", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert set(report["columns"]) == {"grpc", "mcp", "grpc_b", "mcp_b"}
    for name, cells in report["cells"].items():
        for cell in cells:
            assert cell["calls"] > 0, (name, cell)
            assert cell["errors"] == 0 and cell["bad"] == 0, (name, cell)
    pauses = report["gc_ab"]["pauses"]
    assert pauses["a"]["frozen_at_exit"] == 0
    assert pauses["b"]["frozen_at_exit"] > 0
