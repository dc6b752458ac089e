"""The soak (bench/soak.py, `make soak`) runs end to end in a few seconds and writes a series;
its growth verdict fails a growing series and passes a flat one. The real soak runs minutes,
outside the test suite; nothing here asserts a timing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.soak import MIN_JUDGED_S, TOLERANCES, judge, slope

ROOT = Path(__file__).resolve().parents[2]
METRICS = tuple(TOLERANCES)


@pytest.mark.integration
@pytest.mark.e2e
def test_a_short_soak_produces_a_series_of_every_metric(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    argv = [sys.executable, "-m", "bench.soak", "--seconds", "5", "--interval", "1"]
    done = subprocess.run(
        [*argv, "--out", str(out)],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report["verdict"] == "not judged (shorter than 60 s)"
    assert report["unexpected"] == {} and report["worker_errors"] == []
    samples = report["samples"]
    assert len(samples) >= 3
    for s in samples:
        assert all(s[m] >= 0 for m in METRICS)
    assert samples[-1]["rss_kb"] > 0 and samples[-1]["open_files"] > 0
    assert samples[-1]["redis_keys"] > 0  # the load wrote idempotency and approval records
    kinds = set(report["outcomes"])
    assert {"completed", "failed:POLICY_DENIED", "failed:INPUT_INVALID"} <= kinds
    assert "approval_required" in kinds


def _series(growth_per_s: dict[str, float], seconds: float = 600) -> list[dict[str, float]]:
    base = {"rss_kb": 80_000.0, "open_files": 26.0, "redis_keys": 300.0}
    base |= {"approval_index_entries": 100.0, "redis_used_memory": 2_000_000.0}
    return [
        {"t": float(t)} | {m: v + growth_per_s.get(m, 0.0) * t for m, v in base.items()}
        for t in range(0, int(seconds) + 1, 10)
    ]


def test_the_verdict_passes_flat_series_and_fails_growing_ones() -> None:
    flat = judge(_series({}), 600)
    assert flat is not None and all(g.ok for g in flat)
    # The soak: the approval index doubled in ten minutes (1,209 -> 2,396).
    growing = judge(_series({"approval_index_entries": 2.0, "open_files": 0.05}), 600)
    assert growing is not None
    failed = {g.metric for g in growing if not g.ok}
    assert failed == {"approval_index_entries", "open_files"}
    assert judge(_series({}, MIN_JUDGED_S - 1), MIN_JUDGED_S - 1) is None
    assert slope([(0, 1), (10, 21)]) == pytest.approx(2.0)
