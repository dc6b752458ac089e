"""The example upstream: a real grpc.aio server with an in-memory order book.

    python -m examples.orders.server --address 127.0.0.1:0 --print-port
    python -m examples.orders.server --address unix:///tmp/orders.sock \\
        --actor-jwks capgate-jwks.json --actor-issuer capgate --actor-audience orders

It serves `orders.v1.Orders` (an ordinary gRPC service, plus a server-streaming method capgate
must refuse), the JSON-native `capgate.v1.Procedure/Invoke` contract for `orders.get`,
`orders.list`, `orders.refund`, `orders.cancel`, `admin.orders.purge` and `orders.stats`,
`orders.v1.Control` (stats and reset for tests), health and server reflection.
Fault ids are described in book.py. In-process tests use `serve(address, state=State())`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import grpc
import orjson
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from capgate.v1 import procedure_pb2, procedure_pb2_grpc
from examples.orders import book as bk
from examples.orders import orders_pb2 as pb
from examples.orders import orders_pb2_grpc as pb_grpc
from examples.orders.observe import Recorder

T = TypeVar("T")
_ORDERS = "/orders.v1.Orders/"


@dataclass
class State:
    """Everything the server knows; pass one to `serve` to inspect it in-process."""

    book: bk.OrderBook = field(default_factory=bk.OrderBook)
    recorder: Recorder = field(default_factory=Recorder)
    flaky: dict[str, int] = field(default_factory=dict)

    def reset(self) -> None:
        self.book.reset()
        self.recorder.reset()
        self.flaky.clear()


async def _abort(context: grpc.aio.ServicerContext, refusal: bk.Refusal) -> None:
    trailers: tuple[tuple[str, bytes], ...] = ()
    if refusal.reason:  # a declared contract error: the status carries a detail
        detail = any_pb2.Any()
        if refusal.error_info:
            detail.Pack(
                error_details_pb2.ErrorInfo(
                    reason=refusal.reason,
                    domain="orders.example",
                    metadata={"message": refusal.message},
                )
            )
        else:
            detail.Pack(procedure_pb2.ContractError(reason=refusal.reason, message=refusal.message))
        status = status_pb2.Status(
            code=refusal.code.value[0], message=refusal.message, details=[detail]
        )
        trailers = (("grpc-status-details-bin", status.SerializeToString()),)
    await context.abort(refusal.code, refusal.message, trailers)


async def _run(
    state: State,
    method: str,
    context: grpc.aio.ServicerContext,
    fault_key: str,
    produce: Callable[[], T],
    spoil: Callable[[T, str], T],
) -> T:
    """Count, verify, act out faults, answer; map refusals to statuses, record cancellation."""
    record = None
    try:
        record = state.recorder.begin(method, context)
        mode = await bk.apply_fault(fault_key, state.flaky) if bk.is_fault(fault_key) else None
        reply = produce()
        return spoil(reply, mode) if mode else reply
    except asyncio.CancelledError:  # the client cancelled: grpc.aio cancels this task
        if record is not None:
            state.recorder.mark_cancelled(record)
        raise
    except bk.Refusal as refusal:
        await _abort(context, refusal)
        raise AssertionError("unreachable: abort raises") from None


class OrdersService(pb_grpc.OrdersServicer):
    def __init__(self, state: State) -> None:
        self.state = state

    async def GetOrder(self, request: pb.GetOrderRequest, context: Any) -> pb.Order:
        return await _run(
            self.state,
            _ORDERS + "GetOrder",
            context,
            request.order_id,
            lambda: self.state.book.get(request.order_id),
            bk.spoil_order,
        )

    async def ListOrders(
        self, request: pb.ListOrdersRequest, context: Any
    ) -> pb.ListOrdersResponse:
        def produce() -> pb.ListOrdersResponse:
            orders, token, total = self.state.book.list(
                request.customer_id, request.status, request.page_size, request.page_token
            )
            return pb.ListOrdersResponse(orders=orders, next_page_token=token, total=total)

        def spoil(reply: pb.ListOrdersResponse, mode: str) -> pb.ListOrdersResponse:
            order = bk.spoil_order(self.state.book.get(request.customer_id), mode)
            return pb.ListOrdersResponse(orders=[order], total=-1)

        return await _run(
            self.state, _ORDERS + "ListOrders", context, request.customer_id, produce, spoil
        )

    async def RefundOrder(self, request: pb.RefundOrderRequest, context: Any) -> pb.Refund:
        book = self.state.book
        return await _run(
            self.state,
            _ORDERS + "RefundOrder",
            context,
            request.order_id,
            lambda: book.refund(request.order_id, request.amount, request.reason),
            bk.spoil_refund,
        )

    async def CancelOrder(self, request: pb.CancelOrderRequest, context: Any) -> pb.Order:
        return await _run(
            self.state,
            _ORDERS + "CancelOrder",
            context,
            request.order_id,
            lambda: self.state.book.cancel(request.order_id, request.reason),
            bk.spoil_order,
        )

    async def WatchOrders(
        self, request: pb.WatchOrdersRequest, context: Any
    ) -> AsyncIterator[pb.OrderEvent]:
        try:
            self.state.recorder.begin(_ORDERS + "WatchOrders", context)
        except bk.Refusal as refusal:
            await _abort(context, refusal)
        orders, _, _ = self.state.book.list(request.customer_id, 0, 100, "")
        for order in orders:
            yield pb.OrderEvent(order_id=order.order_id, status=order.status)


class ProcedureService(procedure_pb2_grpc.ProcedureServicer):
    """The JSON-native contract: the same order book, JSON text in and out."""

    def __init__(self, state: State) -> None:
        self.state = state
        self.handlers: dict[str, Callable[[dict[str, Any]], Any]] = {
            "orders.get": lambda i: bk.order_json(self.state.book.get(i.get("order_id", ""))),
            "orders.list": self._list,
            "orders.refund": lambda i: bk.refund_json(
                self.state.book.refund(
                    i.get("order_id", ""), float(i.get("amount", 0)), i.get("reason", "")
                )
            ),
            "orders.cancel": lambda i: bk.order_json(
                self.state.book.cancel(i.get("order_id", ""), i.get("reason", ""))
            ),
            "admin.orders.purge": lambda i: {
                "purged": self.state.book.purge(
                    int(i.get("older_than_days", 30)), datetime.now(UTC)
                )
            },
            "orders.stats": lambda _i: self.state.recorder.stats_json(),
        }

    def _list(self, value: dict[str, Any]) -> dict[str, Any]:
        orders, token, total = self.state.book.list(
            value.get("customer_id", ""),
            pb.OrderStatus.Value(value.get("status", "ORDER_STATUS_UNSPECIFIED")),
            int(value.get("page_size", 0)),
            value.get("page_token", ""),
        )
        return {
            "orders": [bk.order_json(o) for o in orders],
            "next_page_token": token,
            "total": total,
        }

    async def Invoke(
        self, request: procedure_pb2.ProcedureInvokeRequest, context: Any
    ) -> procedure_pb2.ProcedureInvokeResponse:
        handler = self.handlers.get(request.capability_id)
        try:
            value = orjson.loads(request.input_json or "{}")
        except orjson.JSONDecodeError:
            value = None
        key = (
            str(value.get("order_id") or value.get("customer_id") or "")
            if isinstance(value, dict)
            else ""
        )

        def produce() -> str:
            # Not contract errors: the gateway sends what its config says, so these are bugs.
            if handler is None:
                raise bk.Refusal(grpc.StatusCode.UNIMPLEMENTED, "unknown capability")
            if not isinstance(value, dict):
                raise bk.Refusal(grpc.StatusCode.INVALID_ARGUMENT, "input is not a JSON object")
            return orjson.dumps(handler(value)).decode()

        def spoil(_reply: str, mode: str) -> str:
            if mode == "huge-output":
                return json.dumps({"order_id": key, "note": "x" * bk.HUGE_BYTES})
            return '{"order_id": 42, "status": "NOT-A-STATUS"}'

        output = await _run(
            self.state, f"procedure:{request.capability_id}", context, key, produce, spoil
        )
        return procedure_pb2.ProcedureInvokeResponse(output_json=output)


class ControlService(pb_grpc.ControlServicer):
    """Test control: not counted, never behind the gateway."""

    def __init__(self, state: State) -> None:
        self.state = state

    async def GetStats(self, request: pb.GetStatsRequest, context: Any) -> pb.Stats:
        return self.state.recorder.stats()

    async def Reset(self, request: pb.ResetRequest, context: Any) -> pb.ResetResponse:
        self.state.reset()
        return pb.ResetResponse()


def actor_verifier(jwks: Mapping[str, Any], *, issuer: str, audience: str) -> Any:
    """The gateway's own verifier (what an upstream's middleware runs), imported lazily."""
    from capgate_client.actor_token import ActorTokenVerifier  # noqa: PLC0415 - optional dependency

    return ActorTokenVerifier(jwks, issuer=issuer, audience=audience, leeway_s=5)


async def serve(
    address: str = "127.0.0.1:0",
    *,
    state: State | None = None,
    actor_jwks: Mapping[str, Any] | None = None,
    actor_issuer: str = "capgate",
    actor_audience: str = "orders",
    credentials: grpc.ServerCredentials | None = None,
) -> tuple[grpc.aio.Server, int]:
    """Start the server on `address` (TLS with `credentials`); return it and the bound port
    (0 for unix sockets)."""
    state = state or State()
    if actor_jwks is not None:
        state.recorder.verifier = actor_verifier(
            actor_jwks, issuer=actor_issuer, audience=actor_audience
        )
    server = grpc.aio.server()
    pb_grpc.add_OrdersServicer_to_server(OrdersService(state), server)
    pb_grpc.add_ControlServicer_to_server(ControlService(state), server)
    procedure_pb2_grpc.add_ProcedureServicer_to_server(ProcedureService(state), server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = [
        pb.DESCRIPTOR.services_by_name["Orders"].full_name,
        pb.DESCRIPTOR.services_by_name["Control"].full_name,
        procedure_pb2.DESCRIPTOR.services_by_name["Procedure"].full_name,
        health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
        reflection.SERVICE_NAME,
    ]
    reflection.enable_server_reflection(names, server)
    if credentials is None:
        port = server.add_insecure_port(address)
    else:
        port = server.add_secure_port(address, credentials)
    await server.start()
    await health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    return server, port


async def _main(args: argparse.Namespace, jwks: Mapping[str, Any] | None) -> None:
    server, port = await serve(
        args.address,
        actor_jwks=jwks,
        actor_issuer=args.actor_issuer,
        actor_audience=args.actor_audience,
    )
    if args.print_port:
        print(port, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(1.0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The example orders upstream for capgate.")
    parser.add_argument(
        "--address", default="127.0.0.1:50051", help="host:port (port 0 picks one) or unix:///path"
    )
    parser.add_argument("--print-port", action="store_true", help="print the bound port")
    parser.add_argument("--actor-jwks", help="verify forwarded actor tokens with this JWKS file")
    parser.add_argument("--actor-issuer", default="capgate", help="expected token issuer")
    parser.add_argument("--actor-audience", default="orders", help="this upstream's name")
    args = parser.parse_args(argv)
    jwks = json.loads(Path(args.actor_jwks).read_text("utf-8")) if args.actor_jwks else None
    asyncio.run(_main(args, jwks))


if __name__ == "__main__":
    main()
