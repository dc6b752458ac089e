"""Cancellation is an input (issue 25, "test the family"): each flow runs once to count the
points where the pipeline's task suspends, then once per point with the caller's cancel landing
exactly there (the task is cancelled at its k-th suspension, found by walking its await chain:
an injected cancellation point, never a sleep), and after each run:

- exactly one terminal event per `capability.requested`;
- the idempotency journal holds what the upstream really did: no key left running, a key free
  only when nothing was sent, a completed call recorded as completed (never as cancelled);
- an approval is consumed iff an attempt went out, and a pending approval exists iff the
  requester was told about it;
- a budget's spend equals what reached the upstream.

The real gateway (in-process, its runtime and snapshot), a real Redis, the real example
upstream, which logs every call with its execution id. `make sweep` repeats every point.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis

from capgate.v1 import types_pb2
from gateway.model import Actor
from gateway.pipeline import runner as pipeline
from gateway.pipeline.call import Call
from tests.cancelpoints import REPEAT, check_trail_and_journal, run_cancelled, suspension
from tests.gateway.harness import Env
from tests.gateway.test_approval_flow import decide
from tests.limits.conftest import PREFIX
from tests.limits.test_limits_flow import refund

pytestmark = [pytest.mark.integration]

ALICE = Actor(id="alice", kind="user", issuer="test-idp", roles=("agent",))
NOT_STARTED = types_pb2.EXECUTION_STATE_NOT_STARTED


@dataclass
class Flow:
    """One kind of call: `prepare` sets up what it needs (an approved approval, ...) and
    returns the Call; `amount` is what a run that reached the upstream spends."""

    name: str
    prepare: Callable[[Env], Awaitable[Call]]
    stages: tuple[pipeline.Stage, ...]
    budget: str | None = None
    amount: float = 0.0


def _call(env: Env, capability: str, value: Any, key: str = "") -> Call:
    return Call(
        snapshot=env.gw.holder.current,
        surface="agent",
        actor=ALICE,
        capability_id=capability,
        raw_input=orjson.dumps(value),
        idempotency_key=key,
    )


_serial = iter(range(1_000_000))


async def _plain(env: Env) -> Call:
    return _call(env, "orders.get", {"order_id": "o-1001"})


async def _keyed(env: Env) -> Call:
    return _call(env, "orders.refund", refund(2, reason="urgent"), f"sweep-{next(_serial)}")


async def _asks(env: Env) -> Call:
    return _call(env, "billing.reviewed_refund", refund(3), f"sweep-{next(_serial)}")


async def _approved(env: Env, value: dict[str, Any]) -> Call:
    asked = await env.invoke(
        "billing.reviewed_refund", value, idempotency_key=f"sw-{next(_serial)}"
    )
    assert asked.WhichOneof("outcome") == "approval_required", asked
    await decide(env, asked.approval_required.approval, by="bob")
    call = _call(env, "", None)
    call.raw_input, call.approval_id = b"", asked.approval_required.approval.id
    return call


async def _resume(env: Env) -> Call:
    return await _approved(env, refund(4))


async def _over_budget(env: Env) -> Call:
    # Over billing.refund's 100 with on_exceed: require-approval: the Resume is let past once.
    asked = await env.invoke("billing.refund", refund(150), idempotency_key=f"sw-{next(_serial)}")
    assert asked.WhichOneof("outcome") == "approval_required", asked
    await decide(env, asked.approval_required.approval, by="bob")
    call = _call(env, "", None)
    call.raw_input, call.approval_id = b"", asked.approval_required.approval.id
    return call


FLOWS = [
    Flow("plain", _plain, pipeline.INVOKE),
    Flow("keyed-budget", _keyed, pipeline.INVOKE, budget="refund_budget", amount=2),
    Flow("approval-request", _asks, pipeline.INVOKE),
    Flow("keyed-resume", _resume, pipeline.RESUME, budget="refund_budget", amount=4),
    Flow("over-budget-resume", _over_budget, pipeline.RESUME, budget="approved_budget", amount=150),
]


async def _reset(env: Env, redis: aioredis.Redis) -> None:
    """No limit state and no approvals: each run is checked on its own (and the pending cap
    per actor is never reached by the sweep's own requests)."""
    for pattern in (f"{PREFIX}:{{lim}}:*", f"{PREFIX}:{{apr*"):
        async for key in redis.scan_iter(match=pattern, count=1000):
            await redis.delete(key)
    env.gw.runtime.wall.advance(3600 * 25)  # type: ignore[attr-defined]  # rates refill
    await env.reset_upstream()  # the order's refundable total, and the call log, anew


async def _spent(redis: aioredis.Redis, limit: str) -> float:
    total = 0.0
    async for key in redis.scan_iter(match=f"{PREFIX}:{{lim}}:{limit}:*"):
        if b":apr:" not in key:
            total += float(await redis.hget(key, "spent") or 0)
    return total


async def _pending_of(env: Env, redis: aioredis.Redis, execution_id: str) -> list[str]:
    """Approval records this execution requested that are still pending."""
    out = []
    async for key in redis.scan_iter(match=f"{PREFIX}:{{apr:*", count=1000):
        if await redis.type(key) != b"hash":
            continue
        fields = await redis.hmget(key, "requesting_execution_id", "status", "id")
        if fields[0] == execution_id.encode() and fields[1] == b"pending":
            out.append(fields[2].decode())
    return out


async def _check(env: Env, redis: aioredis.Redis, flow: Flow, call: Call, k: int | None) -> None:
    where = f"{flow.name} cancelled at suspension {k}"
    # One terminal event, the envelope's truth, the journal (tests/cancelpoints.py).
    end = await check_trail_and_journal(env, call, where)
    eid, ran = call.execution_id, call.state != NOT_STARTED
    # An approval is consumed iff an attempt went out; a pending one only if it was announced.
    if call.approval_id and flow.stages is pipeline.RESUME:
        record = await env.gw.runtime.approvals.get(call.approval_id)
        status = str(record.status)
        if ran:
            assert status in {"consumed", "executed"}, (where, status)
        else:
            assert status == "approved", (where, status)
    announced = end["event"] == "capability.approval_requested"
    pending = await _pending_of(env, redis, eid)
    assert len(pending) == (1 if announced else 0), (where, end["event"], pending)
    # A budget's spend equals what reached the upstream. One documented exception (ADR 0022,
    # docs/limits.md): an approval let past a budget keeps its amount counted for whichever
    # Resume consumes it, so a Resume cancelled before consuming leaves it reserved; the next
    # Resume then runs on that one count, never a second.
    if flow.budget is not None:
        spent = await _spent(redis, flow.budget)
        reserved = flow.name == "over-budget-resume" and not ran and spent == flow.amount
        assert spent == (flow.amount if ran or reserved else 0.0), (where, spent, call.state)
    # Nothing is lost: an approval the cancelled Resume left approved runs once, counted once.
    if call.approval_id and flow.stages is pipeline.RESUME and not ran:
        again = await env.resume(call.approval_id)
        assert again.WhichOneof("outcome") == "completed", (where, again)
        if flow.budget is not None:
            assert await _spent(redis, flow.budget) == flow.amount, where


@pytest.mark.timeout(600)  # about 15 points a flow, each prepared and checked on its own
@pytest.mark.parametrize("flow", FLOWS, ids=[f.name for f in FLOWS])
async def test_a_cancel_at_every_await_point_keeps_every_promise(env: Env, flow: Flow) -> None:
    redis = aioredis.from_url(env.gw.settings.redis.url)
    try:
        await _reset(env, redis)
        call = await flow.prepare(env)
        points = await run_cancelled(call, env, flow.stages, cancel_at=None)
        await _check(env, redis, flow, call, None)
        assert points >= 3, points  # the sweep covers real await points
        for _ in range(REPEAT):
            for k in range(1, points + 1):
                await _reset(env, redis)
                call = await flow.prepare(env)
                await run_cancelled(call, env, flow.stages, cancel_at=k)
                await _check(env, redis, flow, call, k)
        print(f"{flow.name}: {points} await points swept")
    finally:
        await redis.aclose()


def test_the_driver_names_every_frame_of_a_suspended_chain() -> None:
    async def inner() -> None:
        await asyncio.sleep(0)

    async def outer() -> None:
        await inner()

    async def main() -> int:
        task = asyncio.ensure_future(outer())
        await asyncio.sleep(0)
        depth = len(suspension(task))
        await task
        return depth

    assert asyncio.run(main()) >= 2
