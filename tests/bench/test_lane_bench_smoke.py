"""`bench.lane` runs end to end in a tiny mode against a real Redis: both paths of both commands
are measured and written (docs/performance.md cites its figures)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import lane


def test_the_lane_bench_measures_both_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lane, "CALLS", 20)
    monkeypatch.setattr(lane, "ROUNDS", 1)
    monkeypatch.setattr(lane, "WARMUP", 5)
    monkeypatch.setattr(lane, "OUT", tmp_path / "lane.json")
    lane.main()
    result = json.loads((tmp_path / "lane.json").read_text())
    assert set(result) == {"GET, lane", "GET, redis-py", "script, lane", "script, redis-py"}
    assert all(row["cpu_us"] > 0 and row["wall_us"] > 0 for row in result.values())
