"""Stage 10 — controls: the deadline, the idempotency claim (§12: after stage 9, before stage
10's event) leased until that deadline plus a margin, and `capability.started` (awaited in
strict audit mode: AUDIT_UNAVAILABLE)."""

from __future__ import annotations

from capgate.v1 import gateway_pb2, types_pb2
from gateway.audit.events import build, stances
from gateway.audit.sinks import AuditUnavailable
from gateway.call import Call, Runtime
from gateway.canonical import input_hash
from gateway.errors import CapabilityError, Code, Event
from gateway.idempotency import LEASE_MARGIN_S, outcome_unknown_error
from gateway.stages import Replayed


def compute_deadline(call: Call, rt: Runtime) -> float:
    """min(caller deadline - margin, capability timeout, else the default); a declared
    capability timeout is not capped by the default (§12)."""
    assert call.prepared is not None
    defaults = call.snapshot.settings.defaults
    timeout = call.prepared.capability.timeout_s or defaults.timeout_s
    now = rt.monotonic()
    deadline = now + timeout
    if call.caller_remaining_s is not None:
        caller = call.started + call.caller_remaining_s - defaults.deadline_margin_s
        deadline = min(deadline, caller)
    return deadline


async def attach_controls(call: Call, rt: Runtime) -> Replayed | None:
    assert call.prepared is not None and call.actor is not None
    store = rt.idempotency
    call.deadline = compute_deadline(call, rt)
    if call.idempotency_key and store is not None:
        scope = (
            call.actor.issuer,
            call.actor.id,
            call.surface,
            call.prepared.capability.id,
            call.idempotency_key,
        )
        digest = call.input_hash or input_hash(call.input)
        # The claim's lease ends with this execution's deadline, plus the time to record its
        # outcome: a claim its holder never finished (a crash) answers "unknown", not "retry".
        lease_s = call.deadline - rt.monotonic() + LEASE_MARGIN_S
        claim = await store.claim(scope, digest, call.execution_id, lease_s=lease_s)
        if claim.outcome_unknown:
            call.state = types_pb2.EXECUTION_STATE_UNKNOWN  # the holder may have run it
            raise outcome_unknown_error()
        if claim.replay is not None:
            # Same key, same input, finished: hand back the recorded (redacted) envelope.
            stored = gateway_pb2.ExecutionResult.FromString(claim.replay)
            return Replayed(stored, source="idempotency")
        call.idempotency_scope = scope
    if call.deadline <= rt.monotonic():
        raise CapabilityError(Code.TIMEOUT, reason="no time left before the upstream call")
    event = build(Event.STARTED, call, rt.wall(), stances=stances(call))  # each policy's stance
    if call.snapshot.settings.audit.strict:
        try:
            await rt.audit.emit_strict(event)
        except AuditUnavailable:
            raise CapabilityError(
                Code.AUDIT_UNAVAILABLE, reason="strict audit write failed"
            ) from None
    else:
        rt.audit.emit(event)
    return None
