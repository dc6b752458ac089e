"""docs/auth.md's claim about `x-capgate-*` metadata, through the real gateway (issue 30 item 2):
a caller on a `jwt` listener sends `x-capgate-*` keys as gRPC metadata and in
`InvokeRequest.metadata` (allowlisted, so policies could read them); a real Procedure upstream
records every metadata entry it receives and sees only the gateway's own values.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import jwt
import pytest

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, procedure_pb2
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.values import jws

pytestmark = [pytest.mark.integration]

SECRET = "auth-doc-claims-secret-0123456789abcdef"
DOC = Path(__file__).resolve().parents[2] / "docs" / "auth.md"
SPOOFED = (
    "x-capgate-execution-id",
    "x-capgate-capability",
    "x-capgate-surface",
    "x-capgate-approval-id",
    "x-capgate-actor-token",
    "x-capgate-idempotency-key",
    "x-capgate-correlation-id",
    "x-capgate-actor-id",
    "x-capgate-actor-kind",
    "x-capgate-actor-roles",
    "x-capgate-anything",
)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[list[tuple[str, str]]] = []

    async def invoke(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        self.calls.append(
            [(k, v) for k, v in context.invocation_metadata() or () if isinstance(v, str)]
        )
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


def _config(tmp: Path, port: int) -> Path:
    allowlist = ", ".join(SPOOFED)
    path = tmp / "gateway.yaml"
    path.write_text(
        f"""
version: 1
listeners:
  - name: agents
    address: 127.0.0.1:0
    surface: agent
    auth: jwt
    jwt:
      issuers: [idp]
      audience: capgate
      keys:
        - {{kid: k1, alg: HS256, secret: {SECRET}}}
upstreams:
  proc: {{address: "127.0.0.1:{port}", kind: procedure}}
capabilities:
  - id: demo.echo
    description: Echo.
    upstream: proc
    side_effect: none
    risk: low
    expose: {{agent: true}}
    input_schema: {{type: object}}
approvals: {{enabled: false}}
idempotency: {{enabled: false}}
audit: {{sinks: []}}
defaults:
  metadata_allowlist: [{allowlist}]
"""
    )
    return path


def _token() -> str:
    now = int(time.time())
    claims = {"sub": "alice", "iss": "idp", "aud": "capgate", "iat": now, "exp": now + 300}
    return jwt.encode(claims, SECRET, algorithm="HS256", headers={"kid": "k1"})


def test_the_doc_names_what_protects_the_upstream() -> None:
    text = " ".join(DOC.read_text().split())
    assert "strip_capgate_metadata" not in text  # nothing in gateway/ calls it
    assert "forwards no caller metadata at all" in text
    assert (
        "Neither the caller's gRPC metadata nor `InvokeRequest.metadata` is sent upstream" in text
    )


async def test_the_upstream_sees_none_of_the_callers_x_capgate_values(
    tmp_path: Path, upstream: tuple[Recorder, int]
) -> None:
    recorder, port = upstream
    gw = await start(load_settings(_config(tmp_path, port)))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}") as channel:
            stub = gateway_pb2_grpc.CapabilityGatewayStub(channel)
            result = await stub.Invoke(
                gateway_pb2.InvokeRequest(
                    capability_id="demo.echo",
                    input_json=b"{}",
                    metadata={key: f"body-spoof-{i}" for i, key in enumerate(SPOOFED)},
                ),
                metadata=[
                    ("authorization", f"Bearer {_token()}"),
                    *((key, f"header-spoof-{i}") for i, key in enumerate(SPOOFED)),
                ],
            )
    finally:
        await gw.stop(0.5)
    assert result.WhichOneof("outcome") == "completed", result
    (seen,) = recorder.calls
    assert not [(k, v) for k, v in seen if "spoof" in v], seen
    mine = dict(seen)
    assert {k for k, _ in seen if k.startswith("x-capgate-")} == {
        "x-capgate-execution-id",
        "x-capgate-capability",
        "x-capgate-surface",
        "x-capgate-idempotency-key",
        "x-capgate-actor-token",
    }
    assert mine["x-capgate-execution-id"] == result.execution_id
    assert mine["x-capgate-idempotency-key"] == result.execution_id  # no key: the execution's
    assert (mine["x-capgate-capability"], mine["x-capgate-surface"]) == ("demo.echo", "agent")
    claims = jws.parse_compact(mine["x-capgate-actor-token"]).payload
    assert (claims["sub"], claims["aud"]) == ("alice", "proc")
