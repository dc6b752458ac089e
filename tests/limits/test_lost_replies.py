"""Replies lost to a timeout, not only to a cancel (issue 25 item 3): a limit spend and an
approval request whose command ran in Redis but whose reply never came are undone when the
call never ran. Real gateways (in-process) whose Redis sits behind a relay that withholds
Redis's replies past the gateway's 2 s command timeout (tests/properties/redisproxy.py)."""

from __future__ import annotations

import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from capgate.v1 import types_pb2
from gateway.audit.sinks import MemorySink
from gateway.config.limitspec import BudgetSpec, ExprSite, LimitSpec
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from gateway.state.limits.store import Charge, RedisLimiter
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import Env
from tests.limits.conftest import HERE, PREFIX
from tests.limits.test_limits_flow import refund
from tests.properties.redisproxy import RedisRelay

pytestmark = [pytest.mark.integration]

GATEWAY_CONFIG = HERE.parent / "gateway" / "gateway.yaml"
PAST_TIMEOUT_S = 2.6  # the command timeout is 2 s (gateway/state/connections.py)


async def _gateway(config: Path, orders: str, relay: RedisRelay) -> Env:
    run_dir = tempfile.mkdtemp(prefix="cg-")
    settings = load_settings(config, environ=gateway_environ(orders, relay.url, run_dir))
    memory = MemorySink()
    gw = await start(settings, extra_sinks=[memory])
    return Env(gw=gw, audit=memory, orders_address=orders, socket_path=f"{run_dir}/capgate.sock")


@pytest.fixture
async def relay(limits_redis: RedisProcess) -> AsyncIterator[RedisRelay]:
    if limits_redis.process is None or limits_redis.process.poll() is not None:
        limits_redis.start()
    client = aioredis.from_url(limits_redis.url)
    await client.flushall()
    await client.aclose()
    port = int(limits_redis.url.rsplit(":", 1)[1].split("/")[0])
    relay = RedisRelay(port).start()
    yield relay
    relay.stop()


async def _spent(redis: RedisProcess) -> list[float]:
    client = aioredis.from_url(redis.url)
    try:
        return [
            float(await client.hget(key, "spent") or 0)
            async for key in client.scan_iter(match=f"{PREFIX}:{{lim}}:refund_budget:*")
            if b":apr:" not in key
        ]
    finally:
        await client.aclose()


async def _stop(env: Env) -> None:
    for channel in env.channels.values():
        await channel.close()
    await env.gw.stop(0.5)


async def test_a_spend_whose_reply_was_lost_is_given_back(
    orders: str, relay: RedisRelay, limits_redis: RedisProcess
) -> None:
    env = await _gateway(HERE / "gateway.yaml", orders, relay)
    try:
        # One call first: Redis then knows the script (an EVALSHA answered NOSCRIPT while
        # replies are held would never send the script itself).
        ran = await env.invoke("orders.refund", refund(5, reason="urgent"))
        assert ran.WhichOneof("outcome") == "completed", ran
        assert await _spent(limits_redis) == [5.0]
        relay.hold_replies(PAST_TIMEOUT_S)  # the script runs; its reply comes too late
        # refund_rate fails closed: the call is refused, NOT_STARTED, after the spend ran.
        refused = await env.invoke("orders.refund", refund(7, reason="urgent"))
        assert refused.failed.code == types_pb2.ERROR_CODE_UPSTREAM_UNAVAILABLE, refused
        assert refused.failed.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
        await env.gw.runtime.drain.settled(10)  # the undo runs after the answer
        # Spent by the script (5 + 7), given back by its receipt: what reached the upstream.
        assert await _spent(limits_redis) == [5.0]
    finally:
        await _stop(env)


async def test_an_approval_request_whose_reply_was_lost_leaves_no_reservation(
    orders: str, relay: RedisRelay, limits_redis: RedisProcess
) -> None:
    env = await _gateway(GATEWAY_CONFIG, orders, relay)
    try:
        # One request first: Redis then knows the approval scripts (see above).
        first = await env.invoke("orders.refund", {"order_id": "o-1001", "amount": 800})
        assert first.WhichOneof("outcome") == "approval_required", first
        relay.hold_replies(PAST_TIMEOUT_S)
        asked = await env.invoke("orders.refund", {"order_id": "o-1001", "amount": 801})
        assert asked.failed.code == types_pb2.ERROR_CODE_APPROVAL_UNAVAILABLE, asked
        await env.gw.runtime.drain.settled(10)  # the undo runs after the answer
        client = aioredis.from_url(limits_redis.url)
        try:  # only the first: no second record, no reservation against alice's pending cap
            pending = {
                key: await client.zrange(key, 0, -1)
                async for key in client.scan_iter(match="*apr-idx*")
                if await client.type(key) == b"zset" and b"actor" in key
            }
            records = [k async for k in client.scan_iter(match="*{apr:*")]
        finally:
            await client.aclose()
        assert len(records) == 1, records
        first_id = first.approval_required.approval.id.encode()
        assert pending and all(ids == [first_id] for ids in pending.values()), pending
    finally:
        await _stop(env)


async def test_a_check_arriving_after_its_give_back_spends_nothing(
    limits_redis: RedisProcess,
) -> None:
    """A lost reply does not mean the command ran already: it may still be queued. The
    give-back that finds no receipt marks it void, and the late check then spends nothing."""
    client = aioredis.from_url(limits_redis.url)
    try:
        site = ExprSite("x", 1, 1)
        spec = LimitSpec("late", "actor.id", site, budget=BudgetSpec("1", site, 100.0, 3600.0))
        limiter = RedisLimiter(client, prefix=f"{PREFIX}-late")
        await client.delete(limiter.key(spec, "alice"), limiter.receipt_key("e-late"))
        charges = [Charge(spec, "alice", 30.0)]
        assert not await limiter.give_back_receipt(charges, "e-late")  # nothing to give back
        now = time.time()
        late = await limiter.check(charges, now=now, receipt="e-late", receipt_ttl_s=60)
        assert await client.hget(limiter.key(spec, "alice"), "spent") is None, late
        # Another execution spends as usual.
        await limiter.check(charges, now=now, receipt="e-other", receipt_ttl_s=60)
        assert float(await client.hget(limiter.key(spec, "alice"), "spent")) == 30.0
    finally:
        await client.aclose()
