"""Fixtures of the grant admin tests: tests/grantadmin/gateway.yaml loaded by the real loader,
its snapshot (for the expression tests) and the real gateway serving it (in-process, real
loopback listeners, a real Redis of this package)."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.config.loader import load_settings
from gateway.config.settings import Settings
from gateway.pipeline.snapshot import Snapshot, build_snapshot
from gateway.upstream.channels import ChannelPool
from tests.gateway.conftest import gateway_environ

HERE = Path(__file__).parent


def grant_settings(orders_address: str, redis_url: str) -> Settings:
    environ = gateway_environ(orders_address, redis_url, tempfile.mkdtemp(prefix="cg-"))
    return load_settings(HERE / "gateway.yaml", environ=environ)


@pytest.fixture(scope="module")
async def snapshot() -> AsyncIterator[Snapshot]:
    """The config's snapshot; nothing is contacted (the upstream has a descriptor set)."""
    pool = ChannelPool()
    yield await build_snapshot(grant_settings("127.0.0.1:9", "redis://127.0.0.1:9"), pool)
    await pool.close()
