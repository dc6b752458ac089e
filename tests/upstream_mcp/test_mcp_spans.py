"""The CLIENT span of each attempt on a `kind: mcp` upstream is JSON-RPC, as the MCP
listener's SERVER span is: `tools/call` and the tool's name, never the arguments, and nothing
claims it was gRPC. Real gateway, the SDK-written desk server, real Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from examples.mcp_upstream.server import serve
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.upstream_mcp.conftest import HERE, McpEnv, environ

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
async def traced(redis_server: RedisProcess) -> AsyncIterator[tuple[McpEnv, InMemorySpanExporter]]:
    desk = await serve()
    spans = InMemorySpanExporter()
    audit = MemorySink()
    gw = await start(
        load_settings(HERE / "gateway.yaml", environ=environ(desk, redis_server.url)),
        extra_sinks=[audit],
        span_processors=[SimpleSpanProcessor(spans)],
    )
    agents = grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}")
    admin = grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['admin']}")
    yield McpEnv(gw, desk, audit, agents, admin), spans
    await agents.close()
    await admin.close()
    await gw.stop(0.5)
    await desk.stop()


async def test_an_mcp_attempt_span_is_json_rpc_tools_call_with_the_tool_name(
    traced: tuple[McpEnv, InMemorySpanExporter],
) -> None:
    env, spans = traced
    result = await env.invoke("desk.search", {"query": "secret-query-text"})
    assert result.WhichOneof("outcome") == "completed", result
    attempts = [
        dict(s.attributes or {})
        for s in spans.get_finished_spans()
        if s.name == "agent.procedure_execution"
    ]
    assert len(attempts) == 1, attempts
    (attempt,) = attempts
    assert attempt["rpc.system"] == "jsonrpc"
    assert attempt["rpc.method"] == "tools/call"
    assert attempt["mcp.method.name"] == "tools/call"
    assert attempt["gen_ai.tool.name"] == "search_tickets"
    assert attempt["capgate.upstream"] == "desk"
    assert "rpc.service" not in attempt, attempt
    assert not any("secret-query-text" in str(value) for value in attempt.values()), attempt
