"""Recording a finished call's outcome never adds a second terminal event nor escapes the
runner (issue 14 follow-up B), through the real gateway, a real Redis and a real upstream.

While the upstream runs, it turns the call's idempotency record into a Redis list, so the
journal's completion script fails inside Redis (WRONGTYPE: a `ResponseError`, not one of the
connectivity errors the stores map). The call completed: the caller gets the completed
envelope, the trail one terminal event (`capability.completed`), the log one line naming the
step, the execution and the exception type (no payload), and the failure is counted."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import redis.asyncio as aioredis

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, procedure_pb2, procedure_pb2_grpc, types_pb2
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import Gateway, start
from gateway.state.embedded import RedisProcess
from gateway.telemetry import metrics
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import terminal_events, token

pytestmark = pytest.mark.integration

PREFIX = "capgate-test-recording"
SECRET_OUTPUT = "output-sentinel-7f3a"

CONFIG = f"""
version: 1
listeners:
  - name: agents
    address: 127.0.0.1:0
    surface: agent
    auth: jwt
    jwt:
      issuers: [test-idp]
      audience: capgate
      keys:
        - {{kid: hs1, alg: HS256, secret: "{{{{ env.TEST_JWT_SECRET }}}}"}}
upstreams:
  saboteur:
    address: "{{{{ env.TEST_ORDERS_ADDR }}}}"
    kind: procedure
capabilities:
  - id: saboteur.write
    description: Answers, after turning its own idempotency record into the wrong type.
    upstream: saboteur
    side_effect: write
    risk: low
    expose: {{agent: true}}
    input_schema: {{type: object, additionalProperties: false}}
idempotency:
  ttl: 1h
audit:
  sinks: []
  hmac_key: "{{{{ env.TEST_HMAC_KEY }}}}"
redis:
  url: "{{{{ env.TEST_REDIS_URL }}}}"
  key_prefix: {PREFIX}
"""


class Saboteur(procedure_pb2_grpc.ProcedureServicer):  # type: ignore[misc]
    def __init__(self, redis_url: str) -> None:
        self.redis_url = redis_url
        self.calls = 0

    async def Invoke(
        self, request: procedure_pb2.ProcedureInvokeRequest, context: Any
    ) -> procedure_pb2.ProcedureInvokeResponse:
        self.calls += 1
        client = aioredis.Redis.from_url(self.redis_url)
        try:
            async for key in client.scan_iter(match=f"{PREFIX}:{{idem:*"):
                await client.delete(key)
                await client.rpush(key, "not a hash")
        finally:
            await client.aclose()
        return procedure_pb2.ProcedureInvokeResponse(output_json=f'{{"v":"{SECRET_OUTPUT}"}}')


@pytest.fixture
async def saboteur(
    redis_server: RedisProcess, tmp_path: Path
) -> AsyncIterator[tuple[Saboteur, Gateway, MemorySink]]:
    upstream = Saboteur(redis_server.url)
    server = grpc.aio.server()
    procedure_pb2_grpc.add_ProcedureServicer_to_server(upstream, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    run_dir = tempfile.mkdtemp(prefix="cg-or-")
    config = Path(run_dir) / "gateway.yaml"
    config.write_text(CONFIG)
    environ = gateway_environ(f"127.0.0.1:{port}", redis_server.url, run_dir)
    memory = MemorySink()
    gw = await start(load_settings(config, environ=environ), extra_sinks=[memory])
    yield upstream, gw, memory
    await gw.stop(0.5)
    await server.stop(0)


async def test_a_journal_write_redis_refuses_leaves_one_terminal_event(
    saboteur: tuple[Saboteur, Gateway, MemorySink], caplog: pytest.LogCaptureFixture
) -> None:
    upstream, gw, memory = saboteur
    before = metrics.outcome_record_failures.value(("idempotency",))
    caplog.set_level(logging.WARNING, logger="capgate.pipeline")
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}") as channel:
        result = await gateway_pb2_grpc.CapabilityGatewayStub(channel).Invoke(
            gateway_pb2.InvokeRequest(capability_id="saboteur.write", idempotency_key="rec-1"),
            metadata=[("authorization", f"Bearer {token('alice')}")],
            timeout=10,
        )
    assert result.WhichOneof("outcome") == "completed", result
    assert result.execution_state == types_pb2.EXECUTION_STATE_COMPLETED
    assert upstream.calls == 1
    await gw.runtime.audit.flush()  # type: ignore[attr-defined]
    events = [e for e in memory.events if e.get("execution_id") == result.execution_id]
    terminal = terminal_events(events)
    assert [e["event"] for e in terminal] == ["capability.completed"], terminal
    assert events[-1] is terminal[0]
    lines = [r.getMessage() for r in caplog.records if r.name == "capgate.pipeline"]
    assert any(
        "idempotency" in line and result.execution_id in line and "ResponseError" in line
        for line in lines
    ), lines
    assert not any(SECRET_OUTPUT in line or "WRONGTYPE" in line for line in lines), lines
    assert not any(r.exc_info for r in caplog.records if r.name == "capgate.pipeline")
    after = metrics.outcome_record_failures.value(("idempotency",))
    assert after == before + 1
