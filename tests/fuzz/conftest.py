"""The fuzz suite runs against its own gateway (tests/gateway/gateway.yaml, in-process, real
listeners on loopback), its own example upstream and the session's real Redis. The database is
flushed before and after each fuzz test: the approvals and idempotency records it leaves (many
pending approvals, up to the per-actor cap) never reach another test, nor theirs a fuzz test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import env, orders_upstream

__all__ = ["clean_redis", "env", "orders_upstream"]


@pytest.fixture(autouse=True)
async def clean_redis(redis_server: RedisProcess) -> AsyncIterator[None]:
    client = aioredis.Redis.from_url(redis_server.url)
    try:
        await client.flushdb()
        yield
        await client.flushdb()
    finally:
        await client.aclose()
