"""The upstream-side helper in a real grpc.aio server on loopback: AgentContextInterceptor
verifies the forwarded actor token and hands handlers their AgentContext, or refuses with
UNAUTHENTICATED. Tokens are signed with the golden vectors' test keys; the clock is fixed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import orjson
import pytest
from capgate_client.server import (
    ActorTokenVerifier,
    AgentContextInterceptor,
    AgentContextInvalid,
    current_agent_context,
    read_agent_context,
)
from clientkit import VECTORS, mint

from capgate.v1 import procedure_pb2, procedure_pb2_grpc

pytestmark = pytest.mark.integration

NOW = 1_767_225_600
CLAIMS: dict[str, Any] = {
    "iss": "capgate",
    "aud": "orders",
    "sub": "alice",
    "actor_iss": "test-idp",
    "kind": "user",
    "roles": ["agent"],
    "exec_id": "exe-1",
    "cap": "orders.refund",
    "surface": "agent",
    "iat": NOW,
    "exp": NOW + 60,
    "jti": "jti-1",
}
VERIFIER = ActorTokenVerifier(
    VECTORS["jwks"], issuer="capgate", audience="orders", clock=lambda: NOW + 1
)


def forwarded(token: str, **extra: str) -> list[tuple[str, str]]:
    md = {
        "x-capgate-actor-token": token,
        "x-capgate-execution-id": "exe-1",
        "x-capgate-capability": "orders.refund",
        "x-capgate-surface": "agent",
        "x-capgate-idempotency-key": "key-1",
        **{k.replace("_", "-"): v for k, v in extra.items()},
    }
    return list(md.items())


class Echo(procedure_pb2_grpc.ProcedureServicer):
    """Answers with the agent context the handler sees."""

    async def Invoke(self, request: Any, context: Any) -> Any:
        agent = current_agent_context()
        body = {
            "actor": [
                agent.actor.id,
                agent.actor.issuer,
                agent.actor.kind,
                list(agent.actor.roles),
            ],
            "execution_id": agent.execution_id,
            "idempotency_key": agent.idempotency_key,
            "correlation_id": agent.correlation_id,
            "approval": [agent.approval_id, agent.approver],
        }
        return procedure_pb2.ProcedureInvokeResponse(output_json=orjson.dumps(body).decode())


@pytest.fixture
async def procedure() -> AsyncIterator[procedure_pb2_grpc.ProcedureStub]:
    server = grpc.aio.server(interceptors=[AgentContextInterceptor(VERIFIER)])
    procedure_pb2_grpc.add_ProcedureServicer_to_server(Echo(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield procedure_pb2_grpc.ProcedureStub(channel)
    await server.stop(0)


async def test_a_valid_token_reaches_the_handler_as_an_agent_context(procedure: Any) -> None:
    token = mint({**CLAIMS, "approval_id": "apr-1", "approver": "bob"}, alg="ES256")
    metadata = forwarded(token, x_capgate_approval_id="apr-1", x_capgate_correlation_id="c-9")
    answer = await procedure.Invoke(procedure_pb2.ProcedureInvokeRequest(), metadata=metadata)
    assert orjson.loads(answer.output_json) == {
        "actor": ["alice", "test-idp", "user", ["agent"]],
        "execution_id": "exe-1",
        "idempotency_key": "key-1",
        "correlation_id": "c-9",
        "approval": ["apr-1", "bob"],
    }


REUSED = {k: v for k, v in CLAIMS.items() if k not in ("exec_id", "cap")}  # the gateway's shape


async def test_a_reused_token_takes_the_execution_from_the_metadata(procedure: Any) -> None:
    """DESIGN §12 (amended 2026-12-01): one token serves many executions of the same actor,
    upstream and surface; each call's execution id and capability come beside it."""
    token = mint(REUSED)
    for execution in ("exe-1", "exe-2"):
        metadata = forwarded(token, x_capgate_execution_id=execution, x_capgate_idempotency_key="")
        answer = await procedure.Invoke(procedure_pb2.ProcedureInvokeRequest(), metadata=metadata)
        body = orjson.loads(answer.output_json)
        assert (body["execution_id"], body["idempotency_key"]) == (execution, execution)
    context = read_agent_context(VERIFIER, forwarded(token))
    assert (context.execution_id, context.capability_id) == ("exe-1", "orders.refund")


@pytest.mark.parametrize(
    ("metadata", "reason"),
    [
        ([], "missing_token"),
        (
            [(k, v) for k, v in forwarded(mint(REUSED)) if k != "x-capgate-execution-id"],
            "missing_metadata",
        ),
        (
            [(k, v) for k, v in forwarded(mint(REUSED)) if k != "x-capgate-capability"],
            "missing_metadata",
        ),
        (forwarded(mint({**CLAIMS, "aud": "billing"})), "wrong_audience"),
        (forwarded(mint(CLAIMS), x_capgate_execution_id="exe-2"), "header_mismatch"),
        (forwarded(mint(CLAIMS), x_capgate_approval_id="apr-forged"), "header_mismatch"),
        (forwarded(mint(CLAIMS)[:-4] + "AAAA"), "bad_signature"),
    ],
    ids=[
        "missing",
        "reused-without-execution-id",
        "reused-without-capability",
        "other-audience",
        "execution-id-mismatch",
        "forged-approval",
        "tampered",
    ],
)
async def test_calls_without_a_valid_context_are_refused_unauthenticated(
    procedure: Any, metadata: list[tuple[str, str]], reason: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await procedure.Invoke(procedure_pb2.ProcedureInvokeRequest(), metadata=metadata)
    assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
    assert refused.value.details() == f"capgate agent context refused: {reason}"


def test_a_repeated_token_header_never_passes_as_one_value() -> None:
    token = mint(CLAIMS)
    with pytest.raises(AgentContextInvalid) as refused:
        read_agent_context(VERIFIER, [*forwarded(token), ("x-capgate-actor-token", token)])
    assert refused.value.reason == "malformed"


def test_the_idempotency_key_defaults_to_the_execution_id_and_expiry_is_checked() -> None:
    context = read_agent_context(VERIFIER, [("x-capgate-actor-token", mint(CLAIMS))])
    assert context.idempotency_key == "exe-1"
    assert context.approval_id is None
    with pytest.raises(AgentContextInvalid) as refused:
        read_agent_context(VERIFIER, [("x-capgate-actor-token", mint(CLAIMS))], now=NOW + 65)
    assert refused.value.reason == "expired"


def test_current_agent_context_outside_a_call_raises_lookup_error() -> None:
    with pytest.raises(LookupError):
        current_agent_context()
