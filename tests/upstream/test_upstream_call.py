"""Stage 11 against the real example upstream: each status mapping driven by fault ids,
both contracts, size limits, forwarded metadata and cancellation."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor_pool import DescriptorPool
from upstreamkit import Orders

from capgate.v1 import procedure_pb2
from gateway.errors import CapabilityError, Code
from gateway.upstream.call import ProcedureCall, UpstreamCall, grpc_call, procedure_call
from gateway.upstream.channels import ChannelPool
from gateway.upstream.descriptors import resolve_method
from gateway.upstream.spec import Upstream
from gateway.upstream.state import ExecutionState, state_of

pytestmark = pytest.mark.integration
GET = "/orders.v1.Orders/GetOrder"
REFUND = "/orders.v1.Orders/RefundOrder"


def method_call(orders: Orders, pool: DescriptorPool, path: str, **upstream: Any) -> UpstreamCall:
    up = orders.upstream(**upstream)
    return grpc_call(orders.pool.channel(up), resolve_method(pool, path), upstream=up)


def proc_call(orders: Orders, capability_id: str, **upstream: Any) -> ProcedureCall:
    up = orders.upstream("procedure", **upstream)
    return procedure_call(orders.pool.channel(up), capability_id, upstream=up)


async def failure(
    call: UpstreamCall, value: dict[str, Any], timeout_s: float = 5
) -> CapabilityError:
    with pytest.raises(CapabilityError) as caught:
        await call(value, timeout=timeout_s)
    return caught.value


async def test_a_grpc_method_answers_with_exact_json(
    orders: Orders, orders_pool: DescriptorPool
) -> None:
    order = await method_call(orders, orders_pool, GET)({"order_id": "o-1003"}, timeout=5)
    assert order["total_cents"] == 2**53 + 1
    assert order["status"] == "ORDER_STATUS_OPEN"
    assert order["created_at"] == "2024-06-10T08:00:00Z"
    assert orders.state.recorder.calls[GET] == 1


async def test_both_contracts_give_the_same_output(
    orders: Orders, orders_pool: DescriptorPool
) -> None:
    typed = await method_call(orders, orders_pool, GET)({"order_id": "o-1001"}, timeout=5)
    native = await proc_call(orders, "orders.get")({"order_id": "o-1001"}, timeout=5)
    assert typed == native
    refund = await proc_call(orders, "orders.refund")(
        {"order_id": "o-1001", "amount": 12.5, "reason": "damaged"}, timeout=5
    )
    assert refund["amount"] == 12.5
    assert refund["status"] == "REFUND_STATUS_SUCCEEDED"
    assert orders.state.book.orders["o-1001"].refunded_cents == 1250


@pytest.mark.parametrize(
    ("order_id", "code", "state", "exposed"),
    [
        ("fail-UNAUTHENTICATED", Code.UNAUTHENTICATED, ExecutionState.COMPLETED, True),
        ("fail-PERMISSION_DENIED", Code.FORBIDDEN, ExecutionState.COMPLETED, True),
        ("fail-DEADLINE_EXCEEDED", Code.TIMEOUT, ExecutionState.UNKNOWN, True),
        ("fail-CANCELLED", Code.CANCELLED, ExecutionState.UNKNOWN, True),
        ("fail-UNAVAILABLE", Code.UPSTREAM_UNAVAILABLE, ExecutionState.UNKNOWN, True),
        ("fail-INTERNAL", Code.EXECUTION_FAILED, ExecutionState.UNKNOWN, False),
        ("fail-NOT_FOUND", Code.EXECUTION_FAILED, ExecutionState.COMPLETED, False),
        ("fail-RESOURCE_EXHAUSTED", Code.EXECUTION_FAILED, ExecutionState.COMPLETED, False),
    ],
)
async def test_upstream_statuses_map_through_the_table(
    orders: Orders,
    orders_pool: DescriptorPool,
    order_id: str,
    code: Code,
    state: ExecutionState,
    exposed: bool,
) -> None:
    for call in (method_call(orders, orders_pool, GET), proc_call(orders, "orders.get")):
        error = await failure(call, {"order_id": order_id})
        assert (error.code, state_of(error), error.exposed) == (code, state, exposed)
        if not exposed:  # SI-9
            assert error.public_message == "The operation failed."
            assert "injected failure" in (error.reason or "")


@pytest.mark.parametrize("order_id", ["contract-error", "contract-errorinfo"])
async def test_a_contract_error_reaches_the_caller_with_its_message(
    orders: Orders, orders_pool: DescriptorPool, order_id: str
) -> None:
    for call in (method_call(orders, orders_pool, GET), proc_call(orders, "orders.cancel")):
        error = await failure(call, {"order_id": order_id})
        assert error.code is Code.EXECUTION_FAILED
        assert error.exposed
        assert error.public_message == "The order is locked for changes."
        assert error.details["contract_reason"] == "ORDER_LOCKED"


async def test_business_rules_answer_as_contract_errors(
    orders: Orders, orders_pool: DescriptorPool
) -> None:
    refund = method_call(orders, orders_pool, REFUND)
    error = await failure(refund, {"order_id": "o-1001", "amount": 1_000_000})
    assert error.public_message == "The refund exceeds what is left to refund on this order."
    missing = await failure(method_call(orders, orders_pool, GET), {"order_id": "o-404"})
    assert (missing.public_message, missing.exposed) == ("Order not found.", True)


async def test_the_upstream_down_is_upstream_unavailable_and_not_started() -> None:
    with socket.socket() as probe:  # a port with nobody listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    pool = ChannelPool()
    up = Upstream(name="down", address=f"127.0.0.1:{port}", kind="procedure")
    try:
        error = await failure(
            procedure_call(pool.channel(up), "orders.get", upstream=up), {"order_id": "o-1001"}
        )
    finally:
        await pool.close()
    assert error.code is Code.UPSTREAM_UNAVAILABLE
    assert error.is_retryable
    assert state_of(error) is ExecutionState.NOT_STARTED
    assert not error.executed


async def test_a_slow_upstream_is_a_timeout_with_an_unknown_effect(
    orders: Orders, orders_pool: DescriptorPool
) -> None:
    error = await failure(
        method_call(orders, orders_pool, GET), {"order_id": "slow-2000"}, timeout_s=0.05
    )
    assert error.code is Code.TIMEOUT
    assert state_of(error) is ExecutionState.UNKNOWN
    assert error.spec.kind.value == "cancelled"


async def test_an_oversized_reply_is_output_invalid_not_a_crash(
    orders: Orders, orders_pool: DescriptorPool
) -> None:
    for call in (method_call(orders, orders_pool, GET), proc_call(orders, "orders.get")):
        error = await failure(call, {"order_id": "huge-output"})
        assert error.code is Code.OUTPUT_INVALID
        assert error.executed
        assert state_of(error) is ExecutionState.COMPLETED
    # The limit is the upstream's max_response_bytes: a small one refuses an ordinary order.
    small = method_call(orders, orders_pool, GET, max_response_bytes=64)
    assert (await failure(small, {"order_id": "o-1001"})).code is Code.OUTPUT_INVALID
    # ...and the channel keeps working afterwards.
    assert await method_call(orders, orders_pool, GET)({"order_id": "o-1001"}, timeout=5)


async def test_a_reply_without_a_json_form_is_output_invalid(
    orders: Orders, orders_pool: DescriptorPool
) -> None:
    error = await failure(
        method_call(orders, orders_pool, REFUND), {"order_id": "bad-output", "amount": 5}
    )
    assert error.code is Code.OUTPUT_INVALID
    assert error.executed
    assert not error.exposed
    assert "$.amount" in (error.reason or "")


async def test_a_request_that_does_not_fit_the_message_is_input_invalid_and_not_sent(
    orders: Orders, orders_pool: DescriptorPool
) -> None:
    error = await failure(
        method_call(orders, orders_pool, REFUND), {"order_id": "o-1001", "amount": "12"}
    )
    assert error.code is Code.INPUT_INVALID
    assert [i.path for i in error.issues] == ["$.amount"]
    assert state_of(error) is ExecutionState.NOT_STARTED
    assert orders.state.recorder.calls[REFUND] == 0


async def test_forwarded_metadata_reaches_the_upstream(
    orders: Orders, orders_pool: DescriptorPool
) -> None:
    metadata = [
        ("x-capgate-execution-id", "exec-1"),
        ("x-capgate-capability", "orders.get"),
        ("x-capgate-surface", "agent"),
        ("x-capgate-idempotency-key", "idem-1"),
        ("x-capgate-approval-id", "apr-1"),
        ("x-capgate-correlation-id", "corr-1"),
        ("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
    ]
    await method_call(orders, orders_pool, GET)(
        {"order_id": "o-1001"}, timeout=5, metadata=metadata
    )
    record = orders.state.recorder.log[-1]
    assert (record.execution_id, record.capability, record.surface) == (
        "exec-1",
        "orders.get",
        "agent",
    )
    assert (record.idempotency_key, record.approval_id) == ("idem-1", "apr-1")
    assert record.correlation_id == "corr-1"
    assert record.traceparent.startswith("00-0af7651916cd43dd")
    assert not record.actor_token_present


async def test_cancelling_the_caller_cancels_the_upstream_call(
    orders: Orders, orders_pool: DescriptorPool
) -> None:
    recorder = orders.state.recorder
    task = asyncio.create_task(
        method_call(orders, orders_pool, GET)({"order_id": "slow-10000"}, timeout=30)
    )
    await asyncio.wait_for(recorder.wait_until(lambda: recorder.calls[GET] == 1), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(recorder.wait_until(lambda: recorder.cancelled[GET] == 1), 5)
    assert recorder.log[-1].cancelled


async def test_a_closed_channel_is_upstream_unavailable_before_sending(
    orders: Orders, orders_pool: DescriptorPool
) -> None:
    pool = ChannelPool()
    up = orders.upstream()
    call = grpc_call(pool.channel(up), resolve_method(orders_pool, GET), upstream=up)
    await pool.close()
    error = await failure(call, {"order_id": "o-1001"})
    assert error.code is Code.UPSTREAM_UNAVAILABLE
    assert state_of(error) is ExecutionState.NOT_STARTED
    assert orders.state.recorder.calls[GET] == 0


async def test_procedure_capabilities_dispatch_by_id(orders: Orders) -> None:
    stats = await proc_call(orders, "orders.stats")({}, timeout=5)
    assert stats["calls"] == {"procedure:orders.stats": 1}
    error = await failure(proc_call(orders, "orders.nope"), {})  # refused by the upstream
    assert error.code is Code.EXECUTION_FAILED
    assert not error.exposed


@pytest.mark.parametrize(
    "reply",
    [
        procedure_pb2.ProcedureInvokeResponse(output_json="{not json").SerializeToString(),
        b"\xff\xff\xff",
    ],
)
async def test_a_procedure_reply_that_is_not_json_is_output_invalid(reply: bytes) -> None:
    async def invoke(_request: bytes, _context: object) -> bytes:
        return reply

    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(invoke)
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("capgate.v1.Procedure", {"Invoke": handler})]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    pool = ChannelPool()
    up = Upstream(name="rogue", address=f"127.0.0.1:{port}", kind="procedure")
    try:
        error = await failure(procedure_call(pool.channel(up), "x.y", upstream=up), {})
    finally:
        await pool.close()
        await server.stop(None)
    assert error.code is Code.OUTPUT_INVALID
    assert error.executed
    assert not error.exposed
