"""Session fixtures for gateway tests: the example upstream and the gateway, started once."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from examples.orders.server import serve as serve_orders
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.harness import JWT_SECRET, Env

HERE = Path(__file__).parent


def gateway_environ(orders_address: str, redis_url: str, run_dir: str) -> dict[str, str]:
    return {
        **os.environ,
        "TEST_JWT_SECRET": JWT_SECRET,
        "TEST_RUN_DIR": run_dir,
        "TEST_ORDERS_ADDR": orders_address,
        "TEST_REDIS_URL": redis_url,
        "TEST_HMAC_KEY": "test-hmac-key-not-secret-in-tests",
    }


@pytest.fixture(scope="session")
async def orders_upstream() -> AsyncIterator[str]:
    server, port = await serve_orders("127.0.0.1:0")
    yield f"127.0.0.1:{port}"
    await server.stop(0)


@pytest.fixture(scope="session")
async def env(orders_upstream: str, redis_server: RedisProcess) -> AsyncIterator[Env]:
    # A short directory: unix socket paths are limited to ~107 bytes.
    run_dir = tempfile.mkdtemp(prefix="cg-")
    environ = gateway_environ(orders_upstream, redis_server.url, run_dir)
    settings = load_settings(HERE / "gateway.yaml", environ=environ)
    memory = MemorySink()
    gw = await start(settings, extra_sinks=[memory])
    environment = Env(
        gw=gw, audit=memory, orders_address=orders_upstream, socket_path=f"{run_dir}/capgate.sock"
    )
    yield environment
    for channel in environment.channels.values():
        await channel.close()
    await gw.stop(0.5)
