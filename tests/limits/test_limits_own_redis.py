"""Limit state in a Redis of its own (ADR 0037), through real gateways, real Redis servers and
the real upstream: `redis.limits_url` names a server run with `appendfsync everysec` while
approvals and the journal stay on `redis.url` (`always`). Races across two replicas stay exact,
a crash of the limits Redis process loses no spend, and the embedded default starts a second
server for limits."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
import yaml

from capgate.v1 import types_pb2
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import Env

pytestmark = pytest.mark.integration

HERE = Path(__file__).parent
GET = {"order_id": "o-1001"}
LIMIT = 50


def _config(tmp_path: Path, *, limits_url: str | None, embedded: bool = False) -> Path:
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(HERE / "../../examples/orders/orders.pb")
    data["policies"]["paths"] = [str(HERE / "policies.yaml")]
    get_rate = next(x for x in data["limits"] if x["name"] == "get_rate")
    # One counter for every caller: 50 calls, then refused for an hour; closed, so that a call
    # the limits Redis cannot answer is refused rather than let through unchecked.
    get_rate.update(
        key="'all'", rate={"limit": LIMIT, "window": "1h", "burst": LIMIT}, on_redis_down="closed"
    )
    if limits_url is not None:
        data["redis"]["limits_url"] = limits_url
    if embedded:
        data["redis"] = {"data_dir": str(tmp_path / "data"), "key_prefix": "capgate-own"}
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def everysec(tmp_path: Path) -> AsyncIterator[RedisProcess]:
    process = RedisProcess(tmp_path / "limits-redis", appendfsync="everysec").start()
    yield process  # type: ignore[misc]
    process.stop()


@pytest.fixture
def main_redis(tmp_path: Path) -> AsyncIterator[RedisProcess]:
    process = RedisProcess(tmp_path / "main-redis").start()
    yield process  # type: ignore[misc]
    process.stop()


@pytest.fixture
async def replicas(
    orders: str, main_redis: RedisProcess, everysec: RedisProcess, tmp_path: Path
) -> AsyncIterator[list[Env]]:
    """Two gateways (replicas) sharing both Redis servers."""
    path = _config(tmp_path, limits_url=everysec.url)
    envs: list[Env] = []
    try:
        for _ in range(2):
            run_dir = tempfile.mkdtemp(prefix="cg-")
            settings = load_settings(path, environ=gateway_environ(orders, main_redis.url, run_dir))
            gw = await start(settings, extra_sinks=[MemorySink()])
            envs.append(Env(gw, MemorySink(), orders, f"{run_dir}/capgate.sock"))
        await envs[0].reset_upstream()
        yield envs
    finally:
        for env in envs:
            for channel in env.channels.values():
                await channel.close()
            await env.gw.stop(0.5)


def _outcome(result: Any) -> str:
    kind = result.WhichOneof("outcome")
    return str(kind if kind == "completed" else types_pb2.ErrorCode.Name(result.failed.code))


async def _keys(url: str, match: str) -> list[bytes]:
    client = aioredis.from_url(url)
    try:
        return [key async for key in client.scan_iter(match=match)]
    finally:
        await client.aclose()


async def test_200_calls_over_two_replicas_pass_exactly_the_limit(
    replicas: list[Env], main_redis: RedisProcess, everysec: RedisProcess
) -> None:
    calls = [replicas[n % 2].invoke("orders.get", GET, actor="alice") for n in range(200)]
    outcomes = [_outcome(r) for r in await asyncio.gather(*calls)]
    assert outcomes.count("completed") == LIMIT
    assert outcomes.count("ERROR_CODE_RATE_LIMITED") == 200 - LIMIT
    assert await replicas[0].upstream_calls("GetOrder") == LIMIT
    # The state is in the limits Redis, and none of it in the main one.
    assert await _keys(everysec.url, "capgate-limits-test:{lim}:get_rate:*")
    assert not await _keys(main_redis.url, "*{lim}*")


async def test_a_crash_of_the_limits_redis_process_loses_no_spend(
    replicas: list[Env], everysec: RedisProcess
) -> None:
    outcomes = [_outcome(await replicas[0].invoke("orders.get", GET)) for _ in range(LIMIT)]
    assert outcomes == ["completed"] * LIMIT
    everysec.kill()  # SIGKILL: what was acknowledged is in the AOF (written before the reply)
    everysec.start()  # same port, same data: the AOF is replayed
    after = [_outcome(await replicas[n % 2].invoke("orders.get", GET)) for n in range(4)]
    assert after == ["ERROR_CODE_RATE_LIMITED"] * 4
    assert await replicas[0].upstream_calls("GetOrder") == LIMIT


async def test_the_embedded_default_keeps_limits_in_a_second_server_with_everysec(
    orders: str, tmp_path: Path
) -> None:
    path = _config(tmp_path, limits_url=None, embedded=True)
    run_dir = tempfile.mkdtemp(prefix="cg-")
    settings = load_settings(path, environ=gateway_environ(orders, "unused", run_dir))
    gw = await start(settings, extra_sinks=[MemorySink()])
    env = Env(gw, MemorySink(), orders, f"{run_dir}/capgate.sock")
    try:
        assert _outcome(await env.invoke("orders.get", GET)) == "completed"
        main = gw.redis_process
        limits = gw.runtime.limiter._connection.process
        assert main is not None and limits is not None and main.port != limits.port
        for process, fsync in ((main, b"always"), (limits, b"everysec")):
            client = aioredis.from_url(process.url)
            try:
                assert (await client.config_get("appendfsync"))["appendfsync"] == fsync.decode()
            finally:
                await client.aclose()
        assert await _keys(limits.url, "capgate-own:{lim}:get_rate:*")
        assert not await _keys(main.url, "*{lim}*")
    finally:
        for channel in env.channels.values():
            await channel.close()
        await gw.stop(0.5)
    assert limits.process is None  # stopped with the gateway
