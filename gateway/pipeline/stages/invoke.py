"""Stage 11 — procedure invocation (SI-9, SI-11): the only retry loop, the same execution id
for every attempt, the gateway-signed actor token forwarded, caller credentials never.

Each attempt is one `agent.procedure_execution` CLIENT span, and the W3C `traceparent` sent
upstream is that span's context (else the current span's, else the caller's header as is)."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from opentelemetry.trace import SpanKind, Status, StatusCode

from capgate.v1 import types_pb2
from gateway.errors import CapabilityError, Event
from gateway.pipeline.bindings import View, variables
from gateway.pipeline.call import Call, Runtime
from gateway.pipeline.events import build
from gateway.telemetry import child_span, metrics, traceparent
from gateway.upstream.call import UpstreamCall, call_with_retry
from gateway.upstream.headers import Metadata
from gateway.upstream.state import ATTEMPTS_KEY, UPSTREAM_STATUS_KEY, ExecutionState, state_of

_STATES = {
    ExecutionState.NOT_STARTED: types_pb2.EXECUTION_STATE_NOT_STARTED,
    ExecutionState.COMPLETED: types_pb2.EXECUTION_STATE_COMPLETED,
    ExecutionState.UNKNOWN: types_pb2.EXECUTION_STATE_UNKNOWN,
}


# A W3C traceparent (version-format 00 shape, any version byte but ff). The caller's header is
# forwarded only in this shape: grpcio admits up to 16 KiB, which the upstream may refuse.
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


def _w3c(header: str) -> str:
    return header if _TRACEPARENT.fullmatch(header) and not header.startswith("ff") else ""


def forwarded_metadata(call: Call, rt: Runtime) -> list[tuple[str, str]]:
    assert call.prepared is not None and call.actor is not None
    cap = call.prepared.capability
    md = [
        ("x-capgate-execution-id", call.execution_id),
        ("x-capgate-capability", cap.id),
        ("x-capgate-surface", call.surface),
        # The key sent upstream is the caller's, else the execution id (seed 001).
        ("x-capgate-idempotency-key", call.idempotency_key or call.execution_id),
    ]
    if call.correlation_id:
        md.append(("x-capgate-correlation-id", call.correlation_id))
    if call.approval is not None:
        md.append(("x-capgate-approval-id", call.approval.id))
    if rt.signer is not None:
        decided_by = call.approval.decided_by if call.approval is not None else None
        granted_by = call.grant.creator_id if call.grant is not None else None
        approver = decided_by.id if decided_by is not None else granted_by
        token = rt.signer.sign(
            call.actor,
            upstream=cap.upstream,
            surface=call.surface,
            approval_id=call.approval.id if call.approval is not None else None,
            approver=approver,
            grant_id=call.grant_id or None,
        )
        md.append(("x-capgate-actor-token", token))
    return md


class _Attempts:
    """Wraps the prepared upstream call: one CLIENT span, the trace context, and the latency
    metric per attempt. Span attributes are ids and codes only (SI-10)."""

    def __init__(self, call: Call, inner: UpstreamCall) -> None:
        self._call = call
        self._inner = inner
        self._attempt = 0
        assert call.prepared is not None
        self._upstream = call.prepared.capability.upstream
        self.full_method = inner.full_method
        self.span_attributes = inner.span_attributes  # each kind's: gRPC, HTTP client, JSON-RPC
        self._attributes: dict[str, str | int] = {
            **self.span_attributes,
            "capgate.upstream": self._upstream,
        }

    async def __call__(
        self,
        input_value: Any,
        *,
        timeout: float,  # noqa: ASYNC109
        metadata: Metadata = (),
    ) -> Any:
        self._attempt += 1
        attributes: dict[str, str | int] = {**self._attributes, "capgate.attempt": self._attempt}
        started = time.perf_counter()
        code = "OK"
        with child_span("agent.procedure_execution", SpanKind.CLIENT, attributes) as span:
            try:
                return await self._inner(
                    input_value,
                    timeout=timeout,
                    metadata=[*metadata, *traceparent(_w3c(self._call.traceparent))],
                )
            except CapabilityError as err:
                code = err.code.value
                status = err.details.get(UPSTREAM_STATUS_KEY)
                if span.is_recording():
                    span.set_attribute("capgate.code", code)
                    if isinstance(status, str):
                        span.set_attribute("capgate.upstream_status", status)
                    span.set_status(Status(StatusCode.ERROR, code))
                raise
            except asyncio.CancelledError:
                code = "CANCELLED"
                raise
            finally:
                elapsed = time.perf_counter() - started
                self._call.upstream_s += elapsed
                metrics.upstream_duration.observe(elapsed, (self._upstream, code))


async def invoke_procedure(call: Call, rt: Runtime) -> None:
    assert call.prepared is not None
    prepared = call.prepared
    metadata = forwarded_metadata(call, rt)

    async def on_retry(attempt: int, err: CapabilityError) -> None:
        call.attempts = attempt
        metrics.retries.add((prepared.capability.id,))
        rt.audit.emit(build(Event.RETRIED, call, rt.wall(), attempt=attempt, code=err.code.value))

    request = call.input
    if prepared.input_mapper is not None:
        # map_input (ADR 0024): the upstream request, built from the validated input; a
        # failure leaves the state NOT_STARTED. Never logged; approvals bound call.input.
        request = prepared.input_mapper.apply(variables(call, rt, View.INVOCATION))
    call.state = types_pb2.EXECUTION_STATE_UNKNOWN  # from here on the effect may have happened
    try:
        output, attempts = await call_with_retry(
            _Attempts(call, prepared.upstream_call),
            request,
            metadata=metadata,
            capability=prepared.capability,
            deadline=call.deadline,
            clock=rt.monotonic,
            sleep=rt.sleep or asyncio.sleep,
            jitter=rt.jitter,
            on_retry=on_retry,
        )
    except CapabilityError as err:
        call.attempts = max(call.attempts, int(err.details.get(ATTEMPTS_KEY, 1)))  # type: ignore[call-overload]
        call.state = _STATES[state_of(err)]
        raise
    call.attempts = attempts
    call.state = types_pb2.EXECUTION_STATE_COMPLETED
    call.output = output
