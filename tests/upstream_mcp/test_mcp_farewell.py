"""How capgate ends things with an MCP server (docs/upstreams.md §10), through the real
gateway and the official MCP SDK's server on loopback:

- a tool call the caller abandons after it went out (here: the capability's deadline passes)
  is followed by `notifications/cancelled`, in both protocol eras, so the server stops the
  tool instead of running it to the end for nobody (a server does not take a closed
  connection for a cancellation);
- at shutdown the handshake-era session is ended with an HTTP DELETE carrying its id.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import grpc
import orjson
import pytest
from mcp.server.mcpserver import MCPServer

from capgate.v1 import gateway_pb2, gateway_pb2_grpc
from examples.mcp_upstream.server import Running, serve
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.errors import CapabilityError, Code
from gateway.process.serve import Gateway, start
from gateway.state.embedded import RedisProcess
from gateway.upstream.httpclient import HttpClients, SentTracker
from gateway.upstream.mcpclient import McpClient
from gateway.upstream.mcpspec import McpUpstream
from gateway.upstream.spec import Upstream
from gateway.upstream.state import ExecutionState, state_of
from tests.upstream_mcp.conftest import environ

pytestmark = pytest.mark.integration

TOOL_S = 3.0  # how long the tool would run
CONFIG = """version: 1
listeners:
  - {name: agents, address: "127.0.0.1:0", surface: agent, auth: none}
upstreams:
  slow: {kind: mcp, address: "{{ env.TEST_DESK_ADDR }}", mcp: {protocol: "2025-11-25"}}
  slow-stateless: {kind: mcp, address: "{{ env.TEST_DESK_ADDR }}", mcp: {protocol: "2026-07-28"}}
capabilities:
  - id: slow.wait
    description: Wait a while (handshake era).
    upstream: slow
    tool: wait
    side_effect: read
    risk: low
    expose: {agent: true}
    timeout: 400ms
  - id: slow.wait_stateless
    description: Wait a while (stateless era).
    upstream: slow-stateless
    tool: wait
    side_effect: read
    risk: low
    expose: {agent: true}
    timeout: 400ms
  - id: slow.quick
    description: Answer at once (handshake era).
    upstream: slow
    tool: quick
    side_effect: read
    risk: low
    expose: {agent: true}
"""


def slow_server(calls: Counter[str]) -> MCPServer:
    server: MCPServer = MCPServer("slow")

    @server.tool()
    async def wait(seconds: float) -> str:
        calls["started"] += 1
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            calls["cancelled"] += 1
            raise
        calls["finished"] += 1
        return "done"

    @server.tool()
    def quick() -> str:
        return "quick"

    return server


async def _gateway(tmp_path: Path, redis_server: RedisProcess, server: Running) -> Gateway:
    path = tmp_path / "gateway.yaml"
    path.write_text(CONFIG)
    settings = load_settings(path, environ=environ(server, redis_server.url))
    return await start(settings, extra_sinks=[MemorySink()])


@pytest.fixture
async def slow(
    tmp_path: Path, redis_server: RedisProcess
) -> AsyncIterator[tuple[Gateway, Running]]:
    server = await serve(make=slow_server)
    gw = await _gateway(tmp_path, redis_server, server)
    try:
        yield gw, server
    finally:
        await gw.stop(0.5)
        await server.stop()


async def _invoke(gw: Gateway, capability: str, value: object) -> gateway_pb2.ExecutionResult:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}") as channel:
        stub = gateway_pb2_grpc.CapabilityGatewayStub(channel)
        request = gateway_pb2.InvokeRequest(
            capability_id=capability, input_json=orjson.dumps(value)
        )
        result: gateway_pb2.ExecutionResult = await stub.Invoke(request, timeout=10)
        return result


async def _until(predicate: Callable[[], bool], within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.05)
    return False


@pytest.mark.parametrize("capability", ["slow.wait", "slow.wait_stateless"])
async def test_an_abandoned_tool_call_is_cancelled_on_the_server(
    slow: tuple[Gateway, Running], capability: str
) -> None:
    gw, server = slow
    result = await _invoke(gw, capability, {"seconds": TOOL_S})
    assert result.WhichOneof("outcome") == "cancelled", result  # the 400 ms deadline passed
    assert await _until(lambda: server.calls["cancelled"] == 1, TOOL_S - 1), server.calls
    await asyncio.sleep(TOOL_S)  # long enough for the tool to have finished, had it run on
    assert server.calls == Counter(started=1, cancelled=1), server.calls
    # The notice goes out with the call's own headers: its execution id, actor token and
    # session (a server that checks the actor token on every POST accepts it).
    carrying = [h for h in server.headers if h.get("x-capgate-execution-id") == result.execution_id]
    assert len(carrying) == 2, list(server.headers)
    call, notice = carrying
    for name in ("x-capgate-actor-token", "mcp-session-id", "mcp-protocol-version"):
        assert notice.get(name) == call.get(name), name
    assert notice.get("x-capgate-actor-token"), notice
    if capability.endswith("stateless"):  # the stateless era names the method in a header
        assert (call.get("mcp-method"), notice.get("mcp-method")) == (
            "tools/call",
            "notifications/cancelled",
        )
        assert "mcp-name" not in notice


async def test_the_handshake_session_is_deleted_at_shutdown(
    redis_server: RedisProcess, tmp_path: Path
) -> None:
    server = await serve(make=slow_server)
    gw = await _gateway(tmp_path, redis_server, server)
    stopped = False
    try:
        result = await _invoke(gw, "slow.quick", {})
        assert result.WhichOneof("outcome") == "completed", result
        sessions = {
            h["mcp-session-id"]
            for h in server.headers
            if h[":method"] == "POST" and h.get("mcp-session-id")
        }
        assert len(sessions) == 1, list(server.headers)
        await gw.stop(0.5)
        stopped = True
        deletes = [h for h in server.headers if h[":method"] == "DELETE"]
        assert [h.get("mcp-session-id") for h in deletes] == list(sessions), list(server.headers)
        assert deletes[0]["mcp-protocol-version"] == "2025-11-25"
    finally:
        if not stopped:
            await gw.stop(0.5)
        await server.stop()


async def test_a_closed_client_opens_no_session_nobody_would_end() -> None:
    # After shutdown's DELETE, a late request must not start a new handshake-era session.
    server = await serve(make=slow_server)
    pool = HttpClients()
    upstream = Upstream(
        name="slow", address=server.address, kind="mcp", mcp=McpUpstream(protocol="2025-11-25")
    )
    client = pool.shared(upstream, lambda http: McpClient(http, upstream))
    try:
        await client.request("tools/list", {}, sent=SentTracker())
        await pool.close()
        posts = [h for h in server.headers if h[":method"] == "POST"]
        with pytest.raises(CapabilityError) as caught:
            await client.request("tools/list", {}, sent=SentTracker())
        assert caught.value.code is Code.UPSTREAM_UNAVAILABLE
        assert state_of(caught.value) is ExecutionState.NOT_STARTED
        assert [h for h in server.headers if h[":method"] == "POST"] == posts  # nothing sent
        assert [h[":method"] for h in server.headers].count("DELETE") == 1
    finally:
        await server.stop()
