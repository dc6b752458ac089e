"""A `kind: mcp` server's 429/503 `Retry-After` is the least wait before a retry, as for
`kind: http` (docs/upstreams.md §9): a wait past the deadline is not taken, the call ends with
that answer after one attempt; a short one is waited and the retry completes. Real gateway, a
minimal stateless-era MCP server on loopback (tests/upstream_http/httpserver.py)."""

from __future__ import annotations

import tempfile
import time
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
from tests.upstream_http.httpserver import Answer, HttpServer, Seen

pytestmark = pytest.mark.integration

CONFIG = """version: 1
listeners:
  - {name: agents, address: "127.0.0.1:0", surface: agent, auth: none}
upstreams:
  busy: {kind: mcp, address: "{{ env.TEST_API_ADDR }}", mcp: {protocol: "2026-07-28"}}
capabilities:
  - id: busy.get
    description: A read the server is sometimes too busy for.
    upstream: busy
    tool: get
    side_effect: read
    risk: low
    expose: {agent: true}
    timeout: 5s
    retry: {max_attempts: 2, initial_backoff: 10ms, max_backoff: 20ms}
audit:
  sinks: []
redis:
  url: "{{ env.TEST_REDIS_URL }}"
  key_prefix: capgate-test-retry-after
"""


class Busy:
    """Lists one tool; the first tools/call answers `status` with `Retry-After: after`."""

    def __init__(self, status: int, after: str) -> None:
        self.status, self.after = status, after
        self.calls: list[float] = []

    def __call__(self, seen: Seen) -> Answer:
        message: dict[str, Any] = orjson.loads(seen.body)
        if message["method"] == "tools/list":
            tool = {"name": "get", "inputSchema": {"type": "object"}}
            return _json({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": [tool]}})
        self.calls.append(time.monotonic())
        if len(self.calls) == 1:
            return Answer(self.status, b"", [("retry-after", self.after)])
        result = {"content": [], "structuredContent": {"ok": True}}
        return _json({"jsonrpc": "2.0", "id": message["id"], "result": result})


def _json(value: Any) -> Answer:
    return Answer(200, orjson.dumps(value), [("content-type", "application/json")])


async def _run(redis_server: RedisProcess, busy: Busy) -> gateway_pb2.ExecutionResult:
    server = await HttpServer().start()
    server.handler = busy
    run_dir = tempfile.mkdtemp(prefix="cg-ra-")
    config = Path(run_dir) / "gateway.yaml"
    config.write_text(CONFIG)
    environ = {**gateway_environ("127.0.0.1:1", redis_server.url, run_dir)}
    environ["TEST_API_ADDR"] = server.address
    gw = await start(load_settings(config, environ=environ), extra_sinks=[MemorySink()])
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}")
    stub = gateway_pb2_grpc.CapabilityGatewayStub(channel)
    request = gateway_pb2.InvokeRequest(capability_id="busy.get", input_json=b"{}")
    try:
        result: gateway_pb2.ExecutionResult = await stub.Invoke(request, timeout=10)
        return result
    finally:
        await channel.close()
        await gw.stop(0.5)
        await server.stop()


@pytest.mark.parametrize("status", [429, 503])
async def test_a_retry_after_past_the_deadline_is_not_waited_for(
    redis_server: RedisProcess, status: int
) -> None:
    busy = Busy(status, "3600")
    result = await _run(redis_server, busy)
    assert types_pb2.ErrorCode.Name(result.failed.code) == "ERROR_CODE_UPSTREAM_UNAVAILABLE"
    assert result.attempts == 1 and len(busy.calls) == 1, (result, busy.calls)
    assert result.failed.retryable


async def test_a_short_retry_after_is_waited_before_the_retry(redis_server: RedisProcess) -> None:
    busy = Busy(503, "1")
    result = await _run(redis_server, busy)
    assert result.WhichOneof("outcome") == "completed", result
    assert result.attempts == 2 and len(busy.calls) == 2
    assert busy.calls[1] - busy.calls[0] >= 1.0  # the server's wait, not the 10-20 ms backoff
