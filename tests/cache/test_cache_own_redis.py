"""Cache entries live where limit state does (ADR 0043): in limits' own Redis, which no write
waits an fsync for (`redis.limits_url`, or the second embedded server of the default), never in
`redis.url`'s. Through the real gateway, real Redis servers and the real upstream: a repeat is a
hit, the entries are in the limits Redis only, and the admin purge deletes them there."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
import yaml

from capgate.v1 import admin_pb2, admin_pb2_grpc
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.cache.conftest import HERE, PREFIX, environ_for
from tests.cache.test_cache_flow import GET, invoke, output
from tests.gateway.harness import Env

ORDER = {"order_id": "o-1001"}


@pytest.fixture
def main_redis(tmp_path: Path) -> Iterator[RedisProcess]:
    process = RedisProcess(tmp_path / "main-redis").start()
    yield process
    process.stop()


@pytest.fixture
def everysec(tmp_path: Path) -> Iterator[RedisProcess]:
    process = RedisProcess(tmp_path / "limits-redis", appendfsync="everysec").start()
    yield process
    process.stop()


def _config(tmp_path: Path, redis: dict[str, str] | None) -> Path:
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["policies"]["paths"] = [str(HERE / "policies.yaml")]
    if redis is not None:
        data["redis"] = {**data.get("redis", {}), **redis}
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


async def _started(path: Path, orders: str, redis_url: str) -> Env:
    run_dir = tempfile.mkdtemp(prefix="cg-")
    settings = load_settings(path, environ=environ_for(orders, redis_url, run_dir))
    gw = await start(settings, extra_sinks=[MemorySink()])
    return Env(
        gw=gw, audit=MemorySink(), orders_address=orders, socket_path=f"{run_dir}/capgate.sock"
    )


async def _stop(env: Env) -> None:
    for channel in env.channels.values():
        await channel.close()
    await env.gw.stop(0.5)


async def _entries(url: str, prefix: str = PREFIX) -> list[bytes]:
    client = aioredis.from_url(url)
    try:
        return [k async for k in client.scan_iter(match=f"{prefix}:{{cache:*")]
    finally:
        await client.aclose()


@pytest.fixture
async def with_limits_url(
    orders: str, main_redis: RedisProcess, everysec: RedisProcess, tmp_path: Path
) -> AsyncIterator[Env]:
    env = await _started(_config(tmp_path, {"limits_url": everysec.url}), orders, main_redis.url)
    await env.reset_upstream()
    yield env
    await _stop(env)


async def test_entries_live_in_limits_own_redis_and_are_purged_there(
    with_limits_url: Env, main_redis: RedisProcess, everysec: RedisProcess
) -> None:
    env = with_limits_url
    first = await invoke(env, "orders.get", ORDER)
    second = await invoke(env, "orders.get", ORDER)
    assert output(first) == output(second)
    assert await env.upstream_calls(GET) == 1  # the repeat was a hit
    assert len(await _entries(everysec.url)) == 2  # the entry and the capability's index
    assert await _entries(main_redis.url) == []
    stub = admin_pb2_grpc.CacheAdminStub(env.channel("admin"))
    answer = await stub.PurgeCache(
        admin_pb2.PurgeCacheRequest(capability_id="orders.get"),
        metadata=env.metadata("admin", "root"),
    )
    assert answer.deleted == 1
    assert await _entries(everysec.url) == []
    await invoke(env, "orders.get", ORDER)
    assert await env.upstream_calls(GET) == 2  # purged: a miss


async def test_the_embedded_default_keeps_entries_in_the_everysec_server(
    orders: str, tmp_path: Path
) -> None:
    path = _config(tmp_path, None)
    data = yaml.safe_load(path.read_text())
    data["redis"] = {"data_dir": str(tmp_path / "data"), "key_prefix": "capgate-own-cache"}
    path.write_text(yaml.safe_dump(data))
    env = await _started(path, orders, "unused")
    try:
        await env.reset_upstream()
        await invoke(env, "orders.get", ORDER)
        await invoke(env, "orders.get", ORDER)
        assert await env.upstream_calls(GET) == 1
        main = env.gw.redis_process
        limits = env.gw.runtime.limiter._connection.process  # type: ignore[union-attr]
        assert main is not None and limits is not None and main.port != limits.port
        assert len(await _entries(limits.url, "capgate-own-cache")) == 2
        assert await _entries(main.url, "capgate-own-cache") == []
    finally:
        await _stop(env)
