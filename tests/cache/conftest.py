"""Fixtures of the cache tests: the example upstream (it counts the calls it receives), a real
Redis of the module's own (stopped and restarted by the outage test), and the real gateway
(in-process, real loopback listeners) from a copy of tests/cache/ in a temporary directory, so
that a test can change the policies and reload."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from examples.orders.server import serve as serve_orders
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import Env

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
PREFIX = "capgate-cache-test"


@pytest.fixture(scope="module")
async def orders() -> AsyncIterator[str]:
    server, port = await serve_orders("127.0.0.1:0")
    yield f"127.0.0.1:{port}"
    await server.stop(0)


@pytest.fixture(scope="module")
def cache_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    process = RedisProcess(tmp_path_factory.mktemp("cache-redis")).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def config_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("cache-config")
    for name in ("gateway.yaml", "policies.yaml"):
        shutil.copy(HERE / name, where / name)
    return where


def environ_for(orders: str, redis_url: str, run_dir: str) -> dict[str, str]:
    environ = gateway_environ(orders, redis_url, run_dir)
    environ["TEST_ORDERS_PB"] = str(ROOT / "examples" / "orders" / "orders.pb")
    return environ


@pytest.fixture(scope="module")
async def cache_env(orders: str, cache_redis: RedisProcess, config_dir: Path) -> AsyncIterator[Env]:
    run_dir = tempfile.mkdtemp(prefix="cg-")
    environ = environ_for(orders, cache_redis.url, run_dir)
    settings = load_settings(config_dir / "gateway.yaml", environ=environ)
    memory = MemorySink()
    spans = InMemorySpanExporter()
    gw = await start(settings, extra_sinks=[memory], span_processors=[SimpleSpanProcessor(spans)])
    env = Env(gw=gw, audit=memory, orders_address=orders, socket_path=f"{run_dir}/capgate.sock")
    env.environ = environ  # type: ignore[attr-defined]
    env.spans = spans  # type: ignore[attr-defined]
    yield env
    for channel in env.channels.values():
        await channel.close()
    await gw.stop(0.5)


@pytest.fixture
async def env(cache_env: Env, cache_redis: RedisProcess) -> Env:
    """The module's gateway with an empty cache, a running Redis and a reset upstream."""
    if cache_redis.process is None:
        cache_redis.start()
    client = aioredis.from_url(cache_redis.url)
    async for key in client.scan_iter(match=f"{PREFIX}:*"):
        await client.delete(key)
    await client.aclose()
    await cache_env.reset_upstream()
    cache_env.audit.events.clear()
    return cache_env
