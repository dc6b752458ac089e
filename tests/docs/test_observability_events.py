"""docs/observability.md's audit event table and field list against the code (issue 30).

The event table names exactly the events of `gateway.errors.Event`; real events from the real
gateway (an Invoke, a denial, an approval asked, decided and resumed, a Describe) carry the
fields the page says every event carries; `capabilities.discovered` (seed 001's describe
event) has an execution id of its own and a deterministic event id like every other event.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from capgate.v1 import admin_pb2, gateway_pb2
from gateway.errors import Event
from tests.audit.kit import Stack, audited
from tests.gateway.conftest import orders_upstream

__all__ = ["audited", "orders_upstream"]

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "observability.md").read_text()
HEX_ID = re.compile(r"[0-9a-f]{32}")


def _table(header: str) -> list[list[str]]:
    """The rows (cells) of the markdown table whose header line is `header`."""
    lines = DOC.splitlines()
    start = lines.index(header) + 2
    rows: list[list[str]] = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def _documented_events() -> list[str]:
    """Every event name of the event table's first column; `.failed` after
    `capability.completed` is short for `capability.failed`."""
    names: list[str] = []
    for row in _table("| event | emitted by | notes |"):
        for token in re.findall(r"`([^`]+)`", row[0]):
            names.append("capability" + token if token.startswith(".") else token)
    return names


def _every_event_fields() -> list[str]:
    found = re.search(r"Every event carries (.+?);", DOC.replace("\n", " "))
    assert found, "observability.md no longer says what every event carries"
    return re.findall(r"`([a-z_]+)`", found.group(1))


def test_the_event_table_names_every_event_of_the_code_once() -> None:
    documented = _documented_events()
    assert sorted(documented) == sorted(e.value for e in Event)


def test_the_field_table_names_the_fields_every_event_carries() -> None:
    every = set(_every_event_fields())
    assert every == {
        "event",
        "event_id",
        "time",
        "execution_id",
        "surface",
        "revision",
        "execution_state",
    }
    for row in _table("| field | meaning | in |"):
        fields = set(re.findall(r"`([a-z_]+)`", row[0]))
        assert (row[2] == "every event") == bool(fields & every), row


async def _describe(stack: Stack, actor: str = "alice") -> gateway_pb2.DescribeResponse:
    env = stack.env
    return await env.gateway("agents").Describe(
        gateway_pb2.DescribeRequest(), metadata=env.metadata("agents", actor)
    )


async def _discovered(stack: Stack, count: int) -> list[dict[str, Any]]:
    await stack.env.gw.runtime.audit.flush()  # type: ignore[attr-defined]
    events = [e for e in stack.memory.events if e["event"] == Event.DISCOVERED.value]
    assert len(events) >= count
    return events[-count:]


async def test_describe_records_capabilities_discovered_with_its_own_execution(
    audited: Stack,
) -> None:
    """Without the fix the event had a random event_id and no execution_id (issue 30 item 3)."""
    first = await _describe(audited)
    second = await _describe(audited, "bob")
    one, two = await _discovered(audited, 2)
    shown = [d.id for d in first.capabilities]
    assert "orders.get" in shown and "orders.unexposed" not in shown
    assert one["capability_ids"] == shown
    assert two["capability_ids"] == [d.id for d in second.capabilities]
    for event, actor in ((one, "alice"), (two, "bob")):
        assert HEX_ID.fullmatch(event["execution_id"]), event
        assert event["event_id"] == f"{event['execution_id']}:capabilities.discovered:0"
        assert (event["actor_id"], event["actor_issuer"]) == (actor, "test-idp")
        assert event["surface"] == "agent"
        assert event["revision"] == first.revision
        assert event["execution_state"] == "NOT_STARTED"
        assert "capability_id" not in event  # the table says so: it names capability_ids
    assert one["execution_id"] != two["execution_id"]


async def test_every_event_of_real_executions_carries_the_documented_fields(
    audited: Stack,
) -> None:
    env = audited.env
    await env.invoke("orders.get", {"order_id": "o-1001"})
    await env.invoke("orders.nowhere", {})
    asked = await env.invoke("orders.refund", {"order_id": "o-1001", "amount": 900})
    approval = asked.approval_required.approval
    decided = await env.admin().DecideApproval(
        admin_pb2.DecideApprovalRequest(
            approval_id=approval.id,
            verdict=admin_pb2.VERDICT_APPROVE,
            note="ok",
            input_hash=approval.input_hash,
        ),
        metadata=env.metadata("admin", "bob"),
    )
    assert decided.approval.id == approval.id
    resumed = await env.resume(approval.id)
    assert resumed.HasField("completed"), resumed
    await _describe(audited)
    await env.gw.runtime.audit.flush()  # type: ignore[attr-defined]
    events = audited.memory.events
    seen = {e["event"] for e in events}
    assert {
        "capability.requested",
        "capability.started",
        "capability.completed",
        "capability.denied",
        "capability.approval_requested",
        "capability.approved",
        "capability.approval_consumed",
        "capabilities.discovered",
    } <= seen
    every = _every_event_fields()
    for event in events:
        missing = [f for f in every if f not in event or event[f] in (None, "")]
        assert not missing, (event["event"], missing)
        if event["event"] != Event.DISCOVERED.value:
            assert "capability_id" in event, event["event"]
        if event["event"] != Event.APPROVAL_EXPIRED.value:
            assert event.get("actor_id"), event["event"]


pytestmark = pytest.mark.integration
