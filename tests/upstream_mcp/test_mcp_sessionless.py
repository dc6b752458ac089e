"""A handshake-era MCP server that issues no `Mcp-Session-Id` (the specification allows it)
gets `initialize` once, not before every call: through the real gateway and a minimal
`2025-06-18` server on loopback that counts the requests it receives."""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest

from capgate.v1 import gateway_pb2, gateway_pb2_grpc
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import token
from tests.upstream_http.httpserver import Answer, HttpServer, Seen
from tests.upstream_mcp.test_mcp_bounds import CONFIG

pytestmark = pytest.mark.integration

VERSION = "2025-06-18"


class Sessionless:
    def __init__(self) -> None:
        self.methods: Counter[str] = Counter()

    def __call__(self, seen: Seen) -> Answer:
        message: dict[str, Any] = orjson.loads(seen.body)
        self.methods[message["method"]] += 1
        if "id" not in message:  # notifications/initialized
            return Answer(202, b"", [])
        if message["method"] == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": VERSION,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "sessionless", "version": "1"},
            }
        elif message["method"] == "tools/list":
            result = {"tools": [{"name": "get", "inputSchema": {"type": "object"}}]}
        else:
            result = {"structuredContent": {"ok": True}, "content": []}
        body = orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
        return Answer(200, body)  # and never an Mcp-Session-Id


async def test_a_server_without_session_ids_is_initialized_once(
    redis_server: RedisProcess,
) -> None:
    server, desk = await HttpServer().start(), Sessionless()
    server.handler = desk
    run_dir = tempfile.mkdtemp(prefix="cg-sessionless-")
    config = Path(run_dir) / "gateway.yaml"
    config.write_text(CONFIG.replace('protocol: "2026-07-28"', f'protocol: "{VERSION}"'))
    environ = gateway_environ("127.0.0.1:1", redis_server.url, run_dir)
    environ["TEST_API_ADDR"] = server.address
    outcomes = []
    try:
        gw = await start(load_settings(config, environ=environ), extra_sinks=[MemorySink()])
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}") as channel:
                stub = gateway_pb2_grpc.CapabilityGatewayStub(channel)
                for _ in range(3):
                    result = await stub.Invoke(
                        gateway_pb2.InvokeRequest(capability_id="big.get", input_json=b"{}"),
                        metadata=[("authorization", f"Bearer {token('alice')}")],
                        timeout=10,
                    )
                    outcomes.append(result.WhichOneof("outcome"))
        finally:
            await gw.stop(0.5)
    finally:
        await server.stop()
    assert outcomes == ["completed"] * 3
    assert desk.methods == Counter(
        {"initialize": 1, "notifications/initialized": 1, "tools/list": 1, "tools/call": 3}
    )
    versions = {s.header("mcp-protocol-version") for s in server.seen[1:]}
    assert versions == {VERSION}
    assert all(s.header("mcp-session-id") is None for s in server.seen)
