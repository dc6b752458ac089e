"""The forwarded actor token is reused across executions (DESIGN §12, amended 2026-12-01),
through the real gateway: a real grpc.aio Procedure upstream records what each call carried,
and the upstream-side verifier (capgate_client.server.read_agent_context) reads each call's own
execution from the metadata beside the one token."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from capgate_client.actor_token import ActorTokenVerifier
from capgate_client.server import read_agent_context

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, procedure_pb2
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.values import jws

pytestmark = [pytest.mark.integration]


class Recorder:
    def __init__(self) -> None:
        self.calls: list[dict[str, str]] = []

    async def invoke(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        self.calls.append(
            {k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)}
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
    caps = "".join(
        f"""
  - id: demo.{name}
    description: {name}.
    upstream: {upstream}
    side_effect: none
    risk: low
    expose: {{agent: true}}
    input_schema: {{type: object}}
"""
        for name, upstream in (("one", "proc"), ("two", "proc"), ("other", "proc2"))
    )
    path = tmp / "gateway.yaml"
    path.write_text(
        f"""
version: 1
listeners:
  - {{name: agents, address: "127.0.0.1:0", surface: agent, auth: none}}
upstreams:
  proc: {{address: "127.0.0.1:{port}", kind: procedure}}
  proc2: {{address: "127.0.0.1:{port}", kind: procedure}}
capabilities:{caps}
redis:
  data_dir: {tmp}/redis
audit: {{sinks: []}}
actor_token: {{jwks_out: {tmp}/jwks.json}}
"""
    )
    return path


async def test_one_token_serves_many_executions_and_each_call_names_its_own(
    tmp_path: Path, upstream: tuple[Recorder, int]
) -> None:
    recorder, port = upstream
    gw = await start(load_settings(_config(tmp_path, port)))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}") as channel:
            stub = gateway_pb2_grpc.CapabilityGatewayStub(channel)
            results: list[Any] = []
            for cap in ("demo.one", "demo.two", "demo.one", "demo.other"):
                result = await stub.Invoke(
                    gateway_pb2.InvokeRequest(capability_id=cap, input_json=b"{}")
                )
                assert result.WhichOneof("outcome") == "completed", result
                results.append(result)
    finally:
        await gw.stop(0.5)
    calls = recorder.calls
    assert len(calls) == 4
    tokens = [c["x-capgate-actor-token"] for c in calls]
    # Same actor, upstream and surface: one token for three executions of two capabilities.
    assert tokens[0] == tokens[1] == tokens[2]
    assert tokens[3] != tokens[0]  # another upstream: another audience, another token
    claims = jws.parse_compact(tokens[0]).payload
    assert "exec_id" not in claims and "cap" not in claims
    assert claims["aud"] == "proc"
    assert jws.parse_compact(tokens[3]).payload["aud"] == "proc2"
    jwks = json.loads((tmp_path / "jwks.json").read_text())
    verifier = ActorTokenVerifier(jwks, issuer="capgate", audience="proc")
    for call, result, cap in zip(
        calls[:3], results[:3], ("demo.one", "demo.two", "demo.one"), strict=True
    ):
        context = read_agent_context(verifier, list(call.items()))
        assert (context.execution_id, context.capability_id) == (result.execution_id, cap)
    assert len({r.execution_id for r in results}) == 4
