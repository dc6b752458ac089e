"""The held demo (`DEMO_HOLD=1 make demo`) as a newcomer follows it: the refund it leaves waiting
is approved with the printed `capgate approvals` commands and resumed with the printed command,
and completes; the printed audit commands show it. Everything runs as printed, pasted into a
shell, against the demo itself (its gateway, embedded Redis, example upstream and inbox)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.held_demo import HeldDemo, held_demo, shell

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeldDemo]:
    with held_demo(Path(tmp_path_factory.mktemp("held-demo")) / "stderr") as running:
        yield running


def test_the_held_refund_completes_when_approved_and_resumed_as_printed(demo: HeldDemo) -> None:
    approval_id = demo.value("waiting for a decision there: ").rsplit("/", 1)[1]
    export_admin = demo.line("export CAPGATE_ADMIN=")
    listed = shell(f"{export_admin}\n{demo.line(' approvals list ')}")
    assert listed.returncode == 0, listed.stderr
    assert approval_id in listed.stdout
    shown = shell(f"{export_admin}\n{demo.line(' approvals show ')}")
    assert shown.returncode == 0, shown.stderr
    assert "orders.refund" in shown.stdout

    approved = shell(f"{export_admin}\n{demo.line(' approvals approve ')}")
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout == f"{approval_id}: approved\n"

    # The requester's side: the export and the command after "alice resumes it".
    resume = demo.stdout.index(next(line for line in demo.stdout if "alice resumes it" in line))
    pasted = "\n".join(line.strip() for line in demo.stdout[resume + 1 :])
    resumed = shell(pasted)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.startswith("status:") and "completed" in resumed.stdout.split("\n")[0]
    assert '"status": "REFUND_STATUS_SUCCEEDED"' in resumed.stdout, resumed.stdout
    again = shell(pasted)  # a repeated Resume answers the stored envelope: the refund ran once
    assert again.returncode == 0, again.stderr
    assert again.stdout == resumed.stdout

    queried = shell(demo.line(" audit query "))
    assert queried.returncode == 0, queried.stderr
    events = [json.loads(line) for line in queried.stdout.splitlines()]
    mine = [e["event"] for e in events if e.get("approval_id") == approval_id]
    assert {"capability.approval_requested", "capability.approved"} <= set(mine), mine
    assert mine.count("capability.started") == 1, mine  # the upstream ran the refund once


def test_the_printed_commands_that_follow_run_until_stopped(demo: HeldDemo) -> None:
    export_admin = demo.line("export CAPGATE_ADMIN=")
    for printed in (
        f"{export_admin}\ntimeout 3 {demo.line(' approvals watch ')}",
        f"timeout 3 {demo.line(' audit tail ')}",
    ):
        followed = shell(printed)
        assert followed.returncode == 124, (printed, followed.stderr)  # timeout stopped it
        assert followed.stderr == "", printed


def test_the_demo_output_is_its_own(demo: HeldDemo) -> None:
    """The in-process servers' logs go to the run directory's servers.log, which the demo names;
    nothing else writes to the terminal (the MCP SDK's log lines used to)."""
    assert demo.stderr() == ""
    logs = Path(demo.value("(the gateway and its audit trail), ").split()[0])
    assert logs.name == "servers.log"
    assert "StreamableHTTP session manager started" in logs.read_text()
    assert not [line for line in demo.stdout if " INFO " in line or "WARNING" in line]
