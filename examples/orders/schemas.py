"""Declared JSON Schemas of the example's capabilities (draft-07), for config and tests.

The Procedure contract carries plain JSON, so its capabilities declare their schemas in
config (DESIGN §8); these are the ones to copy. The output schemas also fit the gRPC methods'
replies as capgate transcodes them, and the `bad-output` fault id violates every one of them.
"""

from __future__ import annotations

from typing import Any, Final

_ID: Final = {"type": "string", "minLength": 1, "maxLength": 64}
_STATUS: Final = [
    "ORDER_STATUS_OPEN",
    "ORDER_STATUS_SHIPPED",
    "ORDER_STATUS_CANCELLED",
    "ORDER_STATUS_REFUNDED",
]

ORDER: Final[dict[str, Any]] = {
    "type": "object",
    "required": ["order_id", "customer_id", "status", "items", "total_cents", "currency"],
    "properties": {
        "order_id": _ID,
        "customer_id": {"type": "string"},
        "status": {"enum": _STATUS},
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["sku", "quantity", "unit_price_cents"],
                "properties": {
                    "sku": {"type": "string"},
                    "quantity": {"type": "integer", "minimum": 1},
                    "unit_price_cents": {"type": "integer", "minimum": 0},
                },
            },
        },
        "total_cents": {"type": "integer", "minimum": 0},
        "refunded_cents": {"type": "integer", "minimum": 0},
        "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "created_at": {"type": "string", "format": "date-time"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "note": {"type": "string"},
        "card_last4": {"type": "string", "pattern": "^[0-9]{4}$"},
        "customer_email": {"type": "string"},
    },
}

REFUND: Final[dict[str, Any]] = {
    "type": "object",
    "required": ["refund_id", "order_id", "amount", "status"],
    "properties": {
        "refund_id": _ID,
        "order_id": _ID,
        "amount": {"type": "number", "exclusiveMinimum": 0},
        "status": {"enum": ["REFUND_STATUS_PENDING", "REFUND_STATUS_SUCCEEDED"]},
        "card_last4": {"type": "string", "pattern": "^[0-9]{4}$"},
        "customer_email": {"type": "string"},
    },
}

ORDER_LIST: Final[dict[str, Any]] = {
    "type": "object",
    "required": ["orders", "total"],
    "properties": {
        "orders": {"type": "array", "items": ORDER},
        "next_page_token": {"type": "string"},
        "total": {"type": "integer", "minimum": 0},
    },
}


def _input(required: list[str], **properties: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": required,
        "properties": properties,
    }


INPUTS: Final[dict[str, dict[str, Any]]] = {
    "orders.get": _input(["order_id"], order_id=_ID),
    "orders.list": _input(
        [],
        customer_id={"type": "string", "maxLength": 64},
        status={"enum": _STATUS},
        page_size={"type": "integer", "minimum": 1, "maximum": 100},
        page_token={"type": "string", "maxLength": 32},
    ),
    "orders.refund": _input(
        ["order_id", "amount"],
        order_id=_ID,
        amount={"type": "number", "exclusiveMinimum": 0},
        reason={"type": "string", "maxLength": 500},
    ),
    "orders.cancel": _input(
        ["order_id"], order_id=_ID, reason={"type": "string", "maxLength": 500}
    ),
    "admin.orders.purge": _input([], older_than_days={"type": "integer", "minimum": 1}),
    "orders.stats": _input([]),
}

OUTPUTS: Final[dict[str, dict[str, Any]]] = {
    "orders.get": ORDER,
    "orders.list": ORDER_LIST,
    "orders.refund": REFUND,
    "orders.cancel": ORDER,
    "admin.orders.purge": {
        "type": "object",
        "required": ["purged"],
        "properties": {"purged": {"type": "integer", "minimum": 0}},
    },
}
