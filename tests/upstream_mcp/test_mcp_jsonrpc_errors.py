"""What a JSON-RPC error to `tools/call` says about the tool having run, through the real
gateway and a minimal stateless-era server on loopback: only invalid request (-32600),
method not found (-32601) and invalid params (-32602) mean nothing ran (COMPLETED: the server
answered); an internal error, a server-defined or an application code may come after the tool
acted (UNKNOWN)."""

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
from tests.upstream_mcp.test_mcp_bounds import CONFIG

pytestmark = pytest.mark.integration

CODES = {
    -32600: types_pb2.EXECUTION_STATE_COMPLETED,
    -32601: types_pb2.EXECUTION_STATE_COMPLETED,
    -32602: types_pb2.EXECUTION_STATE_COMPLETED,
    -32603: types_pb2.EXECUTION_STATE_UNKNOWN,
    -32700: types_pb2.EXECUTION_STATE_UNKNOWN,
    -32000: types_pb2.EXECUTION_STATE_UNKNOWN,  # server-defined
    -32099: types_pb2.EXECUTION_STATE_UNKNOWN,
    42: types_pb2.EXECUTION_STATE_UNKNOWN,  # an application's own code
}


class Erring:
    def __init__(self) -> None:
        self.code = 0

    def __call__(self, seen: Seen) -> Answer:
        message: dict[str, Any] = orjson.loads(seen.body)
        if message["method"] == "tools/list":
            result = {"tools": [{"name": "get", "inputSchema": {"type": "object"}}]}
            answer: dict[str, Any] = {"result": result}
        else:
            answer = {"error": {"code": self.code, "message": "secret internals"}}
        return Answer(200, orjson.dumps({"jsonrpc": "2.0", "id": message["id"], **answer}))


async def test_only_refusals_before_the_tool_ran_are_completed(
    redis_server: RedisProcess,
) -> None:
    server, erring = await HttpServer().start(), Erring()
    server.handler = erring
    run_dir = tempfile.mkdtemp(prefix="cg-jsonrpc-")
    config = Path(run_dir) / "gateway.yaml"
    config.write_text(CONFIG)
    environ = gateway_environ("127.0.0.1:1", redis_server.url, run_dir)
    environ["TEST_API_ADDR"] = server.address
    states = {}
    try:
        gw = await start(load_settings(config, environ=environ), extra_sinks=[MemorySink()])
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}") as channel:
                stub = gateway_pb2_grpc.CapabilityGatewayStub(channel)
                for code in CODES:
                    erring.code = code
                    result = await stub.Invoke(
                        gateway_pb2.InvokeRequest(capability_id="big.get", input_json=b"{}"),
                        metadata=[("authorization", f"Bearer {token('alice')}")],
                        timeout=10,
                    )
                    assert types_pb2.ErrorCode.Name(result.failed.code) == (
                        "ERROR_CODE_EXECUTION_FAILED"
                    ), result
                    assert "secret" not in result.failed.message
                    states[code] = result.execution_state
        finally:
            await gw.stop(0.5)
    finally:
        await server.stop()
    assert states == CODES
