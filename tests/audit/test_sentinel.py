"""The sentinel-secret test (SI-9, SI-10): unique strings placed in inputs, upstream outputs,
the caller's JWT, config secrets (through `{{ env.VAR }}`) and upstream error text appear in no
log line, audit event (file, Redis stream, memory), span (attributes, events, status) or metric
label — while the output sentinel does reach the caller, proving it flowed through."""

from __future__ import annotations

import logging
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import jwt
import orjson
import pytest
import redis.asyncio as aioredis
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, procedure_pb2, procedure_pb2_grpc, types_pb2
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import Gateway, start
from gateway.state.embedded import RedisProcess
from gateway.telemetry import metrics
from tests.audit.kit import Stack
from tests.gateway.harness import Env

pytestmark = pytest.mark.integration

HERE = Path(__file__).parent / "sentinel"
TAG = uuid.uuid4().hex[:8]
SENTINELS = {
    "input": f"SENTINEL-INPUT-{TAG}",
    "output": f"SENTINEL-OUTPUT-{TAG}",
    "jwt_claim": f"SENTINEL-JWT-{TAG}",
    "jwt_secret": f"SENTINEL-CONFIG-JWT-{TAG}-0123456789abcdef",
    "hmac_key": f"SENTINEL-CONFIG-HMAC-{TAG}-0123456789abcdef",
    "upstream_error": f"SENTINEL-UPSTREAM-ERROR-{TAG}",
}


class Probe(procedure_pb2_grpc.ProcedureServicer):
    """Echoes the input text with a secret of its own, or fails with a secret in its text."""

    async def Invoke(self, request: Any, context: Any) -> Any:
        value = orjson.loads(request.input_json)
        if value["mode"] == "fail":
            await context.abort(
                grpc.StatusCode.INTERNAL, f"db at 10.0.0.7 said {SENTINELS['upstream_error']}"
            )
        output = {"text": value["text"], "secret": SENTINELS["output"]}
        return procedure_pb2.ProcedureInvokeResponse(output_json=orjson.dumps(output).decode())


def token(secret: str) -> str:
    now = int(time.time())
    claims = {
        "sub": "alice",
        "kind": "user",
        "iss": "sentinel-idp",
        "aud": "capgate",
        "iat": now,
        "exp": now + 300,
        "roles": ["agent"],
        "note": SENTINELS["jwt_claim"],
    }
    return jwt.encode(claims, secret, algorithm="HS256", headers={"kid": "s1"})


@pytest.fixture
async def sentinel_stack(redis_server: RedisProcess) -> AsyncIterator[tuple[Stack, Path]]:
    upstream = grpc.aio.server()
    procedure_pb2_grpc.add_ProcedureServicer_to_server(Probe(), upstream)
    port = upstream.add_insecure_port("127.0.0.1:0")
    await upstream.start()
    audit_file = Path(tempfile.mkdtemp(prefix="cg-")) / "audit.jsonl"
    environ = {
        "SENTINEL_JWT_SECRET": SENTINELS["jwt_secret"],
        "SENTINEL_HMAC_KEY": SENTINELS["hmac_key"],
        "SENTINEL_UPSTREAM": f"127.0.0.1:{port}",
        "SENTINEL_AUDIT_FILE": str(audit_file),
        "SENTINEL_REDIS_URL": redis_server.url,
    }
    settings = load_settings(HERE / "gateway.yaml", environ=environ)
    spans = InMemorySpanExporter()
    memory = MemorySink()
    gw: Gateway = await start(
        settings, extra_sinks=[memory], span_processors=[SimpleSpanProcessor(spans)]
    )
    env = Env(gw=gw, audit=memory, orders_address="", socket_path="")
    try:
        yield Stack(env=env, spans=spans, settings=settings), audit_file
    finally:
        for channel in env.channels.values():
            await channel.close()
        await gw.stop(0.2)
        await upstream.stop(0)


def _span_texts(exporter: InMemorySpanExporter) -> list[str]:
    out = []
    for span in exporter.get_finished_spans():
        out.append(span.to_json())  # name, attributes, events, links, status, resource
    return out


async def test_no_secret_reaches_logs_events_spans_or_metrics(
    sentinel_stack: tuple[Stack, Path], redis_server: RedisProcess, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    running, audit_file = sentinel_stack
    stub = gateway_pb2_grpc.CapabilityGatewayStub(running.env.channel("agents"))
    md = [("authorization", f"Bearer {token(SENTINELS['jwt_secret'])}")]

    async def invoke(value: dict[str, Any], metadata: list[tuple[str, str]] = md) -> Any:
        return await stub.Invoke(
            gateway_pb2.InvokeRequest(capability_id="probe.run", input_json=orjson.dumps(value)),
            metadata=metadata,
        )

    echoed = await invoke({"mode": "echo", "text": SENTINELS["input"]})
    assert echoed.WhichOneof("outcome") == "completed"
    assert SENTINELS["output"] in echoed.completed.output_json  # it did flow through
    failed = await invoke({"mode": "fail", "text": SENTINELS["input"]})
    assert failed.failed.code == types_pb2.ERROR_CODE_EXECUTION_FAILED
    invalid = await invoke({"mode": "echo", "text": 1, "extra": SENTINELS["input"]})
    assert invalid.failed.code == types_pb2.ERROR_CODE_INPUT_INVALID
    denied = await invoke({"mode": "echo", "text": "deny " + SENTINELS["input"]})
    assert denied.failed.code == types_pb2.ERROR_CODE_POLICY_DENIED
    forged = [("authorization", f"Bearer {token('another-secret-' + SENTINELS['jwt_claim'])}")]
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await invoke({"mode": "echo", "text": SENTINELS["input"]}, forged)
    assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED

    await running.env.gw.runtime.audit.flush()  # type: ignore[attr-defined]
    client = aioredis.Redis.from_url(redis_server.url)
    stream = [
        fields[b"e"].decode() for _id, fields in await client.xrange("capgate-sentinel:audit")
    ]
    await client.aclose()
    scraped = await running.scrape()
    labels = [
        value for snap in metrics.snapshot() for series in snap.series for value in series.labels
    ]
    assert len(stream) >= 10
    assert running.spans.get_finished_spans()
    places = {
        "log lines": [r.getMessage() + (r.exc_text or "") for r in caplog.records] + [caplog.text],
        "audit file": [audit_file.read_text()],
        "audit stream": stream,
        "audit memory": [orjson.dumps(e).decode() for e in running.memory.events],
        "spans": _span_texts(running.spans),
        "metric labels": [*labels, scraped],
        "caller-visible error": [str(refused.value.details())],
    }
    secrets = [*SENTINELS.values(), md[0][1].removeprefix("Bearer "), forged[0][1][7:]]
    for where, texts in places.items():
        for secret in secrets:
            leaked = [t for t in texts if secret in t]
            assert not leaked, f"{secret} in {where}: {leaked[0][:300]}"
