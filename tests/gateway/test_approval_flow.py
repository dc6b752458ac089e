"""The approval flow end to end through the real server, real Redis and the real upstream
(seed 001 stage 8 and "Resumption", DESIGN §12)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis

from capgate.v1 import admin_pb2, gateway_pb2, types_pb2
from gateway.state.embedded import RedisProcess
from tests.gateway.harness import Env

pytestmark = pytest.mark.integration

REFUND = "/orders.v1.Orders/RefundOrder"


def code(result: Any) -> str:
    err = result.failed if result.WhichOneof("outcome") == "failed" else result.cancelled
    return types_pb2.ErrorCode.Name(err.code).removeprefix("ERROR_CODE_")


async def request_approval(
    env: Env, amount: float = 800, actor: str = "alice", listener: str = "agents"
) -> types_pb2.Approval:
    result = await env.invoke(
        "orders.refund", {"order_id": "o-1001", "amount": amount}, actor=actor, listener=listener
    )
    assert result.WhichOneof("outcome") == "approval_required", result
    return result.approval_required.approval


async def decide(
    env: Env,
    approval: types_pb2.Approval,
    *,
    approve: bool = True,
    by: str = "bob",
    input_hash: str | None = None,
) -> admin_pb2.DecideApprovalResponse:
    verdict = admin_pb2.VERDICT_APPROVE if approve else admin_pb2.VERDICT_REJECT
    return await env.admin().DecideApproval(
        admin_pb2.DecideApprovalRequest(
            approval_id=approval.id,
            verdict=verdict,
            note="test",
            input_hash=input_hash if input_hash is not None else approval.input_hash,
        ),
        metadata=env.metadata("admin", by),
    )


def record_key(approval_id: str) -> str:
    return f"capgate-test:{{apr:{approval_id}}}"


async def test_lifecycle_runs_the_upstream_exactly_once(env: Env) -> None:
    await env.reset_upstream()
    approval = await request_approval(env)
    assert approval.input_hash and approval.status == types_pb2.APPROVAL_STATUS_PENDING
    assert not approval.input_json  # callers never get the stored input back
    decided = await decide(env, approval)
    assert (
        not decided.HasField("error")
        and decided.approval.status == types_pb2.APPROVAL_STATUS_APPROVED
    )
    assert await env.upstream_calls(REFUND) == 0  # deciding executes nothing
    resumed = await env.resume(approval.id)
    assert resumed.WhichOneof("outcome") == "completed", resumed
    assert resumed.approval_id == approval.id
    assert await env.upstream_calls(REFUND) == 1
    stats = await env.stats()
    assert stats.log[-1].approval_id == approval.id
    events = await env.events_for(resumed.execution_id)
    names = [e["event"] for e in events]
    assert names[0] == "capability.requested" and events[0]["approval_id"] == approval.id
    assert "capability.approval_consumed" in names and names[-1] == "capability.completed"
    again = await env.resume(approval.id)  # the stored envelope, not a second run
    assert again == resumed
    assert await env.upstream_calls(REFUND) == 1


async def test_resume_checks_answer_in_seed_order(env: Env, redis_server: RedisProcess) -> None:
    pending = await request_approval(env)
    assert code(await env.resume(pending.id)) == "APPROVAL_PENDING"
    rejected = await request_approval(env)
    assert not (await decide(env, rejected, approve=False)).HasField("error")
    assert code(await env.resume(rejected.id)) == "APPROVAL_REJECTED"
    expired = await request_approval(env)
    await decide(env, expired)
    client = aioredis.Redis.from_url(redis_server.url)
    try:
        await client.hset(record_key(expired.id), "expires_at", "1000")
        assert code(await env.resume(expired.id)) == "APPROVAL_EXPIRED"
        tampered = await request_approval(env)
        await decide(env, tampered)
        evil = orjson.dumps({"order_id": "o-1001", "amount": 9999})
        await client.hset(record_key(tampered.id), "input", evil)
        await env.reset_upstream()
        assert code(await env.resume(tampered.id)) == "APPROVAL_INPUT_MISMATCH"
        assert await env.upstream_calls() == 0
        crashed = await request_approval(env)
        await decide(env, crashed)
        await client.hset(record_key(crashed.id), "status", "consumed")  # consumed, outcome lost
        result = await env.resume(crashed.id)
        assert code(result) == "APPROVAL_CONSUMED"
        assert result.execution_state == types_pb2.EXECUTION_STATE_UNKNOWN
        assert await env.upstream_calls() == 0  # never re-run
    finally:
        await client.aclose()


async def test_self_approval_and_a_stale_hash_are_refused(env: Env) -> None:
    mine = await request_approval(env, actor="carol")
    refused = await decide(env, mine, by="carol")
    assert types_pb2.ErrorCode.Name(refused.error.code) == "ERROR_CODE_APPROVAL_SELF_APPROVAL"
    stale = await decide(env, mine, input_hash="0" * 64)
    assert types_pb2.ErrorCode.Name(stale.error.code) == "ERROR_CODE_APPROVAL_INPUT_MISMATCH"
    lacking = await decide(env, mine, by="alice")
    assert types_pb2.ErrorCode.Name(lacking.error.code) == "ERROR_CODE_FORBIDDEN"


async def test_another_actor_or_surface_cannot_resume_and_sees_not_found(env: Env) -> None:
    approval = await request_approval(env)
    await decide(env, approval)
    other = await env.resume(approval.id, actor="carol")
    unknown = await env.resume("no-such-approval", actor="carol")
    assert code(other) == code(unknown) == "APPROVAL_NOT_FOUND"
    assert other.failed == unknown.failed
    via_local = await env.resume(approval.id, actor="alice", listener="local")
    assert code(via_local) == "APPROVAL_NOT_FOUND"
    get = await env.gateway().GetApproval(
        gateway_pb2.GetApprovalRequest(approval_id=approval.id),
        metadata=env.metadata("agents", "carol"),
    )
    assert types_pb2.ErrorCode.Name(get.error.code) == "ERROR_CODE_APPROVAL_NOT_FOUND"
    mine = await env.gateway().GetApproval(
        gateway_pb2.GetApprovalRequest(approval_id=approval.id),
        metadata=env.metadata("agents", "alice"),
    )
    assert mine.approval.status == types_pb2.APPROVAL_STATUS_APPROVED
    assert (await env.resume(approval.id)).WhichOneof("outcome") == "completed"


async def test_fifty_concurrent_resumes_execute_once(env: Env) -> None:
    approval = await request_approval(env)
    await decide(env, approval)
    await env.reset_upstream()
    results = await asyncio.gather(*(env.resume(approval.id) for _ in range(50)))
    assert await env.upstream_calls(REFUND) == 1
    completed = [r for r in results if r.WhichOneof("outcome") == "completed"]
    assert len({r.execution_id for r in completed}) == 1  # late ones get the stored envelope
    assert all(
        code(r) == "APPROVAL_CONSUMED" for r in results if r.WhichOneof("outcome") != "completed"
    )


async def test_wait_approval_returns_when_decided(env: Env) -> None:
    approval = await request_approval(env)
    md = env.metadata("agents", "alice")
    request = gateway_pb2.WaitApprovalRequest(approval_id=approval.id)
    request.timeout.FromSeconds(10)
    waiter = asyncio.ensure_future(env.gateway().WaitApproval(request, metadata=md))
    await asyncio.sleep(0.2)
    assert not waiter.done()
    await decide(env, approval)
    answer = await asyncio.wait_for(waiter, 5)
    assert answer.approval.status == types_pb2.APPROVAL_STATUS_APPROVED


async def test_a_schema_change_since_approval_is_refused(env: Env) -> None:
    approval = await request_approval(env)
    await decide(env, approval)
    old = env.gw.settings
    caps = []
    for original in old.capabilities:
        cap = original
        if cap.id == "orders.refund":
            schema = dict(cap.input_schema or {})
            props = dict(schema["properties"])
            props["amount"] = {"type": "number", "maximum": 100}
            cap = dataclasses.replace(cap, input_schema={**schema, "properties": props})
        caps.append(cap)
    await env.gw.reload(dataclasses.replace(old, capabilities=tuple(caps)))
    try:
        await env.reset_upstream()
        result = await env.resume(approval.id)
        assert code(result) == "INPUT_INVALID"
        assert await env.upstream_calls() == 0
    finally:
        await env.gw.reload(old)


async def test_without_an_approval_store_the_gate_answers_unavailable(env: Env) -> None:
    store = env.gw.runtime.approvals
    env.gw.runtime.approvals = None
    try:
        result = await env.invoke("orders.refund", {"order_id": "o-1001", "amount": 800})
        assert code(result) == "APPROVAL_UNAVAILABLE"
        assert code(await env.resume("anything")) == "APPROVAL_NOT_FOUND"
    finally:
        env.gw.runtime.approvals = store


async def _reload_with(env: Env, change: Any) -> Any:
    """Swap in a snapshot with `change(capabilities)`; returns the old settings."""
    old = env.gw.settings
    await env.gw.reload(dataclasses.replace(old, capabilities=tuple(change(old.capabilities))))
    return old


async def test_a_capability_removed_since_approval_is_not_executed(env: Env) -> None:
    approval = await request_approval(env)
    await decide(env, approval)
    old = await _reload_with(env, lambda caps: [c for c in caps if c.id != "orders.refund"])
    try:
        await env.reset_upstream()
        result = await env.resume(approval.id)
        assert code(result) == "CAPABILITY_NOT_FOUND"
        assert await env.upstream_calls() == 0
    finally:
        await env.gw.reload(old)
    # Restored: the approval was never consumed by the refused attempt and still runs once.
    assert (await env.resume(approval.id)).WhichOneof("outcome") == "completed"


async def test_an_anonymous_actor_cannot_request_an_approval(env: Env) -> None:
    def gated(caps: Any) -> list[Any]:
        return [
            dataclasses.replace(c, approval=dataclasses.replace(c.approval, required=True))
            if c.id == "orders.get"
            else c
            for c in caps
        ]

    old = await _reload_with(env, gated)
    try:
        await env.reset_upstream()
        result = await env.invoke(
            "orders.get", {"order_id": "o-1001"}, actor=None, listener="local"
        )
        assert code(result) == "UNAUTHENTICATED"
        assert await env.upstream_calls() == 0
    finally:
        await env.gw.reload(old)
