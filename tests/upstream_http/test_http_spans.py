"""The CLIENT span of each attempt on a `kind: http` upstream says what was sent the way
OpenTelemetry's HTTP client conventions do: the method and the path template, never the path
with the caller's values in it, and nothing claims it was gRPC. Real gateway, real HTTP server."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator

import grpc
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.upstream_http.conftest import HERE, HttpEnv
from tests.upstream_http.httpserver import HttpServer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
async def traced(redis_server: RedisProcess) -> AsyncIterator[tuple[HttpEnv, InMemorySpanExporter]]:
    api, other = await HttpServer().start(), await HttpServer().start()
    environ = {
        **gateway_environ("127.0.0.1:1", redis_server.url, tempfile.mkdtemp(prefix="cg-hs-")),
        "TEST_API_ADDR": api.address,
        "TEST_DEAD_ADDR": "127.0.0.1:9",
        "TEST_API_TOKEN": "static-upstream-credential",
    }
    spans = InMemorySpanExporter()
    gw = await start(
        load_settings(HERE / "gateway.yaml", environ=environ),
        extra_sinks=[MemorySink()],
        span_processors=[SimpleSpanProcessor(spans)],
    )
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}")
    yield HttpEnv(gw, api, other, channel), spans
    await channel.close()
    await gw.stop(0.5)
    await api.stop()
    await other.stop()


async def test_an_http_attempt_span_names_the_method_and_the_template_not_grpc(
    traced: tuple[HttpEnv, InMemorySpanExporter],
) -> None:
    env, spans = traced
    result = await env.invoke("files.read", {"folder": "secret-folder", "name": "n.txt"})
    assert result.WhichOneof("outcome") == "completed", result
    attempts = [
        dict(s.attributes or {})
        for s in spans.get_finished_spans()
        if s.name == "agent.procedure_execution"
    ]
    assert len(attempts) == 1, attempts
    (attempt,) = attempts
    assert attempt["http.request.method"] == "GET"
    assert attempt["url.template"] == "/api/v1/folders/{folder}/files/{name}"
    assert attempt["capgate.upstream"] == "api"
    assert attempt["capgate.attempt"] == 1
    assert not any(key.startswith("rpc.") for key in attempt), attempt
    assert not any("secret-folder" in str(value) for value in attempt.values()), attempt
