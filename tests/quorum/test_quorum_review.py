"""Issue 28 review of quorum and escalation, end to end (docs/approvals.md "Quorum and
separation of duties", "Escalation", "Who may decide"): escalation never loosens a part of the
requirement that has none; the requester is never one of a quorum's approvers; an escalation is
published exactly once even when the first decision after it is due is refused; who may list an
approval is who may decide it; an escalation decided at once notifies nobody. The real server,
the real Redis, the example upstream and a webhook receiver on loopback."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator

import orjson
import pytest

from capgate.v1 import admin_pb2, types_pb2
from gateway.audit.sinks import MemorySink
from gateway.process.serve import start
from gateway.state.approvals.records import Status
from tests.gateway.harness import Env
from tests.notify.notifykit import Receiver
from tests.quorum.test_quorum_flow import (
    admin_as,
    caller,
    code,
    decide,
    request,
    stored,
    stream,
    trail,
)

pytestmark = pytest.mark.integration


@pytest.fixture
async def lenient(env: Env) -> AsyncIterator[Env]:
    """A replica on the same Redis with approvals.reject_self_approval off."""
    settings = env.gw.settings
    approvals = dataclasses.replace(settings.approvals, reject_self_approval=False)
    memory = MemorySink()
    second = await start(dataclasses.replace(settings, approvals=approvals), extra_sinks=[memory])
    replica = Env(gw=second, audit=memory, orders_address=env.orders_address, socket_path="")
    yield replica
    for channel in replica.channels.values():
        await channel.close()
    await second.stop(0.5)


async def due_now(env: Env, approval_id: str) -> None:
    """Bring the record's `escalate_at` to now, as if an hour had passed, while the escalation
    index still says an hour on: no sweep marks it before the test's own call does."""
    store = env.gw.runtime.approvals
    assert store is not None
    await env.gw.redis.hset(store.keys.record(approval_id), "escalate_at", repr(time.time() - 1))


async def test_escalation_never_loosens_a_part_without_one(env: Env) -> None:
    # treasury (the capability, no escalation), manager (a policy, escalating to on-call after a
    # second) and the default approver role (a policy rule without an approval block).
    approval = await request(env, "pay.treasury")
    assert list(approval.approvers.roles) == ["approver", "manager", "treasury"]
    assert list(approval.escalation_roles) == ["approver", "oncall", "treasury"]
    await asyncio.sleep(1.1)  # due: DECIDE lets escalation holders decide from now on
    alone = await decide(env, approval, admin_as("olga", "oncall"))
    assert code(alone.error) == "FORBIDDEN"
    assert (await stored(env, approval.id)).status is Status.PENDING
    done = await decide(env, approval, admin_as("otto", "oncall", "treasury", "approver"))
    assert done.approval.status == types_pb2.APPROVAL_STATUS_APPROVED, done


async def test_escalation_comes_at_the_latest_escalate_after(env: Env) -> None:
    approval = await request(env, "pay.slow")  # 1s (capability) and 1h (policy)
    record = await stored(env, approval.id)
    assert record.escalate_at is not None
    assert record.escalate_at - record.created_at == pytest.approx(3600, abs=1)
    assert list(approval.escalation_roles) == ["director", "manager"]
    await asyncio.sleep(1.1)
    early = await decide(env, approval, admin_as("maria", "manager"))
    assert code(early.error) == "FORBIDDEN"


async def test_the_requester_never_votes_on_a_quorum_even_with_self_approval_allowed(
    env: Env, lenient: Env
) -> None:
    requester = caller("alice", "agent", "approver")
    approval = await request(lenient, "pay.refund", by=requester)
    own = await decide(lenient, approval, admin_as("alice", "agent", "approver"))
    assert code(own.error) == "APPROVAL_SELF_APPROVAL"
    assert (await stored(env, approval.id)).votes == ()


async def test_a_quorum_the_requester_voted_in_is_never_resumed(env: Env, lenient: Env) -> None:
    approval = await request(lenient, "pay.refund")
    await decide(lenient, approval, admin_as("bob", "approver"))
    done = await decide(lenient, approval, admin_as("carol", "approver"))
    assert done.approval.status == types_pb2.APPROVAL_STATUS_APPROVED
    # A record decided before the requester was refused a vote: its first vote is alice's.
    store = env.gw.runtime.approvals
    assert store is not None
    key = store.keys.record(approval.id)
    votes = orjson.loads(await env.gw.redis.hget(key, "votes"))
    votes[0].update(issuer="test-idp", id="alice")
    await env.gw.redis.hset(key, "votes", orjson.dumps(votes))
    resumed = await lenient.resume(approval.id)
    assert code(resumed.failed) == "APPROVAL_SELF_APPROVAL", resumed
    assert (await stored(env, approval.id)).status is Status.APPROVED
    assert "/orders.v1.Orders/RefundOrder" not in (await env.stats()).calls


async def test_an_escalation_a_refused_vote_found_due_is_still_published_once(
    env: Env, receiver: Receiver
) -> None:
    approval = await request(env, "pay.wire.later")
    first = await decide(env, approval, admin_as("fiona", "approver", "finance"))
    assert first.approval.approvals_received == 1
    await due_now(env, approval.id)
    refused = await decide(env, approval, admin_as("fred", "approver", "finance"))
    assert code(refused.error) == "FORBIDDEN"  # the roles still missing: risk
    assert (await stored(env, approval.id)).escalated_at is None
    store = env.gw.runtime.approvals
    assert store is not None
    assert await store.escalate_sweep(now=time.time() + 3601) == 1
    assert (await stored(env, approval.id)).escalated_at is not None
    assert len(await trail(env, "capability.approval_escalated", approval.id)) == 1
    assert (await stream(env, approval.id)).count("escalated") == 1
    requests = await receiver.wait_for(2)
    kinds = sorted(r.headers["x-capgate-event"] for r in requests)
    assert kinds == ["capability.approval_escalated", "capability.approval_requested"]


async def test_an_approval_due_to_escalate_is_listed_to_whom_may_decide_it(env: Env) -> None:
    approval = await request(env, "pay.later")
    manager = admin_as("maria", "manager")

    async def listed() -> list[str]:
        reply = await env.admin().ListApprovals(
            admin_pb2.ListApprovalsRequest(), metadata=manager, timeout=10
        )
        return [a.id for a in reply.approvals]

    assert approval.id not in await listed()
    await due_now(env, approval.id)
    assert (await stored(env, approval.id)).escalated_at is None
    assert approval.id in await listed()  # as DECIDE would let maria decide it now


async def test_an_escalation_decided_at_once_is_audited_but_notifies_nobody(
    env: Env, receiver: Receiver
) -> None:
    approval = await request(env, "pay.later")
    await due_now(env, approval.id)
    done = await decide(env, approval, admin_as("maria", "manager"))
    assert done.approval.status == types_pb2.APPROVAL_STATUS_APPROVED, done
    (escalated,) = await trail(env, "capability.approval_escalated", approval.id)
    assert escalated["status"] == "approved"
    assert await stream(env, approval.id) == ["requested", "escalated", "approved"]
    await receiver.wait_for(1)
    await asyncio.sleep(0.3)  # an escalation notification would have arrived by now
    kinds = [r.headers["x-capgate-event"] for r in receiver.requests]
    assert kinds == ["capability.approval_requested"]
