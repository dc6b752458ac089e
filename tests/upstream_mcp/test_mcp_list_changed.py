"""`notifications/tools/list_changed` through the real gateway: the server (a minimal stateless
era MCP server on loopback, answering over SSE) announces a change inside a tool call's
response stream and changes the tool's schema; the next call lists the tools again and is
refused before anything is sent (policies and approvals were written against the old schema).
A change that leaves the tool's schemas alone does not refuse anything."""

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
  shifty: {kind: mcp, address: "{{ env.TEST_API_ADDR }}", mcp: {protocol: "2026-07-28"}}
capabilities:
  - id: shifty.get
    description: A tool whose schema changes.
    upstream: shifty
    tool: get
    side_effect: read
    risk: low
    expose: {agent: true}
audit:
  sinks: []
redis:
  url: "{{ env.TEST_REDIS_URL }}"
  key_prefix: capgate-test-list-changed
"""


class Shifty:
    """Lists one tool; a call answers over SSE after a list_changed notification and, when
    `shift`, changes the tool's input schema from then on."""

    def __init__(self, *, shift: bool) -> None:
        self.shift = shift
        self.required = ["a"]
        self.methods: list[str] = []

    def __call__(self, seen: Seen) -> Answer:
        message: dict[str, Any] = orjson.loads(seen.body)
        self.methods.append(message["method"])
        if message["method"] == "tools/list":
            schema = {"type": "object", "properties": {"a": {}, "b": {}}, "required": self.required}
            tool = {"name": "get", "inputSchema": schema}
            return _json({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": [tool]}})
        if self.shift:
            self.required = ["a", "b"]
        note = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        result = {"content": [], "structuredContent": {"ok": True}}
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        body = b"".join(
            b"event: message\ndata: " + orjson.dumps(m) + b"\n\n" for m in (note, reply)
        )
        return Answer(200, body, [("content-type", "text/event-stream")])


def _json(value: Any) -> Answer:
    return Answer(200, orjson.dumps(value), [("content-type", "application/json")])


@pytest.mark.parametrize("shift", [True, False])
async def test_a_changed_tool_is_refused_until_a_reload(
    redis_server: RedisProcess, shift: bool
) -> None:
    server = await HttpServer().start()
    shifty = Shifty(shift=shift)
    server.handler = shifty
    run_dir = tempfile.mkdtemp(prefix="cg-lc-")
    config = Path(run_dir) / "gateway.yaml"
    config.write_text(CONFIG)
    environ = {**gateway_environ("127.0.0.1:1", redis_server.url, run_dir)}
    environ["TEST_API_ADDR"] = server.address
    gw = await start(load_settings(config, environ=environ), extra_sinks=[MemorySink()])
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}")
    stub = gateway_pb2_grpc.CapabilityGatewayStub(channel)
    md = [("authorization", f"Bearer {token('alice')}")]
    request = gateway_pb2.InvokeRequest(capability_id="shifty.get", input_json=b'{"a": 1}')
    try:
        first = await stub.Invoke(request, metadata=md, timeout=10)
        assert first.WhichOneof("outcome") == "completed", first
        second = await stub.Invoke(request, metadata=md, timeout=10)
    finally:
        await channel.close()
        await gw.stop(0.5)
        await server.stop()
    if shift:
        assert types_pb2.ErrorCode.Name(second.failed.code) == "ERROR_CODE_EXECUTION_FAILED"
        assert second.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
        assert shifty.methods == ["tools/list", "tools/call", "tools/list"]
    else:
        assert second.WhichOneof("outcome") == "completed", second
        assert shifty.methods == ["tools/list", "tools/call", "tools/list", "tools/call"]
