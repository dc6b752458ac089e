"""A real gateway in front of a real HTTP server on loopback (tests/upstream_http)."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest

from capgate.v1 import gateway_pb2, gateway_pb2_grpc
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import Gateway, start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import token
from tests.upstream_http.httpserver import HttpServer

HERE = Path(__file__).parent


@dataclass
class HttpEnv:
    gw: Gateway
    api: HttpServer  # the upstream every capability goes to
    other: HttpServer  # another origin: must never see a request
    channel: grpc.aio.Channel

    async def invoke(
        self, capability: str, value: Any, **fields: Any
    ) -> gateway_pb2.ExecutionResult:
        request = gateway_pb2.InvokeRequest(
            capability_id=capability, input_json=orjson.dumps(value), **fields
        )
        stub = gateway_pb2_grpc.CapabilityGatewayStub(self.channel)
        result: gateway_pb2.ExecutionResult = await stub.Invoke(
            request, metadata=[("authorization", f"Bearer {token('alice')}")], timeout=10
        )
        return result


@pytest.fixture(scope="module")
async def http_env(redis_server: RedisProcess) -> AsyncIterator[HttpEnv]:
    api, other = await HttpServer().start(), await HttpServer().start()
    run_dir = tempfile.mkdtemp(prefix="cg-http-")
    environ = {
        **gateway_environ("127.0.0.1:1", redis_server.url, run_dir),
        "TEST_API_ADDR": api.address,
        "TEST_DEAD_ADDR": "127.0.0.1:9",  # discard: nothing listens on loopback
        "TEST_API_TOKEN": "static-upstream-credential",
    }
    gw = await start(
        load_settings(HERE / "gateway.yaml", environ=environ), extra_sinks=[MemorySink()]
    )
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}")
    yield HttpEnv(gw, api, other, channel)
    await channel.close()
    await gw.stop(0.5)
    await api.stop()
    await other.stop()


@pytest.fixture
async def env(http_env: HttpEnv) -> HttpEnv:
    http_env.api.reset()
    http_env.other.reset()
    return http_env
