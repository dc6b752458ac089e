"""The audit events of one execution, built from its `Call` (the pipeline's part of the
trail): the common fields, the input HMAC (computed once per input object), the policies'
stances, and the fields of failed, completed and replayed executions.

What an event may carry, and how caller-chosen strings are kept, is gateway/audit/events.py's
(SI-10): this module only reads a call through it. It sits in the pipeline because it reads the
pipeline's `Call`; the audit layer below knows nothing of calls (docs/architecture.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from capgate.v1 import types_pb2
from gateway.audit.events import (
    CALLER_KEYS,
    MACHINE_REASON,
    MAX_TEXT,
    STATES,
    caller_text,
    format_time,
    hasher_for,
    reason_of,
)
from gateway.errors import TABLE, CapabilityError, Code, Event

if TYPE_CHECKING:
    from capgate.v1 import gateway_pb2
    from gateway.pipeline.call import Call
    from policy import Evaluation


def _input_hmac(call: Call) -> tuple[str, str] | None:
    """The HMAC of the call's current input, computed once per input object."""
    value = call.input
    if value is None:
        return None
    if call.input_hmac is not None and call.input_hmac_of is value:
        return call.input_hmac
    hasher = hasher_for(call.snapshot.settings.audit)
    if hasher is None:
        return None
    try:
        digest = (hasher.digest(value), hasher.key_id)
    except TypeError:
        return None
    call.input_hmac, call.input_hmac_of = digest, value
    return digest


def _stance_list(ev: Evaluation | None, phase: str) -> list[dict[str, Any]]:
    if ev is None:
        return []
    return [
        {
            "policy": s.policy,
            "phase": phase,
            "mode": s.mode,
            "effect": None if s.effect is None else s.effect.name.lower().replace("_", "-"),
            "rule": s.rule,
            "error": caller_text(s.error) if s.error else None,
        }
        for s in ev.stances
    ]


def stances(call: Call) -> list[dict[str, Any]]:
    """Each evaluated policy's stance (effect None = abstained) of every phase that ran so far:
    the invocation phase (stage 7, or its re-evaluation on Resume) then the execution phase
    (stage 9), each marked with its `phase`; error text is bounded."""
    return _stance_list(call.evaluation, "invocation") + _stance_list(
        call.execution_evaluation, "execution"
    )


def build(name: str, call: Call, now: float, **fields: Any) -> dict[str, Any]:
    actor = call.actor
    event: dict[str, Any] = {
        "event": name,
        "event_id": f"{call.execution_id}:{name}:{call.attempts}",
        "time": format_time(now),
        "execution_id": call.execution_id,
        "capability_id": caller_text(call.capability_id),
        "surface": call.surface,
        "actor_id": caller_text(actor.id) if actor else None,
        "actor_issuer": caller_text(actor.issuer) if actor else None,
        "actor_kind": actor.kind if actor else None,
        "revision": call.snapshot.revision,
    }
    if call.correlation_id:
        event["correlation_id"] = caller_text(call.correlation_id)
    if call.approval_id:
        event["approval_id"] = caller_text(call.approval_id)
    if call.grant_id:  # a standing grant stood in for the approval (ADR 0038)
        event["grant_id"] = call.grant_id
        if call.grant_released:
            event["grant_released"] = True
    digest = _input_hmac(call)
    if digest is not None:
        event["input_hmac"], event["input_hmac_key_id"] = digest
    event["execution_state"] = STATES.get(call.state, "NOT_STARTED")
    if call.hook_calls:
        event["hooks"] = list(call.hook_calls)  # name, call, decision, duration, error (ADR 0027)
    if call.input_update is not None:
        event["input_update"] = call.input_update  # the hooks that changed it, both hashes
    event.update(fields)
    for key in CALLER_KEYS.intersection(fields):  # a stage passing a caller's string on
        value = fields[key]
        if isinstance(value, str):
            event[key] = caller_text(value)
    return event


def failure_fields(call: Call, err: CapabilityError, duration_ms: float) -> dict[str, Any]:
    """The fields of a terminal denied/failed/cancelled event."""
    fields: dict[str, Any] = {
        "code": err.code.value,
        "stage": err.spec.stage,
        "outcome": err.spec.kind.value,
        "attempt": call.attempts,
        "duration_ms": duration_ms,
    }
    reason = reason_of(err)
    if reason:
        fields["reason"] = reason  # the true reason, even when the caller saw not-found (SI-8)
    if err.concealed:
        fields["concealed"] = True
    if err.executed:
        fields["executed_before_failure"] = True
    if call.cache == "hit":  # the output came from the cache: nothing was sent (docs/cache.md)
        fields["cache"] = "hit"
    contract = err.details.get("contract_reason")
    if isinstance(contract, str) and MACHINE_REASON.fullmatch(contract):
        fields["contract_reason"] = contract
    if call.upstream_s:
        fields["upstream_ms"] = round(call.upstream_s * 1000, 3)
    fields["stances"] = stances(call)  # every terminal event: each stance of each phase run
    return fields


def completion_fields(call: Call, duration_ms: float) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "outcome": "completed",
        "attempt": call.attempts,
        "duration_ms": duration_ms,
    }
    if call.upstream_s:
        fields["upstream_ms"] = round(call.upstream_s * 1000, 3)
    if call.cache:
        fields["cache"] = call.cache  # hit | miss, capabilities with a cache (docs/cache.md)
    fields["stances"] = stances(call)
    return fields


def replay_event(
    call: Call, stored: gateway_pb2.ExecutionResult, source: str, now: float, duration_ms: float
) -> dict[str, Any]:
    """The terminal event of an execution answered by a stored envelope (an idempotent repeat,
    a repeated Resume): the event that envelope's outcome ends in (completed, or the error
    table's event for its code), marked `replayed` with `replay_of` (the execution that ran)
    and `replay_source`. `execution_state` and `executed_before_failure` are the stored
    outcome's — what the answer says about the effect; this execution sent nothing upstream."""
    kind = stored.WhichOneof("outcome")
    fields: dict[str, Any] = {
        "outcome": kind or "unknown",
        "attempt": call.attempts,
        "duration_ms": duration_ms,
        "replayed": True,
        "replay_of": caller_text(stored.execution_id),
        "replay_source": source,
        "execution_state": STATES.get(stored.execution_state, "UNKNOWN"),
    }
    name: str = Event.COMPLETED
    if kind in ("failed", "cancelled"):
        error = stored.failed if kind == "failed" else stored.cancelled
        try:
            code = Code(types_pb2.ErrorCode.Name(error.code).removeprefix("ERROR_CODE_"))
        except ValueError:  # stored by a build that knew a code this one does not
            name = Event.CANCELLED if kind == "cancelled" else Event.FAILED
            fields.update(code=f"ERROR_CODE_{error.code}", stage=error.stage[:MAX_TEXT])
        else:
            name = TABLE[code].event
            fields.update(code=code.value, stage=error.stage[:MAX_TEXT])
        if error.executed_before_failure:
            fields["executed_before_failure"] = True
    elif kind != "completed":
        name = Event.FAILED  # a stored envelope is always an outcome; anything else is a fault
    fields["stances"] = stances(call)
    return build(name, call, now, **fields)
