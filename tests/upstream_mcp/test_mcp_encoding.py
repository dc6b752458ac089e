"""A compressing MCP server (a proxy with gzip on compresses whenever the client accepts it):
capgate asks for `accept-encoding: identity`, because it reads the answer raw and counts those
bytes against max_response_bytes; through the real gateway and a minimal stateless-era server
on loopback that gzips whenever it is allowed to."""

from __future__ import annotations

import gzip
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
from tests.upstream_mcp.test_mcp_bounds import CONFIG

pytestmark = pytest.mark.integration


def _gzipping(seen: Seen) -> Answer:
    message: dict[str, Any] = orjson.loads(seen.body)
    if message["method"] == "tools/list":
        result: dict[str, Any] = {"tools": [{"name": "get", "inputSchema": {"type": "object"}}]}
    else:
        result = {"structuredContent": {"ok": True}, "content": []}
    body = orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
    headers = [("content-type", "application/json")]
    accepted = (seen.header("accept-encoding") or "").lower()
    if "gzip" in accepted or "*" in accepted:
        return Answer(200, gzip.compress(body), [*headers, ("content-encoding", "gzip")])
    return Answer(200, body, headers)


async def test_a_compressing_mcp_server_answers_identity_and_the_call_completes(
    redis_server: RedisProcess,
) -> None:
    server = await HttpServer().start()
    server.handler = _gzipping
    run_dir = tempfile.mkdtemp(prefix="cg-gzip-")
    config = Path(run_dir) / "gateway.yaml"
    config.write_text(CONFIG)
    environ = gateway_environ("127.0.0.1:1", redis_server.url, run_dir)
    environ["TEST_API_ADDR"] = server.address
    try:
        gw = await start(load_settings(config, environ=environ), extra_sinks=[MemorySink()])
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}") as channel:
                result = await gateway_pb2_grpc.CapabilityGatewayStub(channel).Invoke(
                    gateway_pb2.InvokeRequest(capability_id="big.get", input_json=b"{}"),
                    metadata=[("authorization", f"Bearer {token('alice')}")],
                    timeout=10,
                )
        finally:
            await gw.stop(0.5)
    finally:
        await server.stop()
    assert result.WhichOneof("outcome") == "completed", result
    assert orjson.loads(result.completed.output_json) == {"ok": True}
    assert result.execution_state == types_pb2.EXECUTION_STATE_COMPLETED
    assert {s.header("accept-encoding") for s in server.seen} == {"identity"}
