"""Stage 8 — approval gate (SI-4, SI-5, SI-12).

Invoke: when policies combined to require-approval or the capability declares
`approval.required`, bind the canonical input hash to a record in the approval store and
suspend: `Suspended(record)`, which the runner turns into the `approval_required` envelope
and `capability.approval_requested` (the execution's terminal event). Resume enters through
`load_approval` and `consume_approval` instead (seed 001 "Resumption", DESIGN §12).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from gateway.errors import CapabilityError, Code
from gateway.pipeline.call import Call, Runtime
from gateway.pipeline.stages import Replayed, Suspended
from gateway.pipeline.stages.controls import journal_first
from gateway.pipeline.stages.grants import cover as cover_with_grant
from gateway.pipeline.stages.inline import decide_inline
from gateway.state.approvals.records import ApprovalRecord, Status
from gateway.telemetry import child_span, current_traceparent
from gateway.values.canonical import input_hash

_APPROVAL_MESSAGE = "This call needs human approval before it can run."


@dataclass(frozen=True, slots=True)
class GateRequirement:
    """What stage 8 asks of approvers: the capability's `approval` block merged with the
    policies' (and hooks' and budgets') requirement. Roles are the union (none: the default
    approver role), the expiry the earliest (none: the default), `grantable` false if any part
    says so, `quorum` the largest (and at least one approver per distinct role), distinct
    roles the union. Escalation never loosens a part without one: `escalate_after_s` is the
    latest of the parts that declare one, the escalation roles the union of theirs and of the
    approver roles of every part that declares none."""

    reasons: tuple[str, ...]
    roles: tuple[str, ...]
    expires_in_s: float
    message: str
    grantable: bool
    quorum: int
    distinct_roles: tuple[str, ...]
    escalate_after_s: float | None
    escalation_roles: tuple[str, ...]


def gate_requirement(call: Call) -> GateRequirement:
    """The merged requirement of a call that stage 8 gates (DESIGN §12)."""
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
    grantable, quorum = spec.grantable, spec.quorum
    distinct, escalation = set(spec.distinct_roles), set(spec.escalation_roles)
    escalations = [] if spec.escalate_after_s is None else [spec.escalate_after_s]
    default = settings.default_approver_role
    floor: set[str] = set()  # the approver roles of the parts that declare no escalation
    if spec.required and spec.escalate_after_s is None:
        floor.update(spec.roles or (default,))
    req = call.requirement
    if req is not None:
        reasons.extend(r for r in req.reasons if r not in reasons)
        roles.update(req.roles)
        if req.expires_in is not None:
            expiries.append(req.expires_in.total_seconds())
        grantable, quorum = grantable and req.grantable, max(quorum, req.quorum)
        distinct.update(req.distinct_roles)
        escalation.update(req.escalation_roles)
        if req.escalate_after is not None:
            escalations.append(req.escalate_after.total_seconds())
        else:
            floor.update(req.roles or (default,))
    if escalations:
        escalation |= floor
    else:
        escalation = set()
    if not roles:
        roles.add(settings.default_approver_role)
    expires = min(expiries) if expiries else settings.default_expires_in_s
    message = call.evaluation.message if call.evaluation and call.evaluation.message else None
    return GateRequirement(
        reasons=tuple(reasons),
        roles=tuple(sorted(roles)),
        expires_in_s=expires,
        message=message or _APPROVAL_MESSAGE,
        grantable=grantable,
        quorum=max(quorum, len(distinct)),
        distinct_roles=tuple(sorted(distinct)),
        escalate_after_s=max(escalations, default=None),
        escalation_roles=tuple(sorted(escalation)),
    )


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
    need = gate_requirement(call)
    # A keyed repeat racing its own first call asks nobody, inline or not, and takes no grant
    # use: the journal answers first (ADR 0034, ADR 0038). A budget that deferred to this gate
    # read the key a moment ago already.
    replay = None if call.limits_deferred else await journal_first(call, rt)
    if replay is not None:
        return replay
    if await cover_with_grant(call, rt, need):
        return None  # a standing grant stood in (ADR 0038): stage 9 on, as the same actor
    digest = gate_refusals(call, rt)
    now = rt.wall()
    record = ApprovalRecord(
        id=rt.new_id(),
        capability_id=capability.id,
        capability_digest=call.prepared.digest,
        surface=call.surface,
        requester=call.actor,
        input=call.input,
        input_hash=digest,
        reasons=need.reasons,
        types=("human",),
        risk=capability.risk,
        side_effect=capability.side_effect,
        approver_roles=need.roles,
        message=need.message,
        status=Status.PENDING,
        created_at=now,
        expires_at=now + need.expires_in_s,
        requesting_execution_id=call.execution_id,
        traceparent=current_traceparent(call.traceparent),  # Resume links its trace to this
        idempotency_key=call.idempotency_key,  # the Resume executes under it (ADR 0034)
        request_hash=call.request_hash,  # and a repeat of the Invoke matches by either hash
        quorum=need.quorum,
        distinct_roles=need.distinct_roles,
        escalate_at=None if need.escalate_after_s is None else now + need.escalate_after_s,
        escalation_roles=need.escalation_roles,
    )
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
