"""Caller-chosen request fields forwarded upstream as gRPC metadata (issue 14, item 1) through the
real server, real Redis and the real upstream: `correlation_id` and `idempotency_key` that gRPC
metadata cannot carry are refused at stage 5 — before any idempotency claim, approval
consumption or upstream call — as INPUT_INVALID naming the field and never echoing the value,
with `execution_state` NOT_STARTED. The hostile values are a bounded, seeded generated family."""

from __future__ import annotations

import random
from collections.abc import Iterator

import grpc
import pytest

from capgate.v1 import gateway_pb2, types_pb2
from gateway.errors import CapabilityError, Code
from gateway.upstream.headers import MAX_FORWARDED_LENGTH
from gateway.upstream.state import ExecutionState, state_of
from tests.gateway.harness import Env
from tests.gateway.test_approval_flow import decide, request_approval

pytestmark = pytest.mark.integration

GET = "/orders.v1.Orders/GetOrder"
REFUND = "/orders.v1.Orders/RefundOrder"
_PRINTABLE = "".join(chr(c) for c in range(0x21, 0x7F))

# Each family: characters (or a length) gRPC metadata cannot carry, or that an upstream refuses.
FAMILIES: dict[str, tuple[str, ...]] = {
    "non-ascii": ("é", "ü", "ß", "€", "中", "😀", "\u00a0", "\u0100"),
    "nul": ("\x00",),
    "cr-lf": ("\r", "\n", "\r\n"),
    "controls": ("\t", "\x01", "\x1b", "\x7f", "\x85"),
    "bidi": ("\u202e", "\u202d", "\u2066", "\u2067", "\u2069", "\u200f", "\u061c"),
}
OVER_LENGTH = (MAX_FORWARDED_LENGTH + 1, 1_000, 8_200, 20_000)


def _ascii(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_PRINTABLE) for _ in range(n))


def hostile_values(seed: int, per_family: int) -> Iterator[tuple[str, str]]:
    """(family, value): a bad character at a random place between printable ASCII, the value
    always unique (so an echo would be found), and over-length printable ASCII."""
    rng = random.Random(seed)
    for family, chars in FAMILIES.items():
        for _ in range(per_family):
            bad = rng.choice(chars)
            head, tail = _ascii(rng, rng.randint(0, 12)), _ascii(rng, rng.randint(0, 12))
            yield family, f"u{head}{bad}{tail}"
    for n in OVER_LENGTH:
        yield "over-length", _ascii(rng, n)
    yield "surrounding-space", f" lead-{_ascii(rng, 6)}"
    yield "surrounding-space", f"trail-{_ascii(rng, 6)} "


def good_values(seed: int, count: int) -> Iterator[str]:
    rng = random.Random(seed)
    yield "x" * MAX_FORWARDED_LENGTH
    yield "a b"  # inner spaces are printable ASCII
    for _ in range(count):
        yield (
            _ascii(rng, 1)
            + "".join(rng.choice(_PRINTABLE + " ") for _ in range(rng.randint(0, 60)))
            + _ascii(rng, 1)
        )


def code(result: gateway_pb2.ExecutionResult) -> str:
    err = result.failed if result.WhichOneof("outcome") == "failed" else result.cancelled
    return types_pb2.ErrorCode.Name(err.code).removeprefix("ERROR_CODE_")


def assert_refused(result: gateway_pb2.ExecutionResult, field: str, value: str) -> None:
    assert result.WhichOneof("outcome") == "failed", result
    assert code(result) == "INPUT_INVALID"
    assert result.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
    assert [issue.path for issue in result.failed.issues] == [field]
    assert field in result.failed.message
    # Never echoed, not even in part: the envelope holds no run of the value's characters.
    wire = result.SerializeToString()
    assert value.encode("utf-8", "surrogatepass") not in wire
    assert value[:24].encode("utf-8", "surrogatepass") not in wire


async def test_hostile_correlation_ids_and_keys_are_refused_before_any_upstream_call(
    env: Env,
) -> None:
    await env.reset_upstream()
    refused = 0
    for family, value in hostile_values(seed=14, per_family=6):
        for field in ("correlation_id", "idempotency_key"):
            result = await env.invoke("orders.get", {"order_id": "o-1001"}, **{field: value})
            assert_refused(result, field, value)
            refused += 1
        # Both at once: one issue per field, in field order.
        both = await env.invoke(
            "orders.get", {"order_id": "o-1001"}, correlation_id=value, idempotency_key=value
        )
        assert [i.path for i in both.failed.issues] == ["correlation_id", "idempotency_key"]
        assert family  # every family is exercised (see FAMILIES)
    assert refused >= 2 * (6 * len(FAMILIES) + len(OVER_LENGTH))
    assert await env.upstream_calls() == 0
    # The server kept serving.
    ok = await env.invoke("orders.get", {"order_id": "o-1001"}, correlation_id="corr-ok")
    assert ok.WhichOneof("outcome") == "completed", ok


async def test_allowed_values_reach_the_upstream_unchanged(env: Env) -> None:
    for i, value in enumerate(good_values(seed=41, count=20)):
        await env.reset_upstream()
        key = f"{value[:200]}#{i}"
        result = await env.invoke(
            "orders.get", {"order_id": "o-1001"}, correlation_id=value, idempotency_key=key
        )
        assert result.WhichOneof("outcome") == "completed", (value, result)
        assert result.execution_state == types_pb2.EXECUTION_STATE_COMPLETED
        (record,) = (await env.stats()).log
        assert record.correlation_id == value
        assert record.idempotency_key == key


async def test_a_refused_field_leaves_no_idempotent_failure_to_replay(env: Env) -> None:
    await env.reset_upstream()
    body = {"order_id": "o-1001", "amount": 2}
    for n, (_family, value) in enumerate(hostile_values(seed=7, per_family=1)):
        key = f"idem-fields-{n}"
        refused = await env.invoke("orders.refund", body, idempotency_key=key, correlation_id=value)
        assert_refused(refused, "correlation_id", value)
        # The same key with good fields runs once, then replays its own success.
        first = await env.invoke("orders.refund", body, idempotency_key=key, correlation_id="c-1")
        again = await env.invoke("orders.refund", body, idempotency_key=key, correlation_id="c-1")
        assert first.WhichOneof("outcome") == "completed", first
        assert again == first
        assert await env.upstream_calls(REFUND) == n + 1


async def test_resume_with_a_hostile_correlation_id_keeps_the_approval(env: Env) -> None:
    await env.reset_upstream()
    approval = await request_approval(env)
    await decide(env, approval)
    stub, md = env.gateway("agents"), env.metadata("agents", "alice")
    for _family, value in hostile_values(seed=3, per_family=1):
        result = await stub.Resume(
            gateway_pb2.ResumeRequest(approval_id=approval.id, correlation_id=value), metadata=md
        )
        assert_refused(result, "correlation_id", value)
        status = await stub.GetApproval(
            gateway_pb2.GetApprovalRequest(approval_id=approval.id), metadata=md
        )
        assert status.approval.status == types_pb2.APPROVAL_STATUS_APPROVED  # not consumed
    assert await env.upstream_calls(REFUND) == 0
    resumed = await stub.Resume(
        gateway_pb2.ResumeRequest(approval_id=approval.id, correlation_id="corr-good"), metadata=md
    )
    assert resumed.WhichOneof("outcome") == "completed", resumed
    repeat = await stub.Resume(
        gateway_pb2.ResumeRequest(approval_id=approval.id, correlation_id="corr-good"), metadata=md
    )
    assert repeat == resumed  # the stored envelope, not a second execution
    assert await env.upstream_calls(REFUND) == 1
    assert (await env.stats()).log[-1].correlation_id == "corr-good"


async def test_a_caller_traceparent_goes_upstream_only_in_w3c_shape(env: Env) -> None:
    good = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    for header, forwarded in ((good, good), ("x" * 4000, ""), ("00-zz", "")):
        await env.reset_upstream()
        result = await env.gateway("agents").Invoke(
            gateway_pb2.InvokeRequest(capability_id="orders.get", input_json=b'{"order_id":"o-1"}'),
            metadata=[*env.metadata("agents", "alice"), ("traceparent", header)],
        )
        assert result.execution_state == types_pb2.EXECUTION_STATE_COMPLETED, result
        (record,) = (await env.stats()).log
        # With tracing off the caller's header travels as is; with it on, a span of the same
        # trace replaces it. Either way a header not in W3C shape never reaches the upstream.
        assert len(record.traceparent) <= 55 and "x" not in record.traceparent
        if forwarded:
            assert record.traceparent.split("-")[1] == forwarded.split("-")[1]


@pytest.mark.parametrize("value", ["caf\u00e9", "a\x00b", "a\r\nb", "a\u202eb", "a\tb"], ids=repr)
async def test_a_local_grpcio_send_failure_is_not_started(env: Env, value: str) -> None:
    """The transport guard (stage 11's stub link): metadata grpcio refuses before sending maps
    to a NOT_STARTED failure instead of escaping as ExecuteBatchError."""
    await env.reset_upstream()
    upstream_call = env.gw.holder.current.capabilities["orders.get"].upstream_call
    assert upstream_call is not None
    with pytest.raises(CapabilityError) as caught:
        await upstream_call(
            {"order_id": "o-1001"}, timeout=5, metadata=[("x-capgate-correlation-id", value)]
        )
    assert caught.value.code is Code.EXECUTION_FAILED
    assert state_of(caught.value) is ExecutionState.NOT_STARTED
    assert await env.upstream_calls() == 0


async def test_headers_the_upstream_refuses_are_not_started(env: Env) -> None:
    """An upstream that refuses the request headers (over its limit) never ran its handler."""
    await env.reset_upstream()
    upstream_call = env.gw.holder.current.capabilities["orders.get"].upstream_call
    with pytest.raises(CapabilityError) as caught:
        await upstream_call({"order_id": "o-1001"}, timeout=5, metadata=[("x-big", "y" * 20_000)])
    assert caught.value.details.get("upstream_status") == grpc.StatusCode.RESOURCE_EXHAUSTED.name
    assert state_of(caught.value) is ExecutionState.NOT_STARTED
    assert await env.upstream_calls() == 0
