"""Issue 14 item 9 on the MCP listener: a tools/call still running when the drain's grace
period ends is answered (an MCP tool error that carries the cancelled envelope, UNKNOWN) before
the listener closes, instead of a dropped HTTP request."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import httpx2
import pytest

from examples.orders.server import serve as serve_orders
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.mcp.mcpkit import ACCEPT, bearer

pytestmark = pytest.mark.integration
HERE = Path(__file__).parent
VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
}


async def test_a_tool_call_in_flight_at_the_end_of_the_grace_is_answered(
    redis_server: RedisProcess,
) -> None:
    orders, orders_port = await serve_orders("127.0.0.1:0")
    environ = gateway_environ(
        f"127.0.0.1:{orders_port}", redis_server.url, tempfile.mkdtemp(prefix="cg-")
    )
    memory = MemorySink()
    gw = await start(load_settings(HERE / "gateway.yaml", environ=environ), extra_sinks=[memory])
    stopped = False
    try:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "orders_get",
                "arguments": {"order_id": "slow-20000"},
                "_meta": META,
            },
        }
        headers = {
            "authorization": bearer("alice"),
            "accept": ACCEPT,
            "mcp-protocol-version": VERSION,
            "mcp-method": "tools/call",
            "mcp-name": "orders_get",
        }
        async with httpx2.AsyncClient(
            base_url=f"http://127.0.0.1:{gw.ports()['mcp']}", timeout=30
        ) as http:
            call = asyncio.ensure_future(http.post("/mcp", json=body, headers=headers))
            for _ in range(400):  # until the call waits on the upstream
                if any(e["event"] == "capability.started" for e in memory.events):
                    break
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.1)
            stopping = asyncio.ensure_future(gw.stop(1.0))
            response = await call
            await stopping
            stopped = True
        assert response.status_code == 200, response.text
        result = response.json()["result"]
        assert result["isError"] is True
        assert result["structuredContent"] == {
            "code": "CANCELLED",
            "stage": "cancellation",
            "retryable": False,  # the upstream may have run
            "execution_state": "UNKNOWN",
        }
        assert "shutting down" in result["content"][0]["text"]
        execution = result["_meta"]["dev.capgate/executionId"]
        events = [e["event"] for e in memory.events if e.get("execution_id") == execution]
        assert events[-1] == "capability.cancelled", events
    finally:
        if not stopped:
            await gw.stop(0)
        await orders.stop(0)
