"""Fixtures of the audit tests: the example upstream (session) and the audited gateway (one per
module, so that its tracer is installed only while its tests run)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from gateway.redis_server import RedisProcess
from tests.audit.kit import STREAM, Stack, stack
from tests.gateway.conftest import orders_upstream

__all__ = ["orders_upstream"]


@pytest.fixture(scope="module")
async def audited(orders_upstream: str, redis_server: RedisProcess) -> AsyncIterator[Stack]:
    client = aioredis.Redis.from_url(redis_server.url)
    await client.delete(STREAM)
    await client.aclose()
    async with stack(orders_upstream, redis_server.url) as running:
        yield running
