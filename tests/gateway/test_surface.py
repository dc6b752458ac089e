"""Listener and surface behaviour over real gRPC: concealment (SI-8), per-listener services
(§12), transport authentication (SI-3), discovery, Check, and a server that keeps serving."""

from __future__ import annotations

import time

import grpc
import jwt
import orjson
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from capgate.v1 import admin_pb2, admin_pb2_grpc, gateway_pb2, types_pb2
from tests.gateway.harness import ACTORS, JWT_SECRET, Env, token

pytestmark = pytest.mark.integration


def _without_execution_id(result: gateway_pb2.ExecutionResult) -> bytes:
    clone = gateway_pb2.ExecutionResult()
    clone.CopyFrom(result)
    clone.execution_id = ""
    return clone.SerializeToString(deterministic=True)


async def test_unknown_unexposed_and_hidden_capabilities_answer_identically(env: Env) -> None:
    # Same requested id text is impossible across three capabilities, so compare each answer
    # with the unknown-id answer for the same id string: a caller that probes "admin.orders.purge"
    # must not be able to tell it exists.
    hidden = await env.invoke("admin.orders.purge", {})
    unexposed = await env.invoke("orders.unexposed", {"order_id": "o-1001"})
    for result, cap_id in ((hidden, "admin.orders.purge"), (unexposed, "orders.unexposed")):
        unknown = await env.invoke(cap_id + ".x", {})
        unknown.capability_id = cap_id  # the only field that echoes the request
        assert _without_execution_id(result) == _without_execution_id(unknown)
        assert not result.HasField("duration")
        assert result.execution_id != unknown.execution_id


async def test_describe_lists_only_what_the_caller_may_see(env: Env) -> None:
    stub = env.gateway()
    agent = await stub.Describe(
        gateway_pb2.DescribeRequest(), metadata=env.metadata("agents", "alice")
    )
    ids = {c.id for c in agent.capabilities}
    assert {"orders.get", "orders.refund", "orders.cancel"} <= ids
    assert "admin.orders.purge" not in ids and "orders.unexposed" not in ids
    root = await stub.Describe(
        gateway_pb2.DescribeRequest(), metadata=env.metadata("agents", "root")
    )
    assert "admin.orders.purge" in {c.id for c in root.capabilities}
    refund = next(c for c in agent.capabilities if c.id == "orders.refund")
    schema = orjson.loads(refund.input_schema_json)
    assert schema["required"] == ["order_id", "amount"]
    assert refund.side_effect == "write" and refund.risk == "high"
    get = next(c for c in agent.capabilities if c.id == "orders.get")
    assert orjson.loads(get.input_schema_json)["properties"]["order_id"]["type"] == "string"


async def test_check_reveals_only_what_invoke_would(env: Env) -> None:
    stub = env.gateway()
    md = env.metadata("agents", "alice")
    hidden = await stub.Check(
        gateway_pb2.CheckRequest(capability_id="admin.orders.purge"), metadata=md
    )
    unknown = await stub.Check(
        gateway_pb2.CheckRequest(capability_id="admin.orders.purgex"), metadata=md
    )
    assert hidden.SerializeToString(deterministic=True) == unknown.SerializeToString(
        deterministic=True
    )
    assert hidden.decision == types_pb2.DECISION_DENY and not hidden.stances
    big = await stub.Check(
        gateway_pb2.CheckRequest(
            capability_id="orders.refund",
            input_json=orjson.dumps({"order_id": "o-1", "amount": 800}),
        ),
        metadata=md,
    )
    assert big.decision == types_pb2.DECISION_REQUIRE_APPROVAL and big.approval_reasons
    before = len(env.audit.events)
    ok = await stub.Check(
        gateway_pb2.CheckRequest(capability_id="orders.get", input_json=b'{"order_id":"o-1001"}'),
        metadata=md,
    )
    assert ok.decision == types_pb2.DECISION_ALLOW
    await env.gw.runtime.audit.flush()  # type: ignore[attr-defined]
    assert not [e for e in env.audit.events[before:] if e["event"].startswith("capability.")]


async def test_explain_on_the_admin_listener_shows_every_stance(env: Env) -> None:
    response = await env.policy_admin().Explain(
        admin_pb2.ExplainRequest(
            capability_id="admin.orders.purge",
            surface="agent",
            actor=types_pb2.Actor(id="alice", issuer="test-idp", kind="user", roles=["agent"]),
        ),
        metadata=env.metadata("admin", "bob"),
    )
    assert response.decision == types_pb2.DECISION_HIDE
    assert any(s.effect == types_pb2.DECISION_HIDE for s in response.stances)


async def test_approval_admin_is_unimplemented_on_a_caller_listener(env: Env) -> None:
    stub = admin_pb2_grpc.ApprovalAdminStub(env.channel("agents"))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.ListApprovals(
            admin_pb2.ListApprovalsRequest(), metadata=env.metadata("agents", "bob")
        )
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


def _bad_tokens() -> dict[str, str]:
    now = int(time.time())
    base = {**ACTORS["alice"], "iss": "test-idp", "aud": "capgate", "iat": now, "exp": now + 300}
    none_token = (
        jwt.utils.base64url_encode(orjson.dumps({"alg": "none", "kid": "hs1"})).decode()
        + "."
        + jwt.utils.base64url_encode(orjson.dumps(base)).decode()
        + "."
    )
    return {
        "alg none": none_token,
        "wrong audience": token("alice", audience="other"),
        "path in kid": jwt.encode(
            base, JWT_SECRET, algorithm="HS256", headers={"kid": "../../etc/passwd"}
        ),
        "wrong key": jwt.encode(
            base,
            "another-secret-0123456789-0123456789-x",
            algorithm="HS256",
            headers={"kid": "hs1"},
        ),
        "expired": token("alice", exp=now - 600, iat=now - 900),
        "wrong issuer": token("alice", iss="evil-idp"),
        "malformed": "not.a.jwt",
    }


@pytest.mark.parametrize("name", list(_bad_tokens()))
async def test_bad_credentials_are_refused_at_the_transport_and_nothing_runs(
    env: Env, name: str
) -> None:
    await env.reset_upstream()
    bad = _bad_tokens()[name]
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await env.gateway().Invoke(
            gateway_pb2.InvokeRequest(
                capability_id="orders.get", input_json=b'{"order_id":"o-1001"}'
            ),
            metadata=[("authorization", f"Bearer {bad}")],
        )
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert await env.upstream_calls() == 0
    ok = await env.invoke("orders.get", {"order_id": "o-1001"})  # the server keeps serving
    assert ok.WhichOneof("outcome") == "completed"


async def test_actor_fields_in_the_body_or_capgate_metadata_are_never_trusted(env: Env) -> None:
    await env.reset_upstream()
    md = [
        *env.metadata("agents", "alice"),
        ("x-capgate-actor-id", "root"),
        ("x-capgate-actor-roles", "admin"),
    ]
    result = await env.gateway().Invoke(
        gateway_pb2.InvokeRequest(capability_id="admin.orders.purge", input_json=b"{}"), metadata=md
    )
    assert types_pb2.ErrorCode.Name(result.failed.code) == "ERROR_CODE_CAPABILITY_NOT_FOUND"
    stats = await env.stats()
    assert not stats.log


async def test_forwarded_metadata_carries_ids_and_the_signed_actor_token(env: Env) -> None:
    await env.reset_upstream()
    result = await env.invoke(
        "orders.get", {"order_id": "o-1001"}, idempotency_key="", correlation_id="corr-1"
    )
    stats = await env.stats()
    record = stats.log[-1]
    assert record.execution_id == result.execution_id
    assert record.capability == "orders.get" and record.surface == "agent"
    assert record.idempotency_key == result.execution_id  # no caller key: the execution id
    assert record.actor_token_present


async def test_health_reports_ready_and_redis_separately(env: Env) -> None:
    stub = health_pb2_grpc.HealthStub(env.channel("agents"))
    for service in ("", "capgate"):
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=service))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_an_oversized_message_is_refused_and_the_server_keeps_serving(env: Env) -> None:
    big = b'{"order_id":"' + b"x" * (300 * 1024) + b'"}'
    result = await env.invoke("orders.get", raw=big)
    assert types_pb2.ErrorCode.Name(result.failed.code) == "ERROR_CODE_INPUT_TOO_LARGE"
    ok = await env.invoke("orders.get", {"order_id": "o-1001"})
    assert ok.WhichOneof("outcome") == "completed"


async def test_explain_covers_the_discovery_and_execution_phases(env: Env) -> None:
    admin = env.policy_admin()
    md = env.metadata("admin", "bob")
    alice = types_pb2.Actor(id="alice", issuer="test-idp", kind="user", roles=["agent"])
    discovery = await admin.Explain(
        admin_pb2.ExplainRequest(
            capability_id="admin.orders.purge", surface="agent", actor=alice, phase="discovery"
        ),
        metadata=md,
    )
    assert discovery.decision == types_pb2.DECISION_HIDE
    assert any(s.effect == types_pb2.DECISION_HIDE for s in discovery.stances)
    execution = await admin.Explain(
        admin_pb2.ExplainRequest(
            capability_id="orders.refund",
            surface="agent",
            actor=alice,
            input_json=b'{"order_id":"o-1","amount":"x"}',
            phase="execution",
        ),
        metadata=md,
    )
    assert types_pb2.ErrorCode.Name(execution.error.code) == "ERROR_CODE_INPUT_INVALID"
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await admin.Explain(
            admin_pb2.ExplainRequest(capability_id="orders.get", phase="later"), metadata=md
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
