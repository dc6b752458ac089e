"""Fixtures of the limits tests: the example upstream, a real Redis, the real gateway
(in-process, real loopback listeners) from tests/limits/gateway.yaml, with an injected clock."""

from __future__ import annotations

import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from examples.orders.server import serve as serve_orders
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import Env

HERE = Path(__file__).parent
PREFIX = "capgate-limits-test"


class Clock:
    """The gateway's wall clock, moved by the test (the limit script's `now`)."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(scope="module")
async def orders() -> AsyncIterator[str]:
    server, port = await serve_orders("127.0.0.1:0")
    yield f"127.0.0.1:{port}"
    await server.stop(0)


@pytest.fixture(scope="module")
def limits_redis(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RedisProcess]:
    process = RedisProcess(tmp_path_factory.mktemp("limits-redis")).start()
    yield process  # type: ignore[misc]
    process.stop()


@pytest.fixture(scope="module")
async def limits_env(orders: str, limits_redis: RedisProcess) -> AsyncIterator[Env]:
    run_dir = tempfile.mkdtemp(prefix="cg-")
    environ = gateway_environ(orders, limits_redis.url, run_dir)
    settings = load_settings(HERE / "gateway.yaml", environ=environ)
    memory = MemorySink()
    gw = await start(settings, extra_sinks=[memory])
    env = Env(gw=gw, audit=memory, orders_address=orders, socket_path=f"{run_dir}/capgate.sock")
    yield env
    for channel in env.channels.values():
        await channel.close()
    await gw.stop(0.5)


@pytest.fixture
async def env(limits_env: Env, limits_redis: RedisProcess) -> AsyncIterator[Env]:
    """The module's gateway with a fresh clock, no limit state and a reset upstream."""
    if limits_redis.process is None or limits_redis.process.poll() is not None:
        limits_redis.start()  # an outage test stopped it: same port, same data
    client = aioredis.from_url(limits_redis.url)
    async for key in client.scan_iter(match=f"{PREFIX}:*"):
        await client.delete(key)
    await client.aclose()
    await limits_env.reset_upstream()
    limits_env.audit.events.clear()
    saved = limits_env.gw.runtime.wall
    limits_env.gw.runtime.wall = Clock()
    yield limits_env
    limits_env.gw.runtime.wall = saved
