"""The cancellation sweep (tests/cancelpoints.py) over cached capabilities: a hit (the lookup
and nothing upstream) and a miss that stores its output (the store after stage 12). After each
run: one terminal event, the envelope's truth (a hit never reached the upstream), the journal."""

from __future__ import annotations

import itertools

import orjson
import pytest
import redis.asyncio as aioredis

from gateway.model import Actor
from gateway.pipeline import runner as pipeline
from gateway.pipeline.call import Call
from tests.cache.conftest import PREFIX
from tests.cancelpoints import REPEAT, check_trail_and_journal, reached, run_cancelled
from tests.gateway.harness import Env

pytestmark = [pytest.mark.integration]

ALICE = Actor(id="alice", kind="user", issuer="test-idp", roles=("agent",))
_serial = itertools.count()
ORDER = {"order_id": "o-1001"}


def _call(env: Env) -> Call:
    return Call(
        snapshot=env.gw.holder.current,
        surface="agent",
        actor=ALICE,
        capability_id="orders.get",
        raw_input=orjson.dumps(ORDER),
        idempotency_key=f"cache-sweep-{next(_serial)}",
    )


async def _empty_cache(env: Env) -> None:
    client = aioredis.from_url(env.gw.settings.redis.url)
    try:
        async for key in client.scan_iter(match=f"{PREFIX}:*", count=1000):
            if b"{idem:" not in key:
                await client.delete(key)
    finally:
        await client.aclose()


async def _warm(env: Env) -> None:
    call = Call(
        snapshot=env.gw.holder.current,
        surface="agent",
        actor=ALICE,
        capability_id="orders.get",
        raw_input=orjson.dumps(ORDER),
    )
    await run_cancelled(call, env, pipeline.INVOKE, cancel_at=None)
    assert call.cache in {"hit", "miss"}, call.cache


@pytest.mark.timeout(300)
@pytest.mark.parametrize("hit", [True, False], ids=["hit", "miss-and-store"])
async def test_a_cancel_at_every_await_point_of_a_cached_call(env: Env, hit: bool) -> None:
    prepare = _warm if hit else _empty_cache
    await prepare(env)
    call = _call(env)
    points = await run_cancelled(call, env, pipeline.INVOKE, cancel_at=None)
    await check_trail_and_journal(env, call, "uncancelled")
    assert call.cache == ("hit" if hit else "miss"), call.cache
    assert points >= 3, points
    for k in [k for _ in range(REPEAT) for k in range(1, points + 1)]:
        await prepare(env)
        call = _call(env)
        await run_cancelled(call, env, pipeline.INVOKE, cancel_at=k)
        where = f"{'hit' if hit else 'miss'} cancelled at suspension {k}"
        await check_trail_and_journal(env, call, where)
        if call.cache == "hit":
            assert await reached(env, call.execution_id) == 0, where  # a hit sends nothing
    print(f"cache {'hit' if hit else 'miss'}: {points} await points swept")
