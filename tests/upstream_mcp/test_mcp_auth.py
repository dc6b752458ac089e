"""An MCP server that refuses capgate's credentials, through the real gateway and a minimal
stateless-era server on loopback: 401 is UNAUTHENTICATED and 403 FORBIDDEN (as gRPC's
UNAUTHENTICATED/PERMISSION_DENIED, COMPLETED: the server answered); with OAuth, a 401 drops
the cached token and the request goes once more with a new one (a 401 was not processed)."""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
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
  desk:
    kind: mcp
    address: "{{ env.TEST_API_ADDR }}"
    mcp:
      protocol: "2026-07-28"
      oauth:
        token_url: "http://{{ env.TEST_TOKEN_ADDR }}/oauth/token"
        client_id: capgate-desk
        client_secret: "{{ env.TEST_CLIENT_SECRET }}"
capabilities:
  - id: desk.get
    description: Answers as the test says.
    upstream: desk
    tool: get
    side_effect: write
    risk: low
    expose: {agent: true}
audit:
  sinks: []
redis:
  url: "{{ env.TEST_REDIS_URL }}"
  key_prefix: capgate-test-mcp-auth
"""


class Desk:
    """Lists one tool; answers `tools/call` with `status` while set, or to a revoked token."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.revoked: set[str] = set()
        self.calls: list[str] = []  # the bearer of every tools/call

    def __call__(self, seen: Seen) -> Answer:
        message: dict[str, Any] = orjson.loads(seen.body)
        bearer = seen.header("authorization") or ""
        if message["method"] == "tools/list":
            result: dict[str, Any] = {"tools": [{"name": "get", "inputSchema": {"type": "object"}}]}
        else:
            self.calls.append(bearer)
            if self.status is not None:
                return Answer(self.status, b'{"error": "secret internals"}')
            result = {"structuredContent": {"ok": True}, "content": []}
        if bearer in self.revoked:
            return Answer(401, b"")
        body = orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
        return Answer(200, body)


@asynccontextmanager
async def _running(redis_url: str, desk: Desk) -> AsyncIterator[tuple[Any, HttpServer]]:
    server, tokens = await HttpServer().start(), await HttpServer().start()
    numbers = itertools.count(1)

    def grant(seen: Seen) -> Answer:
        body = {"access_token": f"tok-{next(numbers)}", "expires_in": 3600}
        return Answer(200, orjson.dumps(body))

    server.handler, tokens.handler = desk, grant
    run_dir = tempfile.mkdtemp(prefix="cg-mcp-auth-")
    config = Path(run_dir) / "gateway.yaml"
    config.write_text(CONFIG)
    environ = gateway_environ("127.0.0.1:1", redis_url, run_dir) | {
        "TEST_API_ADDR": server.address,
        "TEST_TOKEN_ADDR": tokens.address,
        "TEST_CLIENT_SECRET": "s3cret",
    }
    try:
        gw = await start(load_settings(config, environ=environ), extra_sinks=[MemorySink()])
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}") as channel:
                yield gateway_pb2_grpc.CapabilityGatewayStub(channel), tokens
        finally:
            await gw.stop(0.5)
    finally:
        await server.stop()
        await tokens.stop()


async def _invoke(stub: Any) -> gateway_pb2.ExecutionResult:
    result: gateway_pb2.ExecutionResult = await stub.Invoke(
        gateway_pb2.InvokeRequest(capability_id="desk.get", input_json=b"{}"),
        metadata=[("authorization", f"Bearer {token('alice')}")],
        timeout=10,
    )
    return result


def _code(result: gateway_pb2.ExecutionResult) -> str:
    return types_pb2.ErrorCode.Name(result.failed.code)


async def test_401_and_403_map_like_grpc(redis_server: RedisProcess) -> None:
    desk = Desk()
    outcomes = {}
    async with _running(redis_server.url, desk) as (stub, _):
        for status in (401, 403):
            desk.status = status
            result = await _invoke(stub)
            outcomes[status] = (_code(result), result.execution_state)
            assert "secret" not in result.failed.message
    done = types_pb2.EXECUTION_STATE_COMPLETED
    assert outcomes == {
        401: ("ERROR_CODE_UNAUTHENTICATED", done),
        403: ("ERROR_CODE_FORBIDDEN", done),
    }
    # A 401 goes once more with a new token (it was not processed); a 403 never does.
    assert desk.calls == ["Bearer tok-1", "Bearer tok-2", "Bearer tok-2"]


async def test_a_token_refused_with_401_is_dropped_and_the_call_sent_once_more(
    redis_server: RedisProcess,
) -> None:
    desk = Desk()
    async with _running(redis_server.url, desk) as (stub, tokens):
        desk.revoked.add("Bearer tok-1")  # fetched at load for tools/list
        first = await _invoke(stub)
        second = await _invoke(stub)
    assert first.WhichOneof("outcome") == "completed", first
    assert second.WhichOneof("outcome") == "completed", second
    assert desk.calls == ["Bearer tok-1", "Bearer tok-2", "Bearer tok-2"]
    assert len([s for s in tokens.seen if s.target == "/oauth/token"]) == 2
