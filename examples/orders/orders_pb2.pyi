import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OrderStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ORDER_STATUS_UNSPECIFIED: _ClassVar[OrderStatus]
    ORDER_STATUS_OPEN: _ClassVar[OrderStatus]
    ORDER_STATUS_SHIPPED: _ClassVar[OrderStatus]
    ORDER_STATUS_CANCELLED: _ClassVar[OrderStatus]
    ORDER_STATUS_REFUNDED: _ClassVar[OrderStatus]

class RefundStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REFUND_STATUS_UNSPECIFIED: _ClassVar[RefundStatus]
    REFUND_STATUS_PENDING: _ClassVar[RefundStatus]
    REFUND_STATUS_SUCCEEDED: _ClassVar[RefundStatus]
ORDER_STATUS_UNSPECIFIED: OrderStatus
ORDER_STATUS_OPEN: OrderStatus
ORDER_STATUS_SHIPPED: OrderStatus
ORDER_STATUS_CANCELLED: OrderStatus
ORDER_STATUS_REFUNDED: OrderStatus
REFUND_STATUS_UNSPECIFIED: RefundStatus
REFUND_STATUS_PENDING: RefundStatus
REFUND_STATUS_SUCCEEDED: RefundStatus

class LineItem(_message.Message):
    __slots__ = ("sku", "quantity", "unit_price_cents")
    SKU_FIELD_NUMBER: _ClassVar[int]
    QUANTITY_FIELD_NUMBER: _ClassVar[int]
    UNIT_PRICE_CENTS_FIELD_NUMBER: _ClassVar[int]
    sku: str
    quantity: int
    unit_price_cents: int
    def __init__(self, sku: _Optional[str] = ..., quantity: _Optional[int] = ..., unit_price_cents: _Optional[int] = ...) -> None: ...

class Order(_message.Message):
    __slots__ = ("order_id", "customer_id", "status", "items", "total_cents", "currency", "created_at", "labels", "note", "card_last4", "customer_email", "refunded_cents")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ORDER_ID_FIELD_NUMBER: _ClassVar[int]
    CUSTOMER_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_CENTS_FIELD_NUMBER: _ClassVar[int]
    CURRENCY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    CARD_LAST4_FIELD_NUMBER: _ClassVar[int]
    CUSTOMER_EMAIL_FIELD_NUMBER: _ClassVar[int]
    REFUNDED_CENTS_FIELD_NUMBER: _ClassVar[int]
    order_id: str
    customer_id: str
    status: OrderStatus
    items: _containers.RepeatedCompositeFieldContainer[LineItem]
    total_cents: int
    currency: str
    created_at: _timestamp_pb2.Timestamp
    labels: _containers.ScalarMap[str, str]
    note: str
    card_last4: str
    customer_email: str
    refunded_cents: int
    def __init__(self, order_id: _Optional[str] = ..., customer_id: _Optional[str] = ..., status: _Optional[_Union[OrderStatus, str]] = ..., items: _Optional[_Iterable[_Union[LineItem, _Mapping]]] = ..., total_cents: _Optional[int] = ..., currency: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ..., note: _Optional[str] = ..., card_last4: _Optional[str] = ..., customer_email: _Optional[str] = ..., refunded_cents: _Optional[int] = ...) -> None: ...

class GetOrderRequest(_message.Message):
    __slots__ = ("order_id",)
    ORDER_ID_FIELD_NUMBER: _ClassVar[int]
    order_id: str
    def __init__(self, order_id: _Optional[str] = ...) -> None: ...

class ListOrdersRequest(_message.Message):
    __slots__ = ("customer_id", "status", "page_size", "page_token")
    CUSTOMER_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    customer_id: str
    status: OrderStatus
    page_size: int
    page_token: str
    def __init__(self, customer_id: _Optional[str] = ..., status: _Optional[_Union[OrderStatus, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListOrdersResponse(_message.Message):
    __slots__ = ("orders", "next_page_token", "total")
    ORDERS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    orders: _containers.RepeatedCompositeFieldContainer[Order]
    next_page_token: str
    total: int
    def __init__(self, orders: _Optional[_Iterable[_Union[Order, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total: _Optional[int] = ...) -> None: ...

class RefundOrderRequest(_message.Message):
    __slots__ = ("order_id", "amount", "reason")
    ORDER_ID_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    order_id: str
    amount: float
    reason: str
    def __init__(self, order_id: _Optional[str] = ..., amount: _Optional[float] = ..., reason: _Optional[str] = ...) -> None: ...

class Refund(_message.Message):
    __slots__ = ("refund_id", "order_id", "amount", "status", "card_last4", "customer_email")
    REFUND_ID_FIELD_NUMBER: _ClassVar[int]
    ORDER_ID_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CARD_LAST4_FIELD_NUMBER: _ClassVar[int]
    CUSTOMER_EMAIL_FIELD_NUMBER: _ClassVar[int]
    refund_id: str
    order_id: str
    amount: float
    status: RefundStatus
    card_last4: str
    customer_email: str
    def __init__(self, refund_id: _Optional[str] = ..., order_id: _Optional[str] = ..., amount: _Optional[float] = ..., status: _Optional[_Union[RefundStatus, str]] = ..., card_last4: _Optional[str] = ..., customer_email: _Optional[str] = ...) -> None: ...

class CancelOrderRequest(_message.Message):
    __slots__ = ("order_id", "reason")
    ORDER_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    order_id: str
    reason: str
    def __init__(self, order_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class WatchOrdersRequest(_message.Message):
    __slots__ = ("customer_id",)
    CUSTOMER_ID_FIELD_NUMBER: _ClassVar[int]
    customer_id: str
    def __init__(self, customer_id: _Optional[str] = ...) -> None: ...

class OrderEvent(_message.Message):
    __slots__ = ("order_id", "status")
    ORDER_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    order_id: str
    status: OrderStatus
    def __init__(self, order_id: _Optional[str] = ..., status: _Optional[_Union[OrderStatus, str]] = ...) -> None: ...

class GetStatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CallRecord(_message.Message):
    __slots__ = ("method", "execution_id", "capability", "surface", "idempotency_key", "approval_id", "traceparent", "actor_token_present", "actor_verified", "actor_id", "actor_kind", "cancelled", "correlation_id")
    METHOD_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    SURFACE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    ACTOR_TOKEN_PRESENT_FIELD_NUMBER: _ClassVar[int]
    ACTOR_VERIFIED_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    ACTOR_KIND_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    method: str
    execution_id: str
    capability: str
    surface: str
    idempotency_key: str
    approval_id: str
    traceparent: str
    actor_token_present: bool
    actor_verified: bool
    actor_id: str
    actor_kind: str
    cancelled: bool
    correlation_id: str
    def __init__(self, method: _Optional[str] = ..., execution_id: _Optional[str] = ..., capability: _Optional[str] = ..., surface: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., approval_id: _Optional[str] = ..., traceparent: _Optional[str] = ..., actor_token_present: _Optional[bool] = ..., actor_verified: _Optional[bool] = ..., actor_id: _Optional[str] = ..., actor_kind: _Optional[str] = ..., cancelled: _Optional[bool] = ..., correlation_id: _Optional[str] = ...) -> None: ...

class Stats(_message.Message):
    __slots__ = ("calls", "log", "cancelled")
    class CallsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class CancelledEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    CALLS_FIELD_NUMBER: _ClassVar[int]
    LOG_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    calls: _containers.ScalarMap[str, int]
    log: _containers.RepeatedCompositeFieldContainer[CallRecord]
    cancelled: _containers.ScalarMap[str, int]
    def __init__(self, calls: _Optional[_Mapping[str, int]] = ..., log: _Optional[_Iterable[_Union[CallRecord, _Mapping]]] = ..., cancelled: _Optional[_Mapping[str, int]] = ...) -> None: ...

class ResetRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ResetResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
