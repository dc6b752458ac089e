"""The invocation pipeline: stage order is data (STYLE principle 1) and one runner is the only
broad error boundary (principle 2): it alone builds envelopes, terminal audit events and span
status. `INVOKE` is pinned to seed 001 by a test; reordering needs an ADR.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from capgate.v1 import gateway_pb2, types_pb2
from gateway import envelope
from gateway.audit.events import build, stances
from gateway.call import Call, Runtime
from gateway.errors import CapabilityError, Code, Event
from gateway.jsonvalue import dumps
from gateway.stages import SUSPEND
from gateway.stages.actor import check_actor
from gateway.stages.approval import approval_gate
from gateway.stages.controls import attach_controls
from gateway.stages.exposure import check_exposure
from gateway.stages.identity import assign_execution_id
from gateway.stages.invoke import invoke_procedure
from gateway.stages.output import redact_output, validate_output
from gateway.stages.policies import (
    evaluate_execution_policies,
    evaluate_invocation_policies,
    reevaluate_invocation_policies,
)
from gateway.stages.resolve import resolve_capability
from gateway.stages.resume import (
    consume_approval,
    load_approval,
    verify_capability_digest,
    verify_input_hash,
)
from gateway.stages.validate import validate_input

log = logging.getLogger("capgate.pipeline")
tracer = trace.get_tracer("capgate")

StageFn = Callable[[Call, Runtime], Awaitable[str | None]]


@dataclass(frozen=True, slots=True)
class Stage:
    number: int
    name: str
    run: StageFn
    span: str | None = None
    span_kind: SpanKind = SpanKind.INTERNAL


# Seed 001, stages 2–13 (1 is the listener; 14–15 are the runner's completion).
INVOKE: tuple[Stage, ...] = (
    Stage(2, "execution-identity", assign_execution_id),
    Stage(3, "resolve", resolve_capability),
    Stage(4, "exposure", check_exposure),
    Stage(5, "input-validation", validate_input),
    Stage(6, "actor-check", check_actor),
    Stage(7, "invocation-policies", evaluate_invocation_policies, "agent.policy_evaluation"),
    Stage(8, "approval-gate", approval_gate, "agent.approval_request"),
    Stage(9, "execution-policies", evaluate_execution_policies, "agent.policy_evaluation"),
    Stage(10, "controls", attach_controls),
    Stage(11, "procedure-invocation", invoke_procedure, "agent.procedure_execution", SpanKind.CLIENT),
    Stage(12, "output-validation", validate_output),
    Stage(13, "redaction", redact_output),
)

# Resume re-enters at stage 8: the record is loaded and checked first, stages 3–7 re-run on the
# stored input (deny/hide re-evaluated, ADR 0007), the approval is consumed, then 9 onwards.
RESUME: tuple[Stage, ...] = (
    INVOKE[0],
    Stage(8, "approval-load", load_approval, "agent.approval_request"),
    INVOKE[1],
    INVOKE[2],
    Stage(8, "approval-input-hash", verify_input_hash),
    INVOKE[3],
    Stage(8, "approval-capability-digest", verify_capability_digest),
    INVOKE[4],
    Stage(7, "invocation-policies", reevaluate_invocation_policies, "agent.policy_evaluation"),
    Stage(8, "approval-consume", consume_approval, "agent.approval_request"),
    *INVOKE[7:],
)

async def _run_stage(stage: Stage, call: Call, rt: Runtime) -> str | None:
    if stage.span is None:
        return await stage.run(call, rt)
    with tracer.start_as_current_span(stage.span, kind=stage.span_kind) as span:
        span.set_attribute("capgate.stage", stage.number)
        return await stage.run(call, rt)


async def run(call: Call, rt: Runtime, stages: tuple[Stage, ...] = INVOKE) -> gateway_pb2.ExecutionResult:
    """Runs the stages; never raises for governed failures (seed 001: invoke never throws)."""
    with tracer.start_as_current_span("agent.capability_call") as span:
        span.set_attribute("capgate.capability_id", call.capability_id)
        span.set_attribute("capgate.surface", call.surface)
        span.set_attribute("capgate.revision", call.snapshot.revision)
        try:
            for stage in stages:
                if await _run_stage(stage, call, rt) == SUSPEND:
                    # Approval required (stage 8 emitted its event) or a stored envelope.
                    assert call.result is not None
                    span.set_attribute("capgate.outcome", "suspended")
                    return call.result
            result = await _completed(call, rt)
            span.set_attribute("capgate.outcome", "completed")
            span.set_attribute("capgate.attempts", call.attempts)
            return result
        except CapabilityError as err:
            span.set_attribute("capgate.outcome", err.spec.kind.value)
            span.set_attribute("capgate.code", err.code.value)
            span.set_status(Status(StatusCode.ERROR, err.code.value))
            return await _failed(call, rt, err)
        except asyncio.CancelledError:
            # The caller went away: record it, then let cancellation propagate (nobody to answer).
            err = CapabilityError(Code.CANCELLED, reason="caller cancelled")
            span.set_status(Status(StatusCode.ERROR, Code.CANCELLED.value))
            await asyncio.shield(_failed(call, rt, err))
            raise
        except Exception as exc:  # noqa: BLE001 - the one error boundary (SI-9)
            log.exception("unexpected error in execution %s", call.execution_id)
            err = CapabilityError(Code.EXECUTION_FAILED, reason=f"unexpected {type(exc).__name__}")
            span.set_status(Status(StatusCode.ERROR, Code.EXECUTION_FAILED.value))
            return await _failed(call, rt, err)


def _duration(call: Call, rt: Runtime) -> float:
    return rt.monotonic() - call.started if call.started else 0.0


async def _completed(call: Call, rt: Runtime) -> gateway_pb2.ExecutionResult:
    result = envelope.completed(
        execution_id=call.execution_id,
        capability_id=call.capability_id,
        attempts=call.attempts,
        duration_s=_duration(call, rt),
        output_json=dumps(call.output).decode(),
        revision=call.snapshot.revision,
        approval_id=call.approval_id if call.approval is not None else "",
    )
    rt.audit.emit(build(Event.COMPLETED, call, rt.wall(), outcome="completed", attempt=call.attempts,
                        duration_ms=round(_duration(call, rt) * 1000, 3)))
    await _record_outcome(call, rt, result)
    return result


async def _failed(call: Call, rt: Runtime, err: CapabilityError) -> gateway_pb2.ExecutionResult:
    result = envelope.failure(
        err,
        execution_id=call.execution_id,
        capability_id=call.capability_id,
        attempts=call.attempts,
        duration_s=_duration(call, rt),
        state=call.state,
        revision=call.snapshot.revision,
        approval_id=call.approval_id if call.approval is not None else "",
    )
    event = err.spec.event
    fields: dict[str, object] = {"code": err.code.value, "stage": err.spec.stage,
                                 "outcome": err.spec.kind.value, "attempt": call.attempts,
                                 "duration_ms": round(_duration(call, rt) * 1000, 3)}
    if err.reason:
        fields["reason"] = err.reason  # the true reason, even when the caller saw not-found
    if err.executed:
        fields["executed_before_failure"] = True
    if event is Event.DENIED:
        fields["stances"] = stances(call)
    if call.execution_id:
        rt.audit.emit(build(event, call, rt.wall(), **fields))
    await _record_outcome(call, rt, result)
    return result


async def _record_outcome(call: Call, rt: Runtime, result: gateway_pb2.ExecutionResult) -> None:
    """Store the envelope where a repeat must find it: the idempotency journal, the approval."""
    if call.idempotency_scope is not None and rt.idempotency is not None:
        try:
            if call.state == types_pb2.EXECUTION_STATE_NOT_STARTED:
                await rt.idempotency.release(call.idempotency_scope)
            else:
                await rt.idempotency.complete(call.idempotency_scope, result.SerializeToString())
        except CapabilityError:
            log.warning("could not record idempotent outcome of %s", call.execution_id)
    record = call.approval
    if record is not None and rt.approvals is not None and record.status == "consumed":
        code = result.failed.code or result.cancelled.code
        try:
            await rt.approvals.finish(
                record.id, envelope=result.SerializeToString(),
                outcome_code=types_pb2.ErrorCode.Name(code) if code else None,
                resumed_execution_id=call.execution_id,
            )
        except CapabilityError:
            log.warning("could not record the outcome of approval %s", record.id)
