"""A near-limit SSE answer that arrives in small pieces is read in linear time: through the
real gateway and a minimal stateless-era server on loopback that writes a 4 MiB-bound answer
in 1 KiB writes (the reader used to re-split everything buffered on every piece, which blocked
the event loop for seconds). bench/ has no timing of this; the report of the change has."""

from __future__ import annotations

import tempfile
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

LIMIT = 4 * 1024 * 1024
TEXT = "y" * (LIMIT - 64 * 1024)  # near the limit, with room for the notes and framing


def _streaming(seen: Seen) -> Answer:
    message: dict[str, Any] = orjson.loads(seen.body)
    sse = [("content-type", "text/event-stream")]
    if message["method"] == "tools/list":
        result: dict[str, Any] = {"tools": [{"name": "get", "inputSchema": {"type": "object"}}]}
        return Answer(200, orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}))
    note = b"data: " + orjson.dumps({"jsonrpc": "2.0", "method": "notifications/message"})
    reply = {"jsonrpc": "2.0", "id": message["id"], "result": {"structuredContent": {"t": TEXT}}}
    body = (note + b"\n\n") * 100 + b"data: " + orjson.dumps(reply) + b"\n\n"
    return Answer(200, body, sse, chunk=1024)


async def test_a_near_limit_answer_in_small_chunks_completes(redis_server: RedisProcess) -> None:
    server = await HttpServer().start()
    server.handler = _streaming
    run_dir = tempfile.mkdtemp(prefix="cg-stream-")
    config = Path(run_dir) / "gateway.yaml"
    text = CONFIG.replace("max_response_bytes: 4096", f"max_response_bytes: {LIMIT}")
    text = text.replace(
        "    expose: {agent: true}\n",
        "    expose: {agent: true}\n"
        f"    limits: {{max_bytes: {LIMIT}, max_string_length: {LIMIT}}}\n",
    )
    config.write_text(text)
    environ = gateway_environ("127.0.0.1:1", redis_server.url, run_dir)
    environ["TEST_API_ADDR"] = server.address
    try:
        gw = await start(load_settings(config, environ=environ), extra_sinks=[MemorySink()])
        try:
            async with grpc.aio.insecure_channel(
                f"127.0.0.1:{gw.ports()['agents']}",
                options=[("grpc.max_receive_message_length", 2 * LIMIT)],
            ) as channel:
                result = await gateway_pb2_grpc.CapabilityGatewayStub(channel).Invoke(
                    gateway_pb2.InvokeRequest(capability_id="big.get", input_json=b"{}"),
                    metadata=[("authorization", f"Bearer {token('alice')}")],
                    timeout=60,
                )
        finally:
            await gw.stop(0.5)
    finally:
        await server.stop()
    assert result.WhichOneof("outcome") == "completed", result.failed
    assert orjson.loads(result.completed.output_json) == {"t": TEXT}
