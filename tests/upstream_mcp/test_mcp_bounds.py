"""An MCP server's answer is bounded by max_response_bytes however it arrives — one JSON body,
SSE events, or one SSE line that never ends — through the real gateway and a minimal
stateless-era server on loopback; a tool's answer over the bound is OUTPUT_INVALID (the tool
ran: COMPLETED), and the gateway keeps serving."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, types_pb2
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import token
from tests.upstream_http.httpserver import Answer, HttpServer, Seen

pytestmark = pytest.mark.integration

CONFIG = """version: 1
listeners:
  - name: agents
    address: 127.0.0.1:0
    surface: agent
    auth: jwt
    jwt:
      issuers: [test-idp]
      audience: capgate
      keys:
        - {kid: hs1, alg: HS256, secret: "{{ env.TEST_JWT_SECRET }}"}
upstreams:
  big:
    kind: mcp
    address: "{{ env.TEST_API_ADDR }}"
    max_response_bytes: 4096
    mcp: {protocol: "2026-07-28"}
capabilities:
  - id: big.get
    description: Answers as the test says.
    upstream: big
    tool: get
    side_effect: read
    risk: low
    expose: {agent: true}
audit:
  sinks: []
redis:
  url: "{{ env.TEST_REDIS_URL }}"
  key_prefix: capgate-test-mcp-bounds
"""
HUGE = "x" * 10_000


def _reply(message: dict[str, Any], result: dict[str, Any]) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})


class Big:
    def __init__(self) -> None:
        self.mode = "small"

    def __call__(self, seen: Seen) -> Answer:
        message: dict[str, Any] = orjson.loads(seen.body)
        if message["method"] == "tools/list":
            tools = [{"name": "get", "inputSchema": {"type": "object"}}]
            return Answer(200, _reply(message, {"tools": tools}))
        small = {"structuredContent": {"ok": True}, "content": []}
        sse = [("content-type", "text/event-stream")]
        if self.mode == "json":
            return Answer(200, _reply(message, {"structuredContent": {"text": HUGE}}))
        if self.mode == "sse":
            note = orjson.dumps({"jsonrpc": "2.0", "method": "notifications/message"})
            events = [b"data: " + note + b"\n\n"] * 200 + [b"data: " + _reply(message, small)]
            return Answer(200, b"".join(events) + b"\n\n", sse)
        if self.mode == "line":
            return Answer(200, b"data: " + HUGE.encode(), sse)  # no end of line, no end of event
        return Answer(200, b"data: " + _reply(message, small) + b"\n\n", sse)


async def test_every_shape_of_answer_is_bounded(redis_server: RedisProcess) -> None:
    server, big = await HttpServer().start(), Big()
    server.handler = big
    run_dir = tempfile.mkdtemp(prefix="cg-big-")
    config = Path(run_dir) / "gateway.yaml"
    config.write_text(CONFIG)
    environ = gateway_environ("127.0.0.1:1", redis_server.url, run_dir)
    environ["TEST_API_ADDR"] = server.address
    gw = await start(load_settings(config, environ=environ), extra_sinks=[MemorySink()])
    outcomes = {}
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}") as channel:
            stub = gateway_pb2_grpc.CapabilityGatewayStub(channel)
            for mode in ("small", "json", "sse", "line", "small"):
                big.mode = mode
                result = await stub.Invoke(
                    gateway_pb2.InvokeRequest(capability_id="big.get", input_json=b"{}"),
                    metadata=[("authorization", f"Bearer {token('alice')}")],
                    timeout=10,
                )
                outcome = result.WhichOneof("outcome")
                code = types_pb2.ErrorCode.Name(result.failed.code) if outcome == "failed" else ""
                outcomes[mode] = (outcome, code, result.execution_state)
    finally:
        await gw.stop(0.5)
        await server.stop()
    over = ("failed", "ERROR_CODE_OUTPUT_INVALID", types_pb2.EXECUTION_STATE_COMPLETED)
    assert outcomes == {
        "small": ("completed", "", types_pb2.EXECUTION_STATE_COMPLETED),
        "json": over,
        "sse": over,
        "line": over,
    }
