"""Fixtures of the approve-with-edits tests: the example upstream, the session Redis and the real
gateway (in-process, real loopback listeners, an admin listener) from tests/edits/gateway.yaml."""

from __future__ import annotations

import tempfile
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
PREFIX = "capgate-edits-test"


@pytest.fixture(scope="module")
async def orders() -> AsyncIterator[str]:
    server, port = await serve_orders("127.0.0.1:0")
    yield f"127.0.0.1:{port}"
    await server.stop(0)


@pytest.fixture(scope="module")
async def edits_env(orders: str, redis_server: RedisProcess) -> AsyncIterator[Env]:
    run_dir = tempfile.mkdtemp(prefix="cg-")
    environ = gateway_environ(orders, redis_server.url, run_dir)
    settings = load_settings(HERE / "gateway.yaml", environ=environ)
    memory = MemorySink()
    gw = await start(settings, extra_sinks=[memory])
    env = Env(gw=gw, audit=memory, orders_address=orders, socket_path=f"{run_dir}/capgate.sock")
    yield env
    for channel in env.channels.values():
        await channel.close()
    await gw.stop(0.5)


@pytest.fixture
async def env(edits_env: Env, redis_server: RedisProcess) -> Env:
    """The module's gateway with no approvals, limits or journal left, and a reset upstream."""
    client = aioredis.from_url(redis_server.url)
    async for key in client.scan_iter(match=f"{PREFIX}:*"):
        await client.delete(key)
    await client.aclose()
    await edits_env.reset_upstream()
    edits_env.audit.events.clear()
    return edits_env
