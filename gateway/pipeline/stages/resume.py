"""Stage 8 on Resume — load, verify and consume an approval (seed 001 "Resumption", §12).

Order of checks: the record exists, belongs to this (issuer, id) and this surface (otherwise a
concealed APPROVAL_NOT_FOUND, decided inside Redis before the record is read: `get_own`, SI-8);
a finished execution hands back its stored envelope (`Replayed`); the status
(pending, rejected, expired, consumed); the capability digest is unchanged; the stored input
still hashes to the approved hash (SI-5). Stages 3-7 then re-run on the stored input, and
`consume_approval` marks the record consumed atomically (SI-12) right before stage 9.
"""

from __future__ import annotations

from capgate.v1 import gateway_pb2, types_pb2
from gateway.errors import CapabilityError, Code, Event
from gateway.pipeline.call import Call, Runtime
from gateway.pipeline.events import build
from gateway.pipeline.stages import Replayed
from gateway.values.canonical import input_hash

_STATUS_CODES = {
    "pending": Code.APPROVAL_PENDING,
    "rejected": Code.APPROVAL_REJECTED,
    "expired": Code.APPROVAL_EXPIRED,
    "consumed": Code.APPROVAL_CONSUMED,
}


def _not_found() -> CapabilityError:
    return CapabilityError(Code.APPROVAL_NOT_FOUND, reason="unknown or not the requester's")


async def load_approval(call: Call, rt: Runtime) -> Replayed | None:
    store = rt.approvals
    actor = call.actor
    if store is None or actor is None:
        raise CapabilityError(Code.APPROVAL_NOT_FOUND, reason="no approval store")
    record = await store.get_own(call.approval_id, requester=actor, surface=call.surface)
    if record is None:
        raise _not_found()
    call.capability_id = record.capability_id
    # The requester's key binds the execution the approval allows (ADR 0034): claimed at stage
    # 10 as an Invoke's would be, forwarded upstream, replayed to a repeat.
    call.idempotency_key = record.idempotency_key
    call.request_hash = record.request_hash  # the requester's input, before pre-hooks
    if record.status == "executed" and record.outcome_envelope:
        # A repeated Resume by the requester returns the stored envelope (§12).
        stored = gateway_pb2.ExecutionResult.FromString(record.outcome_envelope)
        return Replayed(stored, source="approval")
    if record.status == "consumed":
        # Consumed but never finished: the effect is unknown and is never re-run (§12).
        call.state = types_pb2.EXECUTION_STATE_UNKNOWN
    if record.status in _STATUS_CODES:
        raise CapabilityError(_STATUS_CODES[record.status], reason=f"status {record.status}")
    if (rt.approvals.settings.reject_self_approval or record.quorum > 1) and any(
        a.identity == actor.identity for a in (record.decided_by, *record.votes) if a is not None
    ):
        # SI-4: the requester is never one of a quorum's approvers (nor, with
        # reject_self_approval, a single one), whichever vote was theirs.
        raise CapabilityError(Code.APPROVAL_SELF_APPROVAL, reason="approver is the requester")
    if record.expires_at <= rt.wall():
        raise CapabilityError(Code.APPROVAL_EXPIRED, reason="expired")
    call.approval = record
    return None


async def verify_input_hash(call: Call, rt: Runtime) -> None:
    """SI-5: the stored input must still hash to the approved hash (tampering shows here)."""
    assert call.approval is not None
    record = call.approval
    if input_hash(record.input) != record.input_hash:
        raise CapabilityError(Code.APPROVAL_INPUT_MISMATCH, reason="stored input hash mismatch")
    call.input_hash = record.input_hash


async def verify_capability_digest(call: Call, rt: Runtime) -> None:
    """After re-validation (stage 5): the capability must be the one approved (upstream,
    method, schema version). A schema change that makes the input invalid has already
    answered INPUT_INVALID; one that keeps it valid is still refused here (ADR 0007)."""
    assert call.prepared is not None and call.approval is not None
    if call.approval.capability_digest != call.prepared.digest:
        raise CapabilityError(
            Code.APPROVAL_INPUT_MISMATCH, reason="capability changed since the approval (digest)"
        )


async def consume_approval(call: Call, rt: Runtime) -> None:
    assert call.approval is not None and call.actor is not None
    # From here the record may be consumed by this execution before any reply says so (a reply
    # lost to the command timeout, a cancel, a dropped connection): a failure gives it back.
    call.consume_attempted = True
    try:
        record = await rt.approvals.consume(
            call.approval_id,
            requester=call.actor,
            surface=call.surface,
            execution_id=call.execution_id,
        )
    except CapabilityError as err:
        if err.code is not Code.APPROVAL_UNAVAILABLE:
            call.consume_attempted = False  # the script answered: it consumed nothing of ours
        raise
    call.approval = record
    rt.audit.emit(build(Event.APPROVAL_CONSUMED, call, rt.wall(), approval_id=record.id))
