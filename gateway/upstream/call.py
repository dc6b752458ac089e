"""Stage 11 — the upstream call (SI-9, SI-11): retry → deadline → error mapping → stub.

STYLE: only the upstream call is a wrapper chain, and this module is all of it:

- stub + error mapping: an `UpstreamCall`, prepared once per capability at load, turns the
  validated JSON value into the request, calls a multicallable built once, maps every failure
  to a `CapabilityError` (status.py holds the one table) and returns the reply as JSON;
- deadline: `call_with_deadline` gives each attempt what is left of the absolute deadline
  (the pipeline computes min(caller deadline - margin, capability timeout, 30 s default));
- retry: `call_with_retry` re-attempts only retryable failures, only when
  `capability.retry.max_attempts > 0` and the capability is side-effect free (`none`/`read`)
  or explicitly `idempotent` (SI-11), with exponential backoff and full jitter (the gRPC
  retry design: a uniform draw in [0, backoff]; the draw is injected, STYLE principle 5),
  at least an HTTP upstream's `Retry-After`, never sleeping past the deadline.

Caller cancellation is not an error here: `asyncio.CancelledError` propagates, and grpc.aio
cancels the RPC so the upstream sees its context cancelled.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol

import grpc
import orjson
from google.protobuf.message import DecodeError, EncodeError, Message

from capgate.v1 import procedure_pb2
from gateway.errors import CapabilityError, Code
from gateway.model import Capability, RetrySpec
from gateway.upstream.descriptors import MethodInfo
from gateway.upstream.errors import TranscodeError
from gateway.upstream.headers import Metadata
from gateway.upstream.spec import Upstream
from gateway.upstream.state import (
    ATTEMPTS_KEY,
    RETRY_AFTER_KEY,
    ExecutionState,
    state_of,
    with_state,
)
from gateway.upstream.status import map_rpc_error
from gateway.upstream.transcode import MessageCodec
from gateway.values.jsonvalue import parse_strict

__all__ = [
    "PROCEDURE_METHOD",
    "Clock",
    "GrpcMethodCall",
    "Jitter",
    "OnRetry",
    "ProcedureCall",
    "Sleep",
    "UpstreamCall",
    "backoff_delay",
    "call_with_deadline",
    "call_with_retry",
    "grpc_call",
    "procedure_call",
    "retry_allowed",
]

PROCEDURE_METHOD: Final = "/capgate.v1.Procedure/Invoke"
Clock = Callable[[], float]  # monotonic seconds
Sleep = Callable[[float], Awaitable[None]]
Jitter = Callable[[], float]  # a uniform draw in [0, 1]
OnRetry = Callable[[int, CapabilityError], Awaitable[None]]


class UpstreamCall(Protocol):
    """One capability's prepared upstream call."""

    @property
    def full_method(self) -> str: ...

    @property
    def span_attributes(self) -> dict[str, str]:
        """What each attempt's CLIENT span says was called (the kind's own conventions)."""
        ...

    async def __call__(
        self,
        input_value: Any,
        *,
        timeout: float,  # noqa: ASYNC109 - sent upstream as the gRPC deadline
        metadata: Metadata = (),
    ) -> Any:
        """Send the validated input; return the reply as a JSON value or raise
        `CapabilityError` (never any other error for upstream or transcoding failures)."""
        ...


class _Invoker:
    """The stub link shared by both contracts: one multicallable, raw reply bytes."""

    def __init__(
        self,
        channel: grpc.aio.Channel,
        full_method: str,
        serializer: Callable[[Any], bytes],
        upstream: Upstream,
    ) -> None:
        self.full_method = full_method
        service, _, method = full_method.lstrip("/").rpartition("/")
        self.span_attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": method}
        self._upstream = upstream.name
        self._max_bytes = upstream.max_response_bytes
        self._serialize = serializer
        # Built once (STYLE: compile once). No serializers: the request is encoded here, because
        # grpcio logs a serializer's exception and sends an empty message instead; and the reply
        # arrives as bytes, so decoding failures stay ours to map (OUTPUT_INVALID, not a crash).
        self._multicallable = channel.unary_unary(
            full_method, request_serializer=None, response_deserializer=None
        )

    async def _send(self, request: Message, timeout_s: float, metadata: Metadata) -> bytes:
        try:
            payload = self._serialize(request)
        except (EncodeError, ValueError, TypeError) as err:
            raise _not_sent(Code.EXECUTION_FAILED, f"request not encodable: {err}") from err
        try:
            raw: bytes = await self._multicallable(payload, timeout=timeout_s, metadata=metadata)
        except grpc.aio.AioRpcError as err:
            raise map_rpc_error(err, upstream=self._upstream) from err
        except grpc.aio.UsageError as err:  # the channel was closed (a reload retired it)
            raise _not_sent(Code.UPSTREAM_UNAVAILABLE, f"upstream {self._upstream}: {err}") from err
        except (grpc.aio.BaseError, ValueError, TypeError) as err:
            # grpcio refused the call locally before anything went out: ExecuteBatchError for
            # metadata gRPC does not allow (stage 5 refuses caller values that would), or a
            # value of the wrong type. Nothing reached the upstream (issue 14).
            reason = f"upstream {self._upstream}: not sent: {type(err).__name__}"
            raise _not_sent(Code.EXECUTION_FAILED, reason) from err
        if len(raw) > self._max_bytes:
            raise _invalid_output(f"reply of {len(raw)} bytes over max_response_bytes")
        return raw


class GrpcMethodCall(_Invoker):
    """`kind: grpc`: JSON → the method's request message → JSON of its response message."""

    def __init__(
        self,
        channel: grpc.aio.Channel,
        method: MethodInfo,
        *,
        upstream: Upstream,
        include_defaults: bool = True,
    ) -> None:
        super().__init__(
            channel, method.full_method, method.request_class.SerializeToString, upstream
        )
        self.method = method
        self._request = MessageCodec(method.input)
        self._response = MessageCodec(method.output, include_defaults=include_defaults)

    async def __call__(
        self,
        input_value: Any,
        *,
        timeout: float,  # noqa: ASYNC109 - sent upstream as the gRPC deadline
        metadata: Metadata = (),
    ) -> Any:
        try:
            request = self._request.to_message(input_value)
        except TranscodeError as err:
            raise err.to_capability_error() from None
        raw = await self._send(request, timeout, metadata)
        try:
            reply = self.method.response_class.FromString(raw)
        except DecodeError as err:
            raise _invalid_output("reply is not a valid response message") from err
        try:
            return self._response.to_json(reply)
        except TranscodeError as err:
            raise err.to_capability_error() from None


class ProcedureCall(_Invoker):
    """`kind: procedure`: the JSON-native `capgate.v1.Procedure/Invoke` contract (DESIGN §8)."""

    def __init__(
        self, channel: grpc.aio.Channel, *, capability_id: str, upstream: Upstream
    ) -> None:
        super().__init__(
            channel,
            PROCEDURE_METHOD,
            procedure_pb2.ProcedureInvokeRequest.SerializeToString,
            upstream,
        )
        self.capability_id = capability_id

    async def __call__(
        self,
        input_value: Any,
        *,
        timeout: float,  # noqa: ASYNC109 - sent upstream as the gRPC deadline
        metadata: Metadata = (),
    ) -> Any:
        try:
            # The validated value, re-serialized (DESIGN §12), never the caller's raw bytes.
            input_json = orjson.dumps(input_value).decode()
        except TypeError:
            error = CapabilityError(Code.INPUT_INVALID, reason="input is not serializable JSON")
            raise with_state(error, ExecutionState.NOT_STARTED) from None
        request = procedure_pb2.ProcedureInvokeRequest(
            capability_id=self.capability_id, input_json=input_json
        )
        raw = await self._send(request, timeout, metadata)
        try:
            reply = procedure_pb2.ProcedureInvokeResponse.FromString(raw)
        except DecodeError as err:
            raise _invalid_output("reply is not a ProcedureInvokeResponse") from err
        try:
            # The input rules (DESIGN §12): duplicate keys, integers beyond 64 bits, NaN and
            # Infinity are refused, not silently resolved; stage 12 applies the limits.
            return parse_strict(reply.output_json.encode(), what="output_json")
        except CapabilityError as err:
            raise _invalid_output(err.reason or "output_json is not strict JSON") from None


def grpc_call(
    channel: grpc.aio.Channel, method: MethodInfo, *, upstream: Upstream
) -> GrpcMethodCall:
    """The prepared call of a `kind: grpc` capability."""
    return GrpcMethodCall(channel, method, upstream=upstream)


def procedure_call(
    channel: grpc.aio.Channel, capability_id: str, *, upstream: Upstream
) -> ProcedureCall:
    """The prepared call of a `kind: procedure` capability."""
    return ProcedureCall(channel, capability_id=capability_id, upstream=upstream)


_STATE_ORDER: Final = (ExecutionState.NOT_STARTED, ExecutionState.COMPLETED, ExecutionState.UNKNOWN)


def _not_sent(code: Code, reason: str) -> CapabilityError:
    return with_state(CapabilityError(code, reason=reason), ExecutionState.NOT_STARTED)


def _invalid_output(reason: str) -> CapabilityError:
    # Stage 12 semantics: the output is withheld, the upstream's effect happened.
    error = CapabilityError(Code.OUTPUT_INVALID, reason=reason, executed=True)
    return with_state(error, ExecutionState.COMPLETED)


async def call_with_deadline(
    call: UpstreamCall,
    input_value: Any,
    *,
    deadline: float,
    clock: Clock,
    metadata: Metadata = (),
) -> Any:
    """One attempt bounded by the remaining time; no time left is TIMEOUT before sending."""
    remaining = deadline - clock()
    if remaining <= 0:
        error = CapabilityError(Code.TIMEOUT, reason="deadline passed before the upstream call")
        raise with_state(error, ExecutionState.NOT_STARTED)
    return await call(input_value, timeout=remaining, metadata=metadata)


def rerun_safe(capability: Capability) -> bool:
    """Running it again cannot repeat an effect: side effect none/read, or declared idempotent."""
    return capability.side_effect in ("none", "read") or capability.idempotent


def retry_allowed(capability: Capability) -> bool:
    """SI-11: may a retryable failure of this capability be attempted again at all?"""
    return capability.retry.max_attempts > 0 and rerun_safe(capability)


def backoff_delay(spec: RetrySpec, retry_number: int, draw: float) -> float:
    """Sleep before retry `retry_number` (1 = the first re-attempt); `draw` is in [0, 1]."""
    growth = spec.multiplier ** (retry_number - 1)
    ceiling = min(spec.max_backoff_s, spec.initial_backoff_s * growth)
    return ceiling * min(max(draw, 0.0), 1.0)


async def call_with_retry(
    call: UpstreamCall,
    input_value: Any,
    *,
    capability: Capability,
    deadline: float,
    clock: Clock,
    sleep: Sleep,
    jitter: Jitter,
    on_retry: OnRetry,
    metadata: Metadata = (),
) -> tuple[Any, int]:
    """Call until success or a final failure; return (output, attempts made).

    `on_retry(attempt, error)` runs before each re-attempt with its 1-based number (2, 3, …)
    and the error that caused it; the pipeline emits `capability.retried` from it. A final
    `CapabilityError` carries the attempts made in `details["attempts"]`, and the execution
    state of all of them: an earlier attempt that reached the upstream is not undone by a last
    one that never did (UNKNOWN over COMPLETED over NOT_STARTED).
    """
    allowed = retry_allowed(capability)
    attempt = 1
    reached = ExecutionState.NOT_STARTED  # the strongest state of the attempts so far
    while True:
        try:
            output = await call_with_deadline(
                call, input_value, deadline=deadline, clock=clock, metadata=metadata
            )
        except CapabilityError as err:
            err.details[ATTEMPTS_KEY] = attempt
            reached = max(reached, state_of(err), key=_STATE_ORDER.index)
            with_state(err, reached)
            if not (allowed and err.is_retryable and attempt <= capability.retry.max_attempts):
                raise
            delay = backoff_delay(capability.retry, attempt, jitter())
            # An HTTP upstream's Retry-After (gateway/upstream/http.py) is a floor on the wait.
            after = err.details.get(RETRY_AFTER_KEY)
            if isinstance(after, float):
                delay = max(delay, after)
            if clock() + delay >= deadline:
                raise  # §12: retries stay inside the remaining deadline
            failure = err
        else:
            return output, attempt
        await sleep(delay)
        attempt += 1
        await on_retry(attempt, failure)
