"""Quorum, separation of duties and escalation end to end (docs/approvals.md "Quorum and
separation of duties", "Escalation"): the real server, the real Redis, the example upstream, an
admin listener, and a webhook receiver on loopback."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from capgate.v1 import admin_pb2, gateway_pb2, types_pb2
from gateway.audit.notify import verify
from gateway.audit.sinks import MemorySink
from gateway.cli.approvals import main as cli
from gateway.process.serve import start
from gateway.state.approvals.records import ApprovalRecord, Status
from tests.gateway.harness import Env, token
from tests.mcp.mcpkit import McpEnv
from tests.notify.notifykit import Receiver
from tests.quorum.conftest import HOOK_SECRET

pytestmark = pytest.mark.integration

ASKED = {"order_id": "o-1001", "amount": 50.0, "reason": "damaged in transit"}


def code(error: types_pb2.CapabilityError) -> str:
    return types_pb2.ErrorCode.Name(error.code).removeprefix("ERROR_CODE_")


def caller(sub: str, *roles: str) -> list[tuple[str, str]]:
    bearer = token("alice", sub=sub, roles=list(roles))
    return [("authorization", f"Bearer {bearer}")]


def admin_as(sub: str, *roles: str) -> list[tuple[str, str]]:
    bearer = token("bob", audience="capgate-admin", sub=sub, roles=list(roles))
    return [("authorization", f"Bearer {bearer}")]


async def request(
    env: Env, capability: str, *, by: list[tuple[str, str]] | None = None
) -> types_pb2.Approval:
    result = await env.gateway().Invoke(
        gateway_pb2.InvokeRequest(capability_id=capability, input_json=orjson.dumps(ASKED)),
        metadata=by or caller("alice", "agent"),
        timeout=10,
    )
    assert result.WhichOneof("outcome") == "approval_required", result
    return result.approval_required.approval


async def decide(
    env: Env,
    approval: types_pb2.Approval,
    by: list[tuple[str, str]],
    *,
    approve: bool = True,
    admin: Any = None,
) -> admin_pb2.DecideApprovalResponse:
    stub = admin if admin is not None else env.admin()
    reply: admin_pb2.DecideApprovalResponse = await stub.DecideApproval(
        admin_pb2.DecideApprovalRequest(
            approval_id=approval.id,
            verdict=admin_pb2.VERDICT_APPROVE if approve else admin_pb2.VERDICT_REJECT,
            input_hash=approval.input_hash,
        ),
        metadata=by,
        timeout=10,
    )
    return reply


async def stored(env: Env, approval_id: str) -> ApprovalRecord:
    store = env.gw.runtime.approvals
    assert store is not None
    record = await store.get(approval_id)
    assert record is not None
    return record


async def trail(env: Env, name: str, approval_id: str) -> list[dict[str, Any]]:
    await env.gw.runtime.audit.flush()  # type: ignore[attr-defined]
    return [
        e for e in env.audit.events if e["event"] == name and e.get("approval_id") == approval_id
    ]


async def stream(env: Env, approval_id: str) -> list[str]:
    store = env.gw.runtime.approvals
    assert store is not None
    rows: Any = await env.gw.redis.xrange(store.keys.events)
    return [r[1][b"type"].decode() for r in rows if r[1][b"id"].decode() == approval_id]


async def test_two_of_two_is_approved_by_the_second_approver_only(env: Env) -> None:
    approval = await request(env, "pay.refund")
    assert (approval.quorum, approval.approvals_received) == (2, 0)
    first = await decide(env, approval, admin_as("bob", "approver"))
    assert not first.HasField("error"), first
    assert first.approval.status == types_pb2.APPROVAL_STATUS_PENDING
    assert first.approval.approvals_received == 1
    # Still pending: the requester cannot resume it yet.
    early = await env.resume(approval.id)
    assert code(early.failed) == "APPROVAL_PENDING"
    # The same approver again is counted once.
    again = await decide(env, approval, admin_as("bob", "approver"))
    assert again.approval.approvals_received == 1
    assert again.approval.status == types_pb2.APPROVAL_STATUS_PENDING
    done = await decide(env, approval, admin_as("carol", "approver"))
    assert done.approval.status == types_pb2.APPROVAL_STATUS_APPROVED
    assert done.approval.approvals_received == 2
    assert [a.id for a in done.approval.approved_by] == ["bob", "carol"]
    assert done.approval.decided_by.id == "carol"
    voted = await trail(env, "capability.approval_voted", approval.id)
    assert [(e["actor_id"], e["approvals_received"], e["quorum"]) for e in voted] == [("bob", 1, 2)]
    assert len(await trail(env, "capability.approved", approval.id)) == 1
    assert await stream(env, approval.id) == ["requested", "voted", "approved"]
    resumed = await env.resume(approval.id)
    assert resumed.WhichOneof("outcome") == "completed", resumed


async def test_the_requester_can_never_vote(env: Env) -> None:
    requester = caller("alice", "agent", "approver")
    approval = await request(env, "pay.refund", by=requester)
    await decide(env, approval, admin_as("bob", "approver"))
    own = await decide(env, approval, admin_as("alice", "agent", "approver"))
    assert code(own.error) == "APPROVAL_SELF_APPROVAL"
    record = await stored(env, approval.id)
    assert (record.status, [v.id for v in record.votes]) == (Status.PENDING, ["bob"])


async def test_two_finance_approvers_never_approve_a_finance_and_risk_approval(env: Env) -> None:
    approval = await request(env, "pay.wire")
    assert (approval.quorum, list(approval.distinct_roles)) == (2, ["finance", "risk"])
    first = await decide(env, approval, admin_as("fiona", "approver", "finance"))
    assert first.approval.approvals_received == 1
    second = await decide(env, approval, admin_as("fred", "approver", "finance"))
    assert code(second.error) == "FORBIDDEN"
    assert second.error.message == "This approval still needs approvers holding: risk."
    record = await stored(env, approval.id)
    assert (record.status, [v.id for v in record.votes]) == (Status.PENDING, ["fiona"])
    done = await decide(env, approval, admin_as("rita", "approver", "risk"))
    assert done.approval.status == types_pb2.APPROVAL_STATUS_APPROVED


async def test_one_rejection_rejects_at_once(env: Env) -> None:
    approval = await request(env, "pay.refund")
    await decide(env, approval, admin_as("bob", "approver"))
    no = await decide(env, approval, admin_as("carol", "approver"), approve=False)
    assert no.approval.status == types_pb2.APPROVAL_STATUS_REJECTED
    late = await decide(env, approval, admin_as("dan", "approver"))
    assert code(late.error) == "APPROVAL_ALREADY_DECIDED"
    assert code((await env.resume(approval.id)).failed) == "APPROVAL_REJECTED"


@pytest.fixture
async def other(env: Env) -> AsyncIterator[Env]:
    """A second gateway on the same config and Redis (another replica), with its own trail."""
    memory = MemorySink()
    second = await start(env.gw.settings, extra_sinks=[memory])
    replica = Env(gw=second, audit=memory, orders_address=env.orders_address, socket_path="")
    yield replica
    for channel in replica.channels.values():
        await channel.close()
    await second.stop(0.5)


async def both(env: Env, other: Env, name: str, approval_id: str) -> list[dict[str, Any]]:
    return await trail(env, name, approval_id) + await trail(other, name, approval_id)


async def test_fifty_racing_votes_over_two_gateways_approve_exactly_once(
    env: Env, other: Env
) -> None:
    approval = await request(env, "pay.board")
    assert approval.quorum == 5
    admins = [env.admin(), other.admin()]
    replies = await asyncio.gather(
        *(
            decide(env, approval, admin_as(f"a{i}", "approver"), admin=admins[i % 2])
            for i in range(50)
        )
    )
    counted = [r for r in replies if not r.HasField("error")]
    refused = {code(r.error) for r in replies if r.HasField("error")}
    statuses = [r.approval.status for r in counted]
    assert len(counted) == 5 and refused == {"APPROVAL_ALREADY_DECIDED"}
    assert statuses.count(types_pb2.APPROVAL_STATUS_APPROVED) == 1
    record = await stored(env, approval.id)
    assert record.status is Status.APPROVED and len(record.votes) == 5
    assert record.decided_by is not None and record.decided_by == record.votes[-1]
    approved = await both(env, other, "capability.approved", approval.id)
    voted = await both(env, other, "capability.approval_voted", approval.id)
    assert (len(approved), len(voted)) == (1, 4)
    assert (await stream(env, approval.id)).count("approved") == 1


async def _escalated(env: Env, approval_id: str, within_s: float = 10.0) -> ApprovalRecord:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        record = await stored(env, approval_id)
        if record.escalated_at is not None:
            return record
        await asyncio.sleep(0.1)
    raise AssertionError("not escalated in time")


async def test_escalation_lets_managers_decide_once_and_notifies_the_webhook(
    env: Env, other: Env, receiver: Receiver
) -> None:
    approval = await request(env, "pay.late")
    manager = admin_as("maria", "manager")
    early = await decide(env, approval, manager)
    assert code(early.error) == "FORBIDDEN"  # not before the escalation
    listed = await env.admin().ListApprovals(
        admin_pb2.ListApprovalsRequest(), metadata=manager, timeout=10
    )
    assert approval.id not in [a.id for a in listed.approvals]
    # Sweepers race: both gateways' own loops, and each one's store swept five times more.
    stores = [env.gw.runtime.approvals, other.gw.runtime.approvals]
    await asyncio.sleep(1.1)
    await asyncio.gather(*(s.escalate_sweep() for s in stores * 5 if s is not None))
    record = await _escalated(env, approval.id)
    assert record.status is Status.PENDING
    await asyncio.sleep(2.5)  # the serve loops' sweeps have run again since
    events = await both(env, other, "capability.approval_escalated", approval.id)
    assert len(events) == 1
    assert events[0]["escalation_roles"] == ["manager"] and "actor_id" not in events[0]
    assert (await stream(env, approval.id)).count("escalated") == 1
    listed = await env.admin().ListApprovals(
        admin_pb2.ListApprovalsRequest(), metadata=manager, timeout=10
    )
    assert approval.id in [a.id for a in listed.approvals]
    done = await decide(env, approval, manager)
    assert done.approval.status == types_pb2.APPROVAL_STATUS_APPROVED
    assert done.approval.decided_by.id == "maria"
    # The webhook heard the request and the escalation (once), signed, without the input.
    requests = await receiver.wait_for(2)
    await asyncio.sleep(0.2)  # a second escalation notification would have arrived by now
    kinds = [r.headers["x-capgate-event"] for r in requests]
    assert sorted(kinds) == ["capability.approval_escalated", "capability.approval_requested"]
    hook = requests[kinds.index("capability.approval_escalated")]
    body = orjson.loads(hook.body)
    assert body["type"] == "capability.approval_escalated"
    assert body["approval_id"] == approval.id
    assert body["escalation_roles"] == ["manager"]
    assert body["requester"]["id"] == "alice"
    for secret in ("o-1001", "damaged", "50.0"):
        assert secret not in hook.body.decode()
    assert verify(
        HOOK_SECRET,
        hook.body,
        timestamp=hook.headers["x-capgate-timestamp"],
        signature=hook.headers["x-capgate-signature"],
        now=time.time(),
    )


async def test_the_cli_and_the_mcp_approval_tool_show_the_progress(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    mcp = McpEnv(gw=env.gw, audit=env.audit, orders_address=env.orders_address)
    async with mcp.client() as client:
        asked = await client.call_tool("pay_refund", ASKED)
        assert asked.structured_content is not None, asked
        approval_id = asked.structured_content["approval_id"]
        assert asked.structured_content["quorum"] == 2
        record = await stored(env, approval_id)
        approval = types_pb2.Approval(id=approval_id, input_hash=record.input_hash)
        await decide(env, approval, admin_as("bob", "approver"))
        status = await client.call_tool(
            "capgate_approval_status", {"approval_id": approval_id, "resume": False}
        )
    assert status.structured_content is not None
    progress = status.structured_content
    assert (progress["status"], progress["quorum"], progress["approvals_received"]) == (
        "pending",
        2,
        1,
    )
    texts = [c.text for c in status.content]  # type: ignore[union-attr]
    assert any("Approvals: 1 of 2." in t for t in texts)
    admin = f"127.0.0.1:{env.port('admin')}"
    bearer = token("bob", audience="capgate-admin", sub="carol", roles=["approver"])
    base = ["--admin", admin, "--insecure", "--token", bearer]
    assert await asyncio.to_thread(cli, [*base, "list"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[-2:] == ["APPROVALS", "HASH"]
    (row,) = [line for line in table if line.startswith(approval_id)]
    assert row.split()[-2] == "1/2"
    assert await asyncio.to_thread(cli, [*base, "show", approval_id]) == 0
    shown = capsys.readouterr().out
    assert "approvals:           1 of 2\n" in shown
    assert "approved by:         bob (test-idp)\n" in shown
