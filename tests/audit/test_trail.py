"""The audit trail of real executions (seed 001 "Which stages emit events", DESIGN §9, §12):
event names and order, the terminal event per code, the fields each event carries, and the
approval decisions made on the admin listener."""

from __future__ import annotations

from typing import Any

import pytest

from capgate.v1 import admin_pb2, types_pb2
from gateway.telemetry import metrics
from tests.audit.kit import Stack

pytestmark = pytest.mark.integration

COMMON = {
    "event",
    "event_id",
    "time",
    "execution_id",
    "capability_id",
    "surface",
    "actor_id",
    "actor_issuer",
    "actor_kind",
    "revision",
    "execution_state",
}


def names(events: list[dict[str, Any]]) -> list[str]:
    return [e["event"] for e in events]


async def decide(stack: Stack, approval: types_pb2.Approval, *, approve: bool) -> None:
    verdict = admin_pb2.VERDICT_APPROVE if approve else admin_pb2.VERDICT_REJECT
    reply = await stack.env.admin().DecideApproval(
        admin_pb2.DecideApprovalRequest(
            approval_id=approval.id, verdict=verdict, note="ok", input_hash=approval.input_hash
        ),
        metadata=stack.env.metadata("admin", "bob"),
    )
    assert not reply.HasField("error"), reply


async def approval_events(stack: Stack, approval_id: str, name: str) -> list[dict[str, Any]]:
    await stack.env.gw.runtime.audit.flush()  # type: ignore[attr-defined]
    return [
        e for e in stack.memory.events if e.get("approval_id") == approval_id and e["event"] == name
    ]


async def test_a_completed_execution_carries_every_field_and_no_payload(audited: Stack) -> None:
    result = await audited.env.invoke(
        "orders.refund", {"order_id": "o-1001", "amount": 12.5}, correlation_id="corr-42"
    )
    assert result.WhichOneof("outcome") == "completed"
    events = await audited.events(result.execution_id)
    assert names(events) == ["capability.requested", "capability.started", "capability.completed"]
    revision = audited.env.gw.holder.current.revision
    for event in events:
        assert set(event) >= COMMON
        assert event["revision"] == revision
        assert (event["actor_id"], event["actor_kind"], event["surface"]) == (
            "alice",
            "user",
            "agent",
        )
        assert event["correlation_id"] == "corr-42"
        assert "o-1001" not in str(event)
        assert "12.5" not in str(event)
    requested, started, completed = events
    assert "input_hmac" not in requested  # before validation there is no validated value
    assert started["input_hmac"] == completed["input_hmac"]
    assert started["input_hmac_key_id"] == "test-k1"
    assert {s["policy"] for s in started["stances"]} >= {"refund-limits"}  # each stance
    assert completed["outcome"] == "completed"
    assert completed["attempt"] == 1
    assert completed["execution_state"] == "COMPLETED"
    assert completed["duration_ms"] >= completed["upstream_ms"] > 0
    assert len({e["event_id"] for e in events}) == 3


async def test_a_policy_denial_records_the_reason_and_every_stance(audited: Stack) -> None:
    result = await audited.env.invoke("orders.refund", {"order_id": "o-1001", "amount": 20000})
    events = await audited.events(result.execution_id)
    assert names(events) == ["capability.requested", "capability.denied"]
    denied = events[-1]
    assert (denied["code"], denied["stage"], denied["reason"]) == (
        "POLICY_DENIED",
        "policy",
        "denied",
    )
    stance = next(s for s in denied["stances"] if s["policy"] == "refund-limits")
    assert stance["effect"] == "deny"
    assert stance["rule"] == 0
    assert denied["execution_state"] == "NOT_STARTED"


async def test_concealed_denials_keep_the_true_reason_the_caller_never_sees(audited: Stack) -> None:
    hidden = await audited.env.invoke("admin.orders.purge", {})
    unexposed = await audited.env.invoke("orders.unexposed", {"order_id": "o-1001"})
    unknown = await audited.env.invoke("orders.nope", {})
    seen = []
    for result, reason in ((hidden, "hidden"), (unexposed, "not-exposed"), (unknown, "unknown")):
        assert result.failed.code == types_pb2.ERROR_CODE_CAPABILITY_NOT_FOUND
        seen.append(result.failed.message)
        denied = (await audited.events(result.execution_id))[-1]
        assert denied["event"] == "capability.denied"
        assert denied["reason"] == reason
        assert denied.get("concealed", False) is (reason != "unknown")
    assert len(set(seen)) == 1  # one answer to the caller (SI-8)
    assert denied["capability_id"] == "orders.nope"  # probes for ids are recorded


async def test_failures_and_cancellations_end_in_their_terminal_events(audited: Stack) -> None:
    invalid = await audited.env.invoke("orders.refund", {"order_id": "o-1001"})
    timeout = await audited.env.invoke("orders.cancel", {"order_id": "slow-1500"})
    upstream = await audited.env.invoke("orders.get", {"order_id": "fail-INTERNAL"})
    expected = (
        (invalid, "capability.failed", "INPUT_INVALID", "NOT_STARTED"),
        (timeout, "capability.cancelled", "TIMEOUT", "UNKNOWN"),
        (upstream, "capability.failed", "EXECUTION_FAILED", "UNKNOWN"),
    )
    for result, event, code, state in expected:
        last = (await audited.events(result.execution_id))[-1]
        assert (last["event"], last["code"], last["execution_state"]) == (event, code, state)
    last = (await audited.events(upstream.execution_id))[-1]
    assert last["reason"] == "upstream status INTERNAL"  # never the upstream's own text
    assert "injected" not in str(last)


async def test_retries_are_recorded_with_their_attempt_under_one_execution(audited: Stack) -> None:
    before = metrics.retries.value(("orders.get",))
    result = await audited.env.invoke("orders.get", {"order_id": "flaky-1-trail"})
    events = await audited.events(result.execution_id)
    assert names(events) == [
        "capability.requested",
        "capability.started",
        "capability.retried",
        "capability.completed",
    ]
    assert events[2]["attempt"] == 2
    assert events[2]["code"] == "UPSTREAM_UNAVAILABLE"
    assert events[3]["attempt"] == 2
    assert metrics.retries.value(("orders.get",)) == before + 1


async def test_approval_request_decision_and_resume_are_all_in_the_trail(audited: Stack) -> None:
    decided_before = metrics.approvals_decided.value(("approved",))
    asked = await audited.env.invoke("orders.refund", {"order_id": "o-1001", "amount": 900})
    approval = asked.approval_required.approval
    requested = (await audited.events(asked.execution_id))[-1]
    assert requested["event"] == "capability.approval_requested"
    assert requested["approval_id"] == approval.id
    assert requested["reasons"]
    assert any(s["effect"] == "require-approval" for s in requested["stances"])

    await decide(audited, approval, approve=True)
    (approved,) = await approval_events(audited, approval.id, "capability.approved")
    assert (approved["actor_id"], approved["requester_id"]) == ("bob", "alice")
    assert approved["execution_id"] == asked.execution_id
    assert approved["revision"] == audited.env.gw.holder.current.revision
    assert metrics.approvals_decided.value(("approved",)) == decided_before + 1

    resumed = await audited.env.resume(approval.id)
    events = await audited.events(resumed.execution_id)
    assert names(events) == [
        "capability.requested",
        "capability.approval_consumed",
        "capability.started",
        "capability.completed",
    ]
    assert all(e["approval_id"] == approval.id for e in events)
    assert events[-1]["input_hmac"] == requested["input_hmac"]  # the same validated input


async def test_rejections_and_expiries_are_recorded_once(audited: Stack) -> None:
    rejected_before = metrics.approvals_decided.value(("rejected",))
    expired_before = metrics.approvals_expired.value()
    first = await audited.env.invoke("orders.refund", {"order_id": "o-1001", "amount": 901})
    second = await audited.env.invoke("orders.refund", {"order_id": "o-1002", "amount": 902})
    await decide(audited, first.approval_required.approval, approve=False)
    store = audited.env.gw.runtime.approvals
    assert await store.expire_sweep(audited.env.gw.runtime.wall() + 10 * 3600) >= 1
    assert await store.expire_sweep(audited.env.gw.runtime.wall() + 10 * 3600) == 0
    rejected = await approval_events(
        audited, first.approval_required.approval.id, "capability.rejected"
    )
    expired = await approval_events(
        audited, second.approval_required.approval.id, "capability.approval_expired"
    )
    assert len(rejected) == 1
    assert rejected[0]["actor_id"] == "bob"
    assert len(expired) == 1
    assert "actor_id" not in expired[0]
    assert expired[0]["requester_id"] == "alice"
    assert expired[0]["outcome"] == "expired"
    assert metrics.approvals_decided.value(("rejected",)) == rejected_before + 1
    assert metrics.approvals_expired.value() >= expired_before + 1


async def test_a_failing_policy_fails_closed_and_is_counted(audited: Stack) -> None:
    before = metrics.policy_failures.value(("invocation",))
    result = await audited.env.invoke("orders.get", {"order_id": "policy-boom"})
    assert result.failed.code == types_pb2.ERROR_CODE_POLICY_FAILED  # SI-7
    denied = (await audited.events(result.execution_id))[-1]
    assert (denied["event"], denied["reason"]) == ("capability.denied", "policy-error")
    stance = next(s for s in denied["stances"] if s["policy"] == "fails-on-magic-id")
    assert stance["error"]
    assert len(stance["error"]) <= 256
    assert "policy-boom" not in str(denied)  # the error names the rule, not the value
    assert metrics.policy_failures.value(("invocation",)) == before + 1
