"""U+0000 never reaches the policies (review of issue 29's changes found it): the policy engine
(cel-cpp through cel-expr-python) reads a string only up to its first NUL, so `input.cmd ==
'ls'` held for "ls\\u0000; rm -rf /" while the upstream got all of it, and a token whose `sub`
was "admin\\u0000x" was `actor.id == 'admin'` to every policy. Through the real gateway: such
input is INPUT_INVALID before anything runs; such a credential is UNAUTHENTICATED.
"""

from __future__ import annotations

from datetime import UTC, datetime

import grpc
import pytest

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, types_pb2
from policy.backends.celexpr import CelExprBackend
from tests.gateway.harness import Env, token

pytestmark = pytest.mark.integration


def test_the_engine_reads_a_string_only_up_to_its_nul() -> None:
    """Why the gateway refuses NUL: if this ever stops holding, the refusal is still safe."""
    backend = CelExprBackend()
    program = backend.compile("input.cmd == 'ls'")
    bindings = {
        "input": {"cmd": "ls\x00; rm -rf /"},
        "request": {"now": datetime.now(UTC)},
    }
    assert backend.run(program, backend.activation(bindings)) is True


@pytest.mark.parametrize(
    "raw",
    [
        b'{"order_id": "o-1001\\u0000; drop"}',
        b'{"order_id": "o-1001", "x\\u0000": 1}',
    ],
)
async def test_input_with_a_nul_is_invalid_and_nothing_runs(env: Env, raw: bytes) -> None:
    await env.reset_upstream()
    result = await env.invoke("orders.get", raw=raw)
    assert result.WhichOneof("outcome") == "failed"
    assert result.failed.code == types_pb2.ERROR_CODE_INPUT_INVALID
    assert [i.message for i in result.failed.issues] == ["a string or key contains U+0000 (NUL)"]
    assert result.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
    assert await env.upstream_calls() == 0


async def test_an_escaped_backslash_before_u0000_is_plain_text(env: Env) -> None:
    result = await env.invoke("orders.get", raw=b'{"order_id": "o-1001\\\\u0000"}')
    assert result.failed.code != types_pb2.ERROR_CODE_INPUT_INVALID  # "\\u0000" is six characters


@pytest.mark.parametrize(
    "claims",
    [{"sub": "alice\x00root"}, {"roles": ["agent", "admin\x00x"]}, {"sub": "alice\ud800"}],
)
async def test_a_token_with_a_nul_in_a_claim_is_unauthenticated(
    env: Env, claims: dict[str, object]
) -> None:
    await env.reset_upstream()
    stub = gateway_pb2_grpc.CapabilityGatewayStub(env.channel("agents"))
    bearer = token("alice", **claims)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.Invoke(
            gateway_pb2.InvokeRequest(
                capability_id="orders.get", input_json=b'{"order_id":"o-1001"}'
            ),
            metadata=[("authorization", f"Bearer {bearer}")],
            timeout=10,
        )
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert await env.upstream_calls() == 0


async def test_check_refuses_it_as_invoke_does(env: Env) -> None:
    stub = gateway_pb2_grpc.CapabilityGatewayStub(env.channel("agents"))
    answer = await stub.Check(
        gateway_pb2.CheckRequest(
            capability_id="orders.get", input_json=b'{"order_id": "o-1001\\u0000; drop"}'
        ),
        metadata=env.metadata("agents", "alice"),
        timeout=10,
    )
    assert answer.error.code == types_pb2.ERROR_CODE_INPUT_INVALID
    assert [i.message for i in answer.error.issues] == ["a string or key contains U+0000 (NUL)"]
