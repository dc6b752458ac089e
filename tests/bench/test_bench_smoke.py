"""The benchmark harness runs end to end in its tiny mode and writes a complete report.

Timings are never asserted (they are benchmark figures, DESIGN §11); what is asserted is what
a reader of the report relies on: every scenario ran at every concurrency without an error or
an unexpected answer, and the required keys are present.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]
REQUIRED = (
    "governed_vs_proxy_p50",
    "governed_vs_proxy_throughput",
    "audit_cost",
    "approval_path_ms",
    "workers_scaling",
    "check_vs_opa",
    "policy_eval_us_10",
    "budgets",
    "machine",
    "versions",
)
SCENARIOS = (
    "direct",
    "proxy",
    "governed_p0",
    "governed_p3",
    "governed_p10",
    "governed_p3_local",
    "cache_hit_p3",
    "cache_miss_p3",
    "hook_pre_p3",
    "audit_off_p3",
    "audit_strict_p3",
    "check",
    "describe",
    "approval",
    "workers_1",
    "workers_2",
    "direct_go",
    "proxy_go",  # bench/goload, the Go generator (built with the machine's Go toolchain)
    "governed_p3_go",
    "check_go",
)


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    out = tmp_path_factory.mktemp("bench")
    done = subprocess.run(
        [sys.executable, "-m", "bench.run", "--tiny", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=400,  # a cold Go build cache builds bench/goload first
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "report.json").read_text()), (out / "report.md").read_text()


@pytest.mark.timeout(480)
def test_tiny_run_writes_every_required_key(tiny_report: tuple[dict, str]) -> None:
    report, _ = tiny_report
    missing = [key for key in REQUIRED if key not in report]
    assert not missing
    assert report["mode"] == "tiny"
    assert isinstance(report["governed_vs_proxy_p50"], float)
    assert isinstance(report["governed_vs_proxy_throughput"], float)
    assert set(report["audit_cost"]) == {"off", "best_effort", "strict"}
    assert {"workers_1_calls_per_s", "workers_2_calls_per_s", "ratio"} <= set(
        report["workers_scaling"]
    )
    assert report["check_vs_opa"] == {"skipped": "tiny mode"}


@pytest.mark.timeout(480)
def test_every_scenario_answered_as_expected_at_every_level(tiny_report: tuple[dict, str]) -> None:
    report, _ = tiny_report
    levels = [str(level) for level in report["settings"]["levels"]]
    for name in SCENARIOS:
        rows = report["scenarios"][name]["levels"]
        for level, row in rows.items():
            assert "failed" not in row, (name, level, row)
            assert row["errors"] == 0, (name, level, row["first_error"])
            assert row["bad"] == 0, (name, level)  # e.g. a governed call that did not complete
            assert row["calls"] > 0, (name, level)
        if name not in ("approval", "workers_1", "workers_2"):
            assert list(rows) == levels, name


@pytest.mark.timeout(480)
def test_markdown_table_has_a_row_per_scenario_and_the_budgets(
    tiny_report: tuple[dict, str],
) -> None:
    _, md = tiny_report
    assert "| scenario | in flight | p50 ms | p99 ms | calls/s |" in md
    for name in SCENARIOS:
        assert f"| {name} |" in md, name
    assert "| governed_vs_proxy_p50 | <= 1.25 |" in md
