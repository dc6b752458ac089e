"""Stage 6 (`check_actor`, SI-3) reached through the real gateway (issue 30, "promised, never
tested"): an mTLS client whose certificate, signed by the trusted CA, names an empty DNS SAN as
its only identity passes the handshake and the listener with an empty actor id; stage 6 refuses
the call (UNAUTHENTICATED, `no well-formed actor`) before any policy or upstream, and the audit
trail records it."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, procedure_pb2, types_pb2
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from tests.auth.authkit import Issued, cert_pem, issue, make_ca, private_pem

pytestmark = [pytest.mark.integration]


class Recorder:
    def __init__(self) -> None:
        self.calls = 0

    async def invoke(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        self.calls += 1
        return procedure_pb2.ProcedureInvokeResponse(output_json='{"ok": true}').SerializeToString()


@pytest.fixture
async def upstream() -> AsyncIterator[tuple[Recorder, int]]:
    recorder = Recorder()
    server = grpc.aio.server()
    handler = grpc.method_handlers_generic_handler(
        "capgate.v1.Procedure",
        {"Invoke": grpc.unary_unary_rpc_method_handler(recorder.invoke)},
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield recorder, port
    await server.stop(None)


def _config(tmp: Path, ca: Issued, port: int) -> Path:
    cert, key = issue(ca, "gateway", dns=("localhost",), ips=("127.0.0.1",)).write(tmp, "server")
    (tmp / "ca.crt").write_bytes(cert_pem(ca.cert))
    path = tmp / "gateway.yaml"
    path.write_text(
        f"""
version: 1
listeners:
  - name: services
    address: 127.0.0.1:0
    surface: direct
    auth: mtls
    tls: {{cert_file: {cert}, key_file: {key}, client_ca_file: {tmp / "ca.crt"}}}
upstreams:
  proc: {{address: "127.0.0.1:{port}", kind: procedure}}
capabilities:
  - id: demo.echo
    description: Echo.
    upstream: proc
    side_effect: none
    risk: low
    expose: {{direct: true}}
    input_schema: {{type: object}}
approvals: {{enabled: false}}
idempotency: {{enabled: false}}
audit: {{sinks: []}}
"""
    )
    return path


async def _invoke(port: int, ca: Issued, client: Issued) -> gateway_pb2.ExecutionResult:
    credentials = grpc.ssl_channel_credentials(
        root_certificates=cert_pem(ca.cert),
        private_key=private_pem(client.key),
        certificate_chain=cert_pem(client.cert),
    )
    async with grpc.aio.secure_channel(f"127.0.0.1:{port}", credentials) as channel:
        stub = gateway_pb2_grpc.CapabilityGatewayStub(channel)
        return await stub.Invoke(
            gateway_pb2.InvokeRequest(capability_id="demo.echo", input_json=b"{}"), timeout=10
        )


async def test_an_actor_without_an_id_is_refused_at_stage_6_before_anything_runs(
    upstream: tuple[Recorder, int],
) -> None:
    recorder, port = upstream
    ca = make_ca()
    tmp = Path(tempfile.mkdtemp(prefix="cg-"))
    memory = MemorySink()
    gw = await start(load_settings(_config(tmp, ca, port)), extra_sinks=[memory])
    try:
        listener = gw.ports()["services"]
        ok = await _invoke(listener, ca, issue(ca, "billing", dns=("billing.shop.svc",)))
        assert ok.HasField("completed"), ok  # the control: a well-formed identity runs
        assert recorder.calls == 1
        result = await _invoke(listener, ca, issue(ca, "blank", dns=("",)))
        await gw.runtime.audit.flush()  # type: ignore[attr-defined]
    finally:
        await gw.stop(0.5)
    assert result.WhichOneof("outcome") == "failed", result
    assert result.failed.code == types_pb2.ERROR_CODE_UNAUTHENTICATED
    assert result.failed.stage == "authentication"
    assert result.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
    assert recorder.calls == 1  # stage 6 refused: nothing reached the upstream
    events: list[dict[str, Any]] = [
        e for e in memory.events if e.get("execution_id") == result.execution_id
    ]
    assert [e["event"] for e in events] == ["capability.requested", "capability.failed"]
    failed = events[-1]
    assert (failed["code"], failed["reason"]) == ("UNAUTHENTICATED", "no well-formed actor")
    assert failed["actor_id"] == ""  # the listener's actor, as stage 6 saw it
    assert failed["stances"] == []  # refused before the policies (stage 7)
