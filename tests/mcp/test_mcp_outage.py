"""The MCP listener answers JSON-RPC, never a bare HTTP 500 (issue 25 item 5c): a retry of an
`input_required` approval while Redis is down gets the retryable APPROVAL_UNAVAILABLE that
gRPC's Resume gets, audited the same way; anything unexpected is `-32603` with a body, and the
listener keeps serving. Each test has its own Redis (killed or written to on purpose)."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import redis.asyncio as aioredis

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, types_pb2
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import terminal_events, token
from tests.mcp.conftest import HERE
from tests.mcp.mcpkit import ACCEPT, McpEnv, bearer, request, session_headers

pytestmark = pytest.mark.integration

VERSION = "2026-07-28"


@pytest.fixture
async def own(mcp_env: McpEnv, tmp_path: Path) -> AsyncIterator[tuple[McpEnv, RedisProcess]]:
    orders_upstream = mcp_env.orders_address  # the session's example upstream
    redis = RedisProcess(tmp_path / "redis").start()
    environ = gateway_environ(orders_upstream, redis.url, tempfile.mkdtemp(prefix="cg-"))
    settings = load_settings(HERE / "gateway.yaml", environ=environ)
    memory = MemorySink()
    gw = await start(settings, extra_sinks=[memory])
    env = McpEnv(gw=gw, audit=memory, orders_address=orders_upstream)
    yield env, redis
    await env.close()
    await gw.stop(0.2)
    redis.stop()


def _refund(extra: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    }
    params = {
        "name": "orders_refund",
        "arguments": {"order_id": "o-1001", "amount": 800},
        "_meta": meta,
        **(extra or {}),
    }
    headers = {
        "authorization": bearer("alice"),
        "accept": ACCEPT,
        "mcp-protocol-version": VERSION,
        "mcp-method": "tools/call",
        "mcp-name": "orders_refund",
    }
    return request(1, "tools/call", params), headers


async def test_a_retry_while_redis_is_down_is_the_retryable_answer_grpc_gives(
    own: tuple[McpEnv, RedisProcess],
) -> None:
    env, redis = own
    async with env.http() as http:
        body, headers = _refund()
        asked = await http.post("/mcp", json=body, headers=headers)
        state = asked.json()["result"]["requestState"]
        redis.kill()
        mark = await env.mark()
        retry, _ = _refund({"requestState": state})
        answered = await http.post("/mcp", json=retry, headers=headers)
        assert answered.status_code == 200, answered.text
        result = answered.json()["result"]
        found = await env.executions_since(mark)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{env.gw.ports()['agents']}") as ch:
            over_grpc = await gateway_pb2_grpc.CapabilityGatewayStub(ch).Resume(
                gateway_pb2.ResumeRequest(approval_id="apr-any"),
                metadata=[("authorization", f"Bearer {token('alice')}")],
            )
    assert result["isError"] is True
    assert result["structuredContent"] == {
        "code": "APPROVAL_UNAVAILABLE",
        "stage": "approval",
        "retryable": True,
        "execution_state": "NOT_STARTED",
    }
    assert over_grpc.failed.code == types_pb2.ERROR_CODE_APPROVAL_UNAVAILABLE
    assert len(found) == 1
    [events] = found.values()
    ends = terminal_events(events)
    assert [e["event"] for e in ends] == ["capability.failed"]
    assert ends[0]["code"] == "APPROVAL_UNAVAILABLE"


async def test_an_unexpected_failure_is_a_json_rpc_error_and_the_listener_keeps_serving(
    own: tuple[McpEnv, RedisProcess],
) -> None:
    """A session record that is not JSON (written by anything but this gateway) raises where
    no code expects it: the answer is still JSON-RPC, and other sessions are served."""
    env, redis = own
    async with env.http() as http:
        broken, fine = await env.initialize(http), await env.initialize(http)
        client = aioredis.from_url(redis.url)
        try:
            [key] = [k async for k in client.scan_iter(match=f"*:s:{broken}")]
            await client.set(key, b"not json", keepttl=True)
        finally:
            await client.aclose()
        listed = request(2, "tools/list")
        failed = await http.post("/mcp", json=listed, headers=session_headers(broken))
        served = await http.post("/mcp", json=listed, headers=session_headers(fine))
    assert failed.status_code == 500
    assert failed.headers["content-type"] == "application/json"
    assert failed.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32603, "message": "Internal error."},
    }
    assert served.status_code == 200 and served.json()["result"]["tools"]
