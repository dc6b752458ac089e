"""Fixtures of the quorum and escalation tests: tests/quorum/gateway.yaml through the real loader
and the real gateway (in-process, real loopback listeners), the example upstream, the session
Redis, and a webhook receiver on loopback (real HTTP)."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from examples.orders.server import serve as serve_orders
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import Env
from tests.notify.notifykit import Receiver

HERE = Path(__file__).parent
PREFIX = "capgate-quorum-test"
HOOK_SECRET = "quorum-hook-secret-0123456789-abcdef"


@pytest.fixture(scope="module")
async def orders() -> AsyncIterator[str]:
    server, port = await serve_orders("127.0.0.1:0")
    yield f"127.0.0.1:{port}"
    await server.stop(0)


@pytest.fixture(scope="module")
async def receiver() -> AsyncIterator[Receiver]:
    r = await Receiver().start()
    yield r
    await r.stop()


@pytest.fixture(scope="module")
async def quorum_env(
    orders: str, receiver: Receiver, redis_server: RedisProcess
) -> AsyncIterator[Env]:
    run_dir = tempfile.mkdtemp(prefix="cg-")
    environ: dict[str, Any] = {
        **gateway_environ(orders, redis_server.url, run_dir),
        "TEST_HOOK_URL": receiver.url,
        "TEST_HOOK_SECRET": HOOK_SECRET,
    }
    settings = load_settings(HERE / "gateway.yaml", environ=environ)
    memory = MemorySink()
    gw = await start(settings, extra_sinks=[memory])
    env = Env(gw=gw, audit=memory, orders_address=orders, socket_path="")
    yield env
    for channel in env.channels.values():
        await channel.close()
    await gw.stop(0.5)


@pytest.fixture
async def env(quorum_env: Env, receiver: Receiver, redis_server: RedisProcess) -> Env:
    """The module's gateway with no approvals left, a reset upstream, trail and receiver."""
    client = aioredis.from_url(redis_server.url)
    async for key in client.scan_iter(match=f"{PREFIX}:*"):
        await client.delete(key)
    await client.aclose()
    await quorum_env.reset_upstream()
    quorum_env.audit.events.clear()
    receiver.requests.clear()
    receiver.arrived.clear()
    return quorum_env
