"""Fixtures of the grant admin tests: tests/grantadmin/gateway.yaml loaded by the real loader,
its snapshot (for the expression tests) and the real gateway serving it (in-process, real
loopback listeners, a real Redis of this package)."""

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
from gateway.config.settings import Settings
from gateway.pipeline.snapshot import Snapshot, build_snapshot
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from gateway.upstream.channels import ChannelPool
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import Env, token

HERE = Path(__file__).parent
PREFIX = "capgate-grants-test"


def admin_md(sub: str, *roles: str, **claims: Any) -> list[tuple[str, str]]:
    """An admin listener credential for `sub` holding `roles`. Valid for the listener's longest
    lifetime (1 h): test modules mint these at import, and a whole run on a slow machine takes
    longer than the harness's default 10 minutes."""
    bearer = token(
        "bob", audience="capgate-admin", lifetime=3600, sub=sub, roles=list(roles), **claims
    )
    return [("authorization", f"Bearer {bearer}")]


def grant_settings(orders_address: str, redis_url: str) -> Settings:
    environ = gateway_environ(orders_address, redis_url, tempfile.mkdtemp(prefix="cg-"))
    return load_settings(HERE / "gateway.yaml", environ=environ)


@pytest.fixture(scope="module")
async def snapshot() -> AsyncIterator[Snapshot]:
    """The config's snapshot; nothing is contacted (the upstream has a descriptor set)."""
    pool = ChannelPool()
    yield await build_snapshot(grant_settings("127.0.0.1:9", "redis://127.0.0.1:9"), pool)
    await pool.close()


@pytest.fixture(scope="module")
async def orders() -> AsyncIterator[str]:
    server, port = await serve_orders("127.0.0.1:0")
    yield f"127.0.0.1:{port}"
    await server.stop(0)


@pytest.fixture(scope="module")
async def grants_env(orders: str, redis_server: RedisProcess) -> AsyncIterator[Env]:
    memory = MemorySink()
    gw = await start(grant_settings(orders, redis_server.url), extra_sinks=[memory])
    env = Env(gw=gw, audit=memory, orders_address=orders, socket_path="")
    yield env
    for channel in env.channels.values():
        await channel.close()
    await gw.stop(0.5)


@pytest.fixture
async def env(grants_env: Env, redis_server: RedisProcess) -> Env:
    """The module's gateway with no grant or approval state and an empty trail."""
    client = aioredis.from_url(redis_server.url)
    async for key in client.scan_iter(match=f"{PREFIX}:*"):
        await client.delete(key)
    await client.aclose()
    grants_env.audit.events.clear()
    return grants_env
