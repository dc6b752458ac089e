"""Stage 8 — approval gate (SI-4, SI-5, SI-12).

Invoke: when policies combined to require-approval or the capability declares
`approval.required`, bind the canonical input hash to a record in the approval store and
suspend: `Suspended(record)`, which the runner turns into the `approval_required` envelope
and `capability.approval_requested` (the execution's terminal event). Resume enters through
`load_approval` and `consume_approval` instead (seed 001 "Resumption", DESIGN §12).
"""

from __future__ import annotations

import asyncio

from gateway.errors import CapabilityError, Code
from gateway.pipeline.call import Call, Runtime
from gateway.pipeline.stages import Replayed, Suspended
from gateway.pipeline.stages.controls import journal_first
from gateway.pipeline.stages.inline import decide_inline
from gateway.state.approvals.records import ApprovalRecord, Status
from gateway.telemetry import child_span, current_traceparent
from gateway.values.canonical import input_hash

_APPROVAL_MESSAGE = "This call needs human approval before it can run."


def _requirement(call: Call) -> tuple[tuple[str, ...], tuple[str, ...], float, str]:
    """(reasons, roles, expires_in_s, message) merged from policies and the capability."""
    assert call.prepared is not None
    spec = call.prepared.capability.approval
    settings = call.snapshot.settings.approvals
    reasons: list[str] = []
    roles: set[str] = set(spec.roles)
    expiries: list[float] = []
    if spec.required:
        reasons.append(spec.reason or "The capability requires approval.")
        if spec.expires_in_s:
            expiries.append(spec.expires_in_s)
    req = call.requirement
    if req is not None:
        reasons.extend(r for r in req.reasons if r not in reasons)
        roles.update(req.roles)
        if req.expires_in is not None:
            expiries.append(req.expires_in.total_seconds())
    if not roles:
        roles.add(settings.default_approver_role)
    expires = min(expiries) if expiries else settings.default_expires_in_s
    message = call.evaluation.message if call.evaluation and call.evaluation.message else None
    return tuple(reasons), tuple(sorted(roles)), expires, message or _APPROVAL_MESSAGE


def gate_refusals(call: Call, rt: Runtime) -> str:
    """Stage 8's refusals of a call that would request an approval, in order: no approval
    store and no inline approver, an anonymous actor (DESIGN §12), an input without a canonical
    form (APPROVAL_UNSERIALIZABLE_INPUT). Returns the input's approval hash. `Check` runs the
    same refusals (ADR 0035), so the two cannot drift apart."""
    assert call.prepared is not None and call.actor is not None
    if rt.approvals is None and call.prepared.inline_approver is None:
        raise CapabilityError(
            Code.APPROVAL_UNAVAILABLE, retryable=False, reason="no approval store"
        )
    if call.actor.anonymous:
        raise CapabilityError(
            Code.UNAUTHENTICATED,
            message="Approval-gated calls need an authenticated actor.",
            reason="anonymous approval request",
        )
    return input_hash(call.input)


async def approval_gate(call: Call, rt: Runtime) -> Suspended | Replayed | None:
    assert call.prepared is not None and call.actor is not None
    if call.approval is not None:
        return None  # Resume: the approval was consumed in consume_approval
    capability = call.prepared.capability
    if call.requirement is None and not capability.approval.required:
        return None
    store = rt.approvals
    inline = call.prepared.inline_approver
    digest = gate_refusals(call, rt)
    reasons, roles, expires_in, message = _requirement(call)
    now = rt.wall()
    record = ApprovalRecord(
        id=rt.new_id(),
        capability_id=capability.id,
        capability_digest=call.prepared.digest,
        surface=call.surface,
        requester=call.actor,
        input=call.input,
        input_hash=digest,
        reasons=reasons,
        types=("human",),
        risk=capability.risk,
        side_effect=capability.side_effect,
        approver_roles=roles,
        message=message,
        status=Status.PENDING,
        created_at=now,
        expires_at=now + expires_in,
        requesting_execution_id=call.execution_id,
        traceparent=current_traceparent(call.traceparent),  # Resume links its trace to this
        idempotency_key=call.idempotency_key,  # the Resume executes under it (ADR 0034)
        request_hash=call.request_hash,  # and a repeat of the Invoke matches by either hash
    )
    # A keyed repeat racing its own first call asks nobody, inline or not: the journal answers
    # (ADR 0034). A budget that deferred to this gate read the key a moment ago already.
    replay = None if call.limits_deferred else await journal_first(call, rt)
    if replay is not None:
        return replay
    if inline is not None:
        await decide_inline(call, rt, record, inline)
        return None
    with child_span("agent.approval_request") as span:
        # Shielded: a caller's cancel while the record is being stored lets the store's answer
        # arrive anyway, and the runner withdraws a record nobody was told of (issue 25).
        creating = asyncio.ensure_future(store.create(record))
        call.approval_creating = (record, creating)
        record = await asyncio.shield(creating)
        call.approval_creating = None
        span.set_attribute("capgate.approval_id", record.id)
    call.approval_id = record.id
    return Suspended(record)
