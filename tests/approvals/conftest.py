"""Fixtures for the approval store: a fake clock and a store on the session Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from approvalkit import FakeClock

from gateway.config.settings import ApprovalSettings, RedisSettings
from gateway.state.approvals import RedisApprovalStore
from gateway.state.connections import connect
from gateway.state.embedded import RedisProcess


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def approval_settings() -> ApprovalSettings:
    return ApprovalSettings(max_pending_per_actor=5, retention_s=3600.0)


@pytest.fixture
async def store(
    redis_server: RedisProcess,
    redis_client: aioredis.Redis,  # flushes the database first
    clock: FakeClock,
    approval_settings: ApprovalSettings,
) -> AsyncIterator[RedisApprovalStore]:
    client = connect(RedisSettings(url=redis_server.url))
    yield RedisApprovalStore(client, prefix="t", settings=approval_settings, clock=clock)
    await client.aclose()
