"""Session fixtures of the MCP tests: the example upstream, a real Redis and the real gateway
(in-process, real loopback listeners) started from tests/mcp/gateway.yaml."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from examples.orders.server import serve as serve_orders
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.mcp.mcpkit import McpEnv

HERE = Path(__file__).parent


@pytest.fixture(scope="session")
async def mcp_env(redis_server: RedisProcess) -> AsyncIterator[McpEnv]:
    orders, orders_port = await serve_orders("127.0.0.1:0")
    orders_address = f"127.0.0.1:{orders_port}"
    environ = gateway_environ(orders_address, redis_server.url, tempfile.mkdtemp(prefix="cg-"))
    settings = load_settings(HERE / "gateway.yaml", environ=environ)
    memory = MemorySink()
    gw = await start(settings, extra_sinks=[memory])
    env = McpEnv(gw=gw, audit=memory, orders_address=orders_address)
    yield env
    await env.close()
    await gw.stop(0.5)
    await orders.stop(0)
