"""A limit reshaped by a reload (budget <-> rate, another window) keeps working, and a Redis
error reply to the limit script is Redis unavailable for each limit's `on_redis_down`, never
a failed call (review 2, item 4). Real gateway, real Redis, real upstream, a real reload."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import Env
from tests.limits.conftest import HERE, PREFIX
from tests.limits.test_limits_flow import GET, code, refund

pytestmark = [pytest.mark.integration]

BUDGET = "    budget: {amount: input.amount, max: 1000, window: 24h}\n  - name: refund_rate"
AS_RATE = "    rate: {limit: 100, window: 1s}\n  - name: refund_rate"


@pytest.fixture
async def reload_env(
    orders: str, limits_redis: RedisProcess, tmp_path: Path
) -> AsyncIterator[tuple[Env, Path, dict[str, str]]]:
    if limits_redis.process is None or limits_redis.process.poll() is not None:
        limits_redis.start()
    client = aioredis.from_url(limits_redis.url)
    async for key in client.scan_iter(match=f"{PREFIX}:*"):
        await client.delete(key)
    await client.aclose()
    shutil.copy(HERE / "policies.yaml", tmp_path / "policies.yaml")
    pb = str(HERE.parent.parent / "examples" / "orders" / "orders.pb")
    config = (HERE / "gateway.yaml").read_text().replace("../../examples/orders/orders.pb", pb)
    (tmp_path / "gateway.yaml").write_text(config)
    run_dir = tempfile.mkdtemp(prefix="cg-")
    environ = gateway_environ(orders, limits_redis.url, run_dir)
    settings = load_settings(tmp_path / "gateway.yaml", environ=environ)
    gw = await start(settings, extra_sinks=[MemorySink()])
    socket = f"{run_dir}/capgate.sock"
    env = Env(gw=gw, audit=MemorySink(), orders_address=orders, socket_path=socket)
    try:
        yield env, tmp_path / "gateway.yaml", environ
    finally:
        for channel in env.channels.values():
            await channel.close()
        await gw.stop(0.2)


async def reload_with(env: Env, path: Path, environ: dict[str, str], old: str, new: str) -> None:
    text = path.read_text()  # noqa: ASYNC240 - a small local file, in a test
    assert text.count(old) == 1
    path.write_text(text.replace(old, new))  # noqa: ASYNC240
    await env.gw.reload(load_settings(path, environ=environ))


async def test_a_budget_turned_into_a_rate_and_back_keeps_serving(
    reload_env: tuple[Env, Path, dict[str, str]],
) -> None:
    env, path, environ = reload_env
    assert (await env.invoke("orders.refund", refund(100))).WhichOneof("outcome") == "completed"
    await reload_with(env, path, environ, BUDGET, AS_RATE)
    for _ in range(3):
        done = await env.invoke("orders.refund", refund(100))
        assert done.WhichOneof("outcome") == "completed", done
    await reload_with(env, path, environ, AS_RATE, BUDGET)
    back = await env.invoke("orders.refund", refund(100))
    assert back.WhichOneof("outcome") == "completed", back


async def test_a_refused_limit_script_follows_on_redis_down(
    reload_env: tuple[Env, Path, dict[str, str]],
) -> None:
    env, _, _ = reload_env
    limiter = env.gw.runtime.limiter
    specs = {s.name: s for s in env.gw.settings.limits}
    # Values of the wrong type at the state keys: the script's reply is WRONGTYPE.
    await env.gw.redis.hset(limiter.key(specs["get_rate"], "alice"), "x", "1")
    await env.gw.redis.set(limiter.key(specs["refund_budget"], "alice"), "x")
    refunds = await env.upstream_calls("RefundOrder")
    opened = await env.invoke("orders.get", GET)  # get_rate fails open
    assert opened.WhichOneof("outcome") == "completed", opened
    closed = await env.invoke("orders.refund", refund(1))  # refund_budget fails closed
    assert code(closed) == "UPSTREAM_UNAVAILABLE" and closed.failed.retryable, closed
    assert await env.upstream_calls("RefundOrder") == refunds
