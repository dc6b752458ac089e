"""A caller's cancel at every await point of a call a standing grant covers (issue 25's sweep,
tests/cancelpoints.py, applied to ADR 0038): the cancel lands exactly at the k-th suspension —
before the take, while the take's script is in flight (its reply then never read), between the
take and the upstream, at the upstream, during the settlement — and after each run:

- exactly one terminal event, the envelope's truth, and a keyed call's journal as the upstream
  left it (check_trail_and_journal);
- the grant's uses equal what reached the upstream: a use whose call never went out is given
  back (a take whose reply was lost is voided), one that did is kept, never counted twice;
- no approval record is left pending: a covered call asks nobody, and a cancelled one neither.

The same on the MCP listener's runner (it answers a cancelled call instead of raising, ADR
0039): its answer carries the grant id exactly when the call was covered and went out.
The real gateway (tests/grants), a real Redis, the example upstream logging every call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis

from capgate.v1 import types_pb2
from gateway.pipeline import runner as pipeline
from gateway.pipeline.call import Call
from gateway.state.approvals.grants import GrantRecord, RedisGrantStore
from gateway.state.embedded import RedisProcess
from gateway.transport.mcp import execute
from tests.cancelpoints import REPEAT, answered, check_trail_and_journal, run_cancelled
from tests.gateway.harness import Env
from tests.grants.conftest import ALICE, PREFIX, new_grant

pytestmark = [pytest.mark.integration]

REFUND = {"order_id": "o-1003", "amount": 50, "reason": "damaged"}
_serial = iter(range(1_000_000))


def _call(env: Env, key: str, surface: str = "agent") -> Call:
    return Call(
        snapshot=env.gw.holder.current,
        surface=surface,
        actor=ALICE,
        capability_id="pay.refund",
        raw_input=orjson.dumps(REFUND),
        idempotency_key=key,
    )


async def _plain(env: Env) -> Call:
    return _call(env, "")


async def _keyed(env: Env) -> Call:
    return _call(env, f"grant-sweep-{next(_serial)}")


FLOWS: dict[str, Callable[[Env], Awaitable[Call]]] = {"covered": _plain, "covered-keyed": _keyed}


async def _reset(env: Env, redis: aioredis.Redis) -> GrantRecord:
    """No grant, approval, limit or journal state, a fresh upstream; then one grant of 10 uses."""
    async for key in redis.scan_iter(match=f"{PREFIX}:*", count=1000):
        await redis.delete(key)
    await env.reset_upstream()
    store = env.gw.runtime.grants
    assert isinstance(store, RedisGrantStore)
    return await store.create(new_grant(env.gw.runtime.wall(), max_uses=10))


async def _pending(redis: aioredis.Redis) -> int:
    count = 0
    async for key in redis.scan_iter(match=f"{PREFIX}:{{apr:*", count=1000):
        if await redis.type(key) == b"hash" and await redis.hget(key, "status") == b"pending":
            count += 1
    return count


async def _check(
    env: Env, redis: aioredis.Redis, grant: GrantRecord, call: Call, where: str
) -> Any:
    end = await check_trail_and_journal(env, call, where)
    ran = call.state != types_pb2.EXECUTION_STATE_NOT_STARTED
    store = env.gw.runtime.grants
    assert isinstance(store, RedisGrantStore)
    now = await store.get(grant.id)
    assert now is not None, where
    assert now.uses == (1 if ran else 0), (where, now.uses, call.state, end["event"])
    assert await _pending(redis) == 0, where
    return end


@pytest.mark.timeout(600)
@pytest.mark.parametrize("flow", sorted(FLOWS))
async def test_a_cancel_at_every_await_point_keeps_the_grants_count(
    env: Env, redis_server: RedisProcess, flow: str
) -> None:
    redis = aioredis.from_url(redis_server.url)
    try:
        grant = await _reset(env, redis)
        call = await FLOWS[flow](env)
        points = await run_cancelled(call, env, pipeline.INVOKE, cancel_at=None)
        end = await _check(env, redis, grant, call, f"{flow} uncancelled")
        assert end["event"] == "capability.completed" and end["grant_id"] == grant.id, end
        assert points >= 3, points
        for _ in range(REPEAT):
            for k in range(1, points + 1):
                grant = await _reset(env, redis)
                call = await FLOWS[flow](env)
                await run_cancelled(call, env, pipeline.INVOKE, cancel_at=k)
                await _check(env, redis, grant, call, f"{flow} cancelled at suspension {k}")
        print(f"{flow}: {points} await points swept")
    finally:
        await redis.aclose()


@pytest.mark.timeout(600)
async def test_an_mcp_call_cancelled_at_every_point_keeps_the_count_and_names_the_grant(
    env: Env, redis_server: RedisProcess
) -> None:
    redis = aioredis.from_url(redis_server.url)
    try:
        grant = await _reset(env, redis)
        call = _call(env, "", surface="mcp")
        points = await run_cancelled(call, env, pipeline.INVOKE, None, runner=execute.run)
        await _check(env, redis, grant, call, "mcp uncancelled")
        assert answered.pop(id(call)).grant_id == grant.id
        for _ in range(REPEAT):
            for k in range(1, points + 1):
                grant = await _reset(env, redis)
                call = _call(env, "", surface="mcp")
                await run_cancelled(call, env, pipeline.INVOKE, k, runner=execute.run)
                await _check(env, redis, grant, call, f"mcp cancelled at suspension {k}")
                answer = answered.pop(id(call), None)
                ran = call.state != types_pb2.EXECUTION_STATE_NOT_STARTED
                if answer is not None and ran:
                    assert answer.grant_id == grant.id, (k, answer)
        print(f"mcp: {points} await points swept")
    finally:
        await redis.aclose()
