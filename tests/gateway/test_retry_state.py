"""`execution_state` over retries (issue 14, item 1: truthful for every failure) through the real
gateway, real Redis and a real upstream: the first attempt reaches the upstream and fails
retryably with no definite answer (UNAVAILABLE after connecting: UNKNOWN); the upstream is gone
before the retry, which never connects (NOT_STARTED). The envelope must say UNKNOWN — the first
attempt may have had its effect — and an idempotency key must replay that, not run again."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, procedure_pb2, procedure_pb2_grpc, types_pb2
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import Gateway, start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import token

pytestmark = pytest.mark.integration

CONFIG = """
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
        - {kid: hs1, alg: HS256, secret: "{{ env.TEST_JWT_SECRET }}"}
upstreams:
  vanishing:
    address: "{{ env.TEST_ORDERS_ADDR }}"
    kind: procedure
capabilities:
  - id: vanishing.read
    description: Answers UNAVAILABLE once, then its server is gone.
    upstream: vanishing
    side_effect: read
    risk: low
    expose: {agent: true}
    retry: {max_attempts: 1, initial_backoff: 1ms, max_backoff: 1ms}
    input_schema: {type: object, additionalProperties: false}
audit:
  sinks: []
  hmac_key: "{{ env.TEST_HMAC_KEY }}"
redis:
  url: "{{ env.TEST_REDIS_URL }}"
  key_prefix: capgate-test-retry-state
"""


class Vanishing(procedure_pb2_grpc.ProcedureServicer):  # type: ignore[misc]
    def __init__(self) -> None:
        self.calls = 0

    async def Invoke(
        self, request: procedure_pb2.ProcedureInvokeRequest, context: Any
    ) -> procedure_pb2.ProcedureInvokeResponse:
        self.calls += 1
        await context.abort(grpc.StatusCode.UNAVAILABLE, "going away")
        raise AssertionError("unreachable")


@pytest.fixture
async def vanishing(
    redis_server: RedisProcess, tmp_path: Path
) -> AsyncIterator[tuple[Vanishing, Gateway]]:
    upstream = Vanishing()
    server = grpc.aio.server()
    procedure_pb2_grpc.add_ProcedureServicer_to_server(upstream, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    run_dir = tempfile.mkdtemp(prefix="cg-rs-")
    config = Path(run_dir) / "gateway.yaml"
    config.write_text(CONFIG)
    environ = gateway_environ(f"127.0.0.1:{port}", redis_server.url, run_dir)
    gw = await start(load_settings(config, environ=environ), extra_sinks=[MemorySink()])

    async def backoff_while_the_upstream_goes_away(_delay: float) -> None:
        await server.stop(0)  # the injected sleep (Runtime.sleep): the retry finds it gone

    gw.runtime.sleep = backoff_while_the_upstream_goes_away
    yield upstream, gw
    await gw.stop(0.5)
    await server.stop(0)


async def _invoke(gw: Gateway, key: str) -> gateway_pb2.ExecutionResult:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}") as channel:
        result: gateway_pb2.ExecutionResult = await gateway_pb2_grpc.CapabilityGatewayStub(
            channel
        ).Invoke(
            gateway_pb2.InvokeRequest(capability_id="vanishing.read", idempotency_key=key),
            metadata=[("authorization", f"Bearer {token('alice')}")],
            timeout=10,
        )
        return result


async def test_a_retry_that_never_connects_does_not_undo_an_attempt_that_did(
    vanishing: tuple[Vanishing, Gateway],
) -> None:
    upstream, gw = vanishing
    first = await _invoke(gw, "retry-state-1")
    assert first.attempts == 2, first
    assert types_pb2.ErrorCode.Name(first.failed.code) == "ERROR_CODE_UPSTREAM_UNAVAILABLE"
    assert first.execution_state == types_pb2.EXECUTION_STATE_UNKNOWN
    assert upstream.calls == 1
    # UNKNOWN is recorded, so a repeat replays it instead of running the call again.
    again = await _invoke(gw, "retry-state-1")
    assert again == first
