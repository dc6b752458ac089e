"""bench.mcp_upstream runs end to end (real desk MCP server, capgate serve, Redis) and reports
both columns; no timing is asserted (speed claims live in bench/ and docs/performance.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_mcp_upstream_bench_reports_both_sides(tmp_path: Path) -> None:
    out = tmp_path / "mcp.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.mcp_upstream", "--calls", "100", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    for side in ("direct", "governed"):
        assert result[side]["calls"] == 100
        assert result[side]["p50_us"] > 0
    assert set(result) >= {"added_p50_us", "added_cpu_us_per_call"}
    assert "| MCP tool, direct vs governed (c=1) |" in done.stdout
