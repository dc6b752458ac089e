"""The example upstream's in-memory order book, its JSON forms and the fault ids tests use.

Fault ids (used as `order_id`, or `customer_id` for listing):
  slow-<ms>             answer after <ms> milliseconds
  fail-<STATUS>         abort with that gRPC status (fail-UNAVAILABLE, fail-INTERNAL, ...)
  flaky-<n>-<tag>       UNAVAILABLE for the first <n> calls with this id, then answer
  contract-error        FAILED_PRECONDITION with a capgate.v1.ContractError detail
  contract-errorinfo    FAILED_PRECONDITION with a google.rpc.ErrorInfo detail
  bad-output            answer with an output that violates the declared output schema
  huge-output           answer with a reply larger than 4 MiB
Any other unknown order id is a NOT_FOUND contract error.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from examples.orders import orders_pb2 as pb

HUGE_BYTES = 4 * 1024 * 1024 + 64 * 1024
SPOILERS = ("bad-output", "huge-output")
_FAULT_PREFIXES = ("slow-", "flaky-", *SPOILERS)
_OPEN, _SHIPPED = pb.ORDER_STATUS_OPEN, pb.ORDER_STATUS_SHIPPED
_CANCELLED, _REFUNDED = pb.ORDER_STATUS_CANCELLED, pb.ORDER_STATUS_REFUNDED


class Refusal(Exception):
    """An answer with a non-OK status; `reason` set = a declared contract error."""

    def __init__(
        self, code: grpc.StatusCode, message: str, *, reason: str = "", error_info: bool = False
    ) -> None:
        super().__init__(message)
        self.code, self.message, self.reason, self.error_info = code, message, reason, error_info


def _when(text: str) -> Timestamp:
    stamp = Timestamp()
    stamp.FromJsonString(text)
    return stamp


def _order(
    order_id: str,
    customer: str,
    status: pb.OrderStatus,
    items: Iterable[tuple[str, int, int]],
    created: str,
    email: str,
    **extra: Any,
) -> pb.Order:
    lines = [pb.LineItem(sku=s, quantity=q, unit_price_cents=p) for s, q, p in items]
    return pb.Order(
        order_id=order_id,
        customer_id=customer,
        status=status,
        items=lines,
        total_cents=sum(q * p for _, q, p in items),
        currency="EUR",
        created_at=_when(created),
        card_last4="4242",
        customer_email=email,
        **extra,
    )


def seed_orders() -> dict[str, pb.Order]:
    orders = [
        _order(
            "o-1001",
            "c-1",
            _OPEN,
            [("SKU-DESK", 1, 189_900), ("SKU-CHAIR", 2, 30_050)],
            "2024-05-01T12:00:00Z",
            "alice@example.com",
            labels={"channel": "web"},
        ),
        _order(
            "o-1002",
            "c-1",
            _SHIPPED,
            [("SKU-LAMP", 1, 4_990)],
            "2024-05-03T09:30:00Z",
            "alice@example.com",
            note="leave at the door",
        ),
        # 2^53 + 1 cents: proves 64-bit integers stay exact through JSON both ways.
        _order(
            "o-1003",
            "c-2",
            _OPEN,
            [("SKU-BULK", 1, 2**53 + 1)],
            "2024-06-10T08:00:00Z",
            "bob@example.com",
            labels={"tier": "wholesale"},
        ),
        _order(
            "o-1004",
            "c-2",
            _CANCELLED,
            [("SKU-MUG", 4, 1_250)],
            "2024-01-10T16:45:00Z",
            "bob@example.com",
        ),
    ]
    return {o.order_id: o for o in orders}


def is_fault(key: str) -> bool:
    return key.startswith(("fail-", "contract-error", *_FAULT_PREFIXES))


async def apply_fault(key: str, flaky: dict[str, int]) -> str | None:
    """Act out the fault named by `key`; return "bad-output"/"huge-output" or None."""
    if key.startswith("slow-"):
        await asyncio.sleep(int(key.removeprefix("slow-")) / 1000)
    elif key.startswith("fail-"):
        name = key.removeprefix("fail-")
        code = getattr(grpc.StatusCode, name, grpc.StatusCode.INVALID_ARGUMENT)
        raise Refusal(code, f"injected failure {name}")
    elif key.startswith("flaky-"):
        failures = int(key.split("-")[1])
        flaky[key] = flaky.get(key, 0) + 1
        if flaky[key] <= failures:
            raise Refusal(grpc.StatusCode.UNAVAILABLE, "injected flaky failure")
    elif key in ("contract-error", "contract-errorinfo"):
        raise Refusal(
            grpc.StatusCode.FAILED_PRECONDITION,
            "The order is locked for changes.",
            reason="ORDER_LOCKED",
            error_info=key.endswith("info"),
        )
    return key if key in SPOILERS else None


class OrderBook:
    """Orders by id; `reset()` restores the seed."""

    def __init__(self) -> None:
        self.orders: dict[str, pb.Order] = {}
        self.refunds = 0
        self.reset()

    def reset(self) -> None:
        self.orders = seed_orders()
        self.refunds = 0

    def get(self, order_id: str) -> pb.Order:
        order = self.orders.get(order_id)
        if order is not None:
            return order
        if order_id.startswith(_FAULT_PREFIXES):  # fault ids that do answer
            return _order(
                order_id,
                "c-faults",
                _OPEN,
                [("SKU-TEST", 1, 1_000)],
                "2024-01-01T00:00:00Z",
                "faults@example.com",
            )
        raise Refusal(grpc.StatusCode.NOT_FOUND, "Order not found.", reason="ORDER_NOT_FOUND")

    def list(
        self, customer_id: str, status: int, page_size: int, page_token: str
    ) -> tuple[list[pb.Order], str, int]:
        if not page_token.isdigit() and page_token:
            raise Refusal(
                grpc.StatusCode.INVALID_ARGUMENT,
                "The page token is invalid.",
                reason="PAGE_TOKEN_INVALID",
            )
        matches = [
            o
            for _, o in sorted(self.orders.items())
            if (not customer_id or o.customer_id == customer_id)
            and (not status or o.status == status)
        ]
        start, size = int(page_token or 0), min(page_size or 50, 100)
        end = start + size
        return matches[start:end], str(end) if end < len(matches) else "", len(matches)

    def refund(self, order_id: str, amount: float, reason: str) -> pb.Refund:
        order = self.get(order_id)
        if not math.isfinite(amount) or amount <= 0:
            raise Refusal(
                grpc.StatusCode.INVALID_ARGUMENT,
                "The refund amount must be positive.",
                reason="REFUND_AMOUNT_INVALID",
            )
        if order.status == _CANCELLED:
            raise Refusal(
                grpc.StatusCode.FAILED_PRECONDITION,
                "A cancelled order cannot be refunded.",
                reason="ORDER_CANCELLED",
            )
        cents = round(amount * 100)
        if order.refunded_cents + cents > order.total_cents:
            raise Refusal(
                grpc.StatusCode.FAILED_PRECONDITION,
                "The refund exceeds what is left to refund on this order.",
                reason="REFUND_EXCEEDS_TOTAL",
            )
        if order_id in self.orders:  # fault ids answer without changing the book
            order.refunded_cents += cents
            if order.refunded_cents == order.total_cents:
                order.status = _REFUNDED
        self.refunds += 1
        return pb.Refund(
            refund_id=f"r-{self.refunds:04d}",
            order_id=order_id,
            amount=amount,
            status=pb.REFUND_STATUS_SUCCEEDED,
            card_last4=order.card_last4,
            customer_email=order.customer_email,
        )

    def cancel(self, order_id: str, reason: str) -> pb.Order:
        order = self.get(order_id)
        if order.status != _OPEN:
            raise Refusal(
                grpc.StatusCode.FAILED_PRECONDITION,
                "Only open orders can be cancelled.",
                reason="ORDER_NOT_CANCELLABLE",
            )
        if order_id in self.orders:
            order.status = _CANCELLED
        return order

    def purge(self, older_than_days: int, now: datetime) -> int:
        """Delete closed (cancelled or refunded) orders created before now - older_than_days."""
        cutoff = now - timedelta(days=older_than_days)
        doomed = [
            oid
            for oid, o in self.orders.items()
            if o.status in (_CANCELLED, _REFUNDED) and o.created_at.ToDatetime(UTC) < cutoff
        ]
        for oid in doomed:
            del self.orders[oid]
        return len(doomed)


def order_json(order: pb.Order) -> dict[str, Any]:
    """The Procedure contract's JSON of an order: the same shape the gateway transcodes the
    gRPC reply into (proto field names, enum names, 64-bit integers as numbers)."""
    out: dict[str, Any] = {
        "order_id": order.order_id,
        "customer_id": order.customer_id,
        "status": pb.OrderStatus.Name(order.status),
        "items": [
            {"sku": i.sku, "quantity": i.quantity, "unit_price_cents": i.unit_price_cents}
            for i in order.items
        ],
        "total_cents": order.total_cents,
        "currency": order.currency,
        "created_at": order.created_at.ToJsonString(),
        "labels": dict(order.labels),
    }
    if order.HasField("note"):
        out["note"] = order.note
    out.update(
        card_last4=order.card_last4,
        customer_email=order.customer_email,
        refunded_cents=order.refunded_cents,
    )
    return out


def refund_json(refund: pb.Refund) -> dict[str, Any]:
    return {
        "refund_id": refund.refund_id,
        "order_id": refund.order_id,
        "amount": refund.amount,
        "status": pb.RefundStatus.Name(refund.status),
        "card_last4": refund.card_last4,
        "customer_email": refund.customer_email,
    }


def spoil_order(order: pb.Order, mode: str) -> pb.Order:
    """An order that breaks its declared schema (bad-output) or the size limit (huge-output)."""
    spoiled = pb.Order()
    spoiled.CopyFrom(order)
    if mode == "huge-output":
        spoiled.note = "x" * HUGE_BYTES
    else:
        spoiled.order_id, spoiled.total_cents, spoiled.status = "", -1, pb.ORDER_STATUS_UNSPECIFIED
    return spoiled


def spoil_refund(refund: pb.Refund, mode: str) -> pb.Refund:
    spoiled = pb.Refund()
    spoiled.CopyFrom(refund)
    if mode == "huge-output":
        spoiled.customer_email = "x" * HUGE_BYTES
    else:  # NaN has no JSON form: no schema can accept this amount
        spoiled.refund_id, spoiled.amount = "", math.nan
        spoiled.status = pb.REFUND_STATUS_UNSPECIFIED
    return spoiled
