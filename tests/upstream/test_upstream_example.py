"""The example upstream itself: what the demo and every suite rely on — its order book, the
Control service, the Procedure contract, actor token verification and its command line."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import fastjsonschema
import grpc
import pytest
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from upstreamkit import Orders

from examples.orders import orders_pb2 as pb
from examples.orders import orders_pb2_grpc as pb_grpc
from examples.orders.schemas import INPUTS, OUTPUTS
from examples.orders.server import State, serve
from gateway.errors import CapabilityError, Code
from gateway.model import Actor
from gateway.upstream.actor_token import ActorTokenSettings, ActorTokenSigner
from gateway.upstream.call import grpc_call, procedure_call
from gateway.upstream.channels import ChannelPool
from gateway.upstream.descriptors import resolve_method
from gateway.upstream.spec import Upstream

pytestmark = pytest.mark.integration
ROOT = Path(__file__).parents[2]


async def test_control_reports_calls_and_reset_restores_the_seed(orders: Orders) -> None:
    orders_stub = pb_grpc.OrdersStub(orders.channel())
    control = pb_grpc.ControlStub(orders.channel())
    await orders_stub.CancelOrder(
        pb.CancelOrderRequest(order_id="o-1001"),
        metadata=[("x-capgate-capability", "orders.cancel")],
    )
    stats = await control.GetStats(pb.GetStatsRequest())
    assert dict(stats.calls) == {"/orders.v1.Orders/CancelOrder": 1}
    assert stats.log[0].capability == "orders.cancel"
    assert orders.state.book.orders["o-1001"].status == pb.ORDER_STATUS_CANCELLED
    await control.Reset(pb.ResetRequest())
    assert not (await control.GetStats(pb.GetStatsRequest())).calls  # Control is not counted
    assert orders.state.book.orders["o-1001"].status == pb.ORDER_STATUS_OPEN


async def test_order_book_rules(orders: Orders) -> None:
    stub = pb_grpc.OrdersStub(orders.channel())
    page = await stub.ListOrders(pb.ListOrdersRequest(customer_id="c-1", page_size=1))
    assert [o.order_id for o in page.orders] == ["o-1001"]
    assert page.total == 2
    rest = await stub.ListOrders(
        pb.ListOrdersRequest(customer_id="c-1", page_token=page.next_page_token)
    )
    assert [o.order_id for o in rest.orders] == ["o-1002"]
    assert not rest.next_page_token
    open_orders = await stub.ListOrders(pb.ListOrdersRequest(status=pb.ORDER_STATUS_OPEN))
    assert {o.order_id for o in open_orders.orders} == {"o-1001", "o-1003"}
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.CancelOrder(pb.CancelOrderRequest(order_id="o-1002"))
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    full = await stub.RefundOrder(pb.RefundOrderRequest(order_id="o-1001", amount=2500.0))
    assert full.refund_id == "r-0001"
    assert orders.state.book.orders["o-1001"].status == pb.ORDER_STATUS_REFUNDED
    events = [e async for e in stub.WatchOrders(pb.WatchOrdersRequest(customer_id="c-2"))]
    assert [e.order_id for e in events] == ["o-1003", "o-1004"]


async def test_purge_removes_old_closed_orders_through_the_procedure_contract(
    orders: Orders,
) -> None:
    up = orders.upstream("procedure")
    purge = procedure_call(orders.pool.channel(up), "admin.orders.purge", upstream=up)
    assert await purge({"older_than_days": 90}, timeout=5) == {"purged": 1}
    assert "o-1004" not in orders.state.book.orders
    assert await purge({"older_than_days": 90}, timeout=5) == {"purged": 0}


async def test_declared_schemas_accept_real_outputs_and_refuse_bad_output(
    orders: Orders, orders_pool: DescriptorPool
) -> None:
    up, proc = orders.upstream(), orders.upstream("procedure")
    cases: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
        (
            "orders.get",
            "/orders.v1.Orders/GetOrder",
            {"order_id": "o-1003"},
            {"order_id": "bad-output"},
        ),
        (
            "orders.list",
            "/orders.v1.Orders/ListOrders",
            {"customer_id": "c-2"},
            {"customer_id": "bad-output"},
        ),
        (
            "orders.cancel",
            "/orders.v1.Orders/CancelOrder",
            {"order_id": "o-1001"},
            {"order_id": "bad-output"},
        ),
        (
            "orders.refund",
            "/orders.v1.Orders/RefundOrder",
            {"order_id": "o-1003", "amount": 1},
            {"order_id": "bad-output", "amount": 1},
        ),
    ]
    for cap, method, good, bad in cases:
        validate_in = fastjsonschema.compile(INPUTS[cap])
        validate_out = fastjsonschema.compile(OUTPUTS[cap])
        typed = grpc_call(orders.pool.channel(up), resolve_method(orders_pool, method), upstream=up)
        native = procedure_call(orders.pool.channel(proc), cap, upstream=proc)
        validate_in(good)
        validate_out(await typed(good, timeout=5))
        orders.state.reset()
        validate_out(await native(good, timeout=5))
        for call in (typed, native):
            if call is typed and cap == "orders.refund":  # a NaN amount has no JSON form at all
                with pytest.raises(CapabilityError, match="OUTPUT_INVALID"):
                    await call(bad, timeout=5)
                continue
            output = await call(bad, timeout=5)
            with pytest.raises(fastjsonschema.JsonSchemaValueException):
                validate_out(output)


@pytest.fixture
async def verifying_orders() -> AsyncIterator[tuple[State, int, Any]]:
    signer = ActorTokenSigner(ActorTokenSettings(issuer="capgate"))
    state = State()
    server, port = await serve(
        "127.0.0.1:0",
        state=state,
        actor_jwks=signer.jwks(),
        actor_issuer="capgate",
        actor_audience="orders",
    )
    yield state, port, signer
    await server.stop(None)


async def test_actor_tokens_are_verified_when_a_jwks_is_given(
    verifying_orders: tuple[State, int, Any], orders_pool: DescriptorPool
) -> None:
    state, port, signer = verifying_orders
    up = Upstream(name="orders", address=f"127.0.0.1:{port}")
    pool = ChannelPool()
    call = grpc_call(
        pool.channel(up), resolve_method(orders_pool, "/orders.v1.Orders/GetOrder"), upstream=up
    )
    actor = Actor(id="alice", kind="user", issuer="idp")

    def metadata(token_for: str, execution_id: str = "exec-1") -> list[tuple[str, str]]:
        token = signer.sign(actor, upstream=token_for, surface="agent")
        return [
            ("x-capgate-execution-id", execution_id),
            ("x-capgate-capability", "orders.get"),
            ("x-capgate-actor-token", token),
        ]

    try:
        await call({"order_id": "o-1001"}, timeout=5, metadata=metadata("orders"))
        record = state.recorder.log[-1]
        assert record.actor_verified
        assert (record.actor_id, record.actor_kind) == ("alice", "user")
        # The token is reused across executions (DESIGN §12, amended 2026-12-01): within its
        # lifetime it proves the actor, and the execution id comes from the metadata.
        await call({"order_id": "o-1001"}, timeout=5, metadata=metadata("orders", "exec-2"))
        assert state.recorder.log[-1].actor_verified
        refused = [
            [],  # no token
            metadata("billing"),  # a token for another upstream
            metadata("orders")[2:],  # a token without the execution id and capability beside it
        ]
        for md in refused:
            with pytest.raises(CapabilityError) as caught:
                await call({"order_id": "o-1001"}, timeout=5, metadata=md)
            assert caught.value.code is Code.UNAUTHENTICATED
        assert state.recorder.calls["/orders.v1.Orders/GetOrder"] == 5
    finally:
        await pool.close()


async def test_the_command_line_serves_and_stops_on_sigterm() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "examples.orders.server",
        "--address",
        "127.0.0.1:0",
        "--print-port",
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        port = int(await asyncio.wait_for(proc.stdout.readline(), 30))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            health = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=5
            )
            assert health.status == health_pb2.HealthCheckResponse.SERVING
            order = await pb_grpc.OrdersStub(channel).GetOrder(
                pb.GetOrderRequest(order_id="o-1003"), timeout=5
            )
            assert order.total_cents == 2**53 + 1
            stats = await pb_grpc.ControlStub(channel).GetStats(pb.GetStatsRequest(), timeout=5)
            assert stats.calls["/orders.v1.Orders/GetOrder"] == 1
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def test_the_committed_generated_code_and_descriptor_set_are_fresh() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "examples.orders.gen", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
