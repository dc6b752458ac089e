"""`DecideApproval` with `edited_input_json`: approve with edits (docs/approvals.md "Edits",
ADR 0040).

An edit is a new call in the requester's name, so nothing is stored before it is governed as
one. In order: the request (an edit only approves: INPUT_INVALID otherwise); who the approver
is (not found, FORBIDDEN, APPROVAL_SELF_APPROVAL — before anything about the record or the edit
is said, as for every decision); the record's state and the hash the approver saw (answered as
the store answers a plain decision); the capability allows edits (`approval.editable`, else
FORBIDDEN); the edited input governed as the requester's call (`pipeline.edits.govern_edit`:
its refusal is the answer); the approval the edited call needs (the approver must hold its
roles, and it must not need more approvers than the record collects: FORBIDDEN). Only then does
the store decide, atomically against the hash the approver saw: an edit landing meanwhile
makes this one APPROVAL_INPUT_MISMATCH.
"""

from __future__ import annotations

from collections.abc import Callable

import orjson

from capgate.v1 import admin_pb2
from gateway.errors import CapabilityError, Code, InputIssue
from gateway.model import Actor
from gateway.pipeline.call import Runtime
from gateway.pipeline.edits import GovernedEdit, govern_edit
from gateway.pipeline.snapshot import Snapshot
from gateway.pipeline.stages.approval import GateRequirement
from gateway.state.approvals.failures import not_found
from gateway.state.approvals.records import ApprovalRecord, Status
from gateway.state.approvals.store import EditedInput, RedisApprovalStore
from gateway.values import jsonpatch
from gateway.values.redact import Redactor

NOT_EDITABLE = "This capability's approvals cannot be edited."
NOT_COVERED = "The edited input needs an approval this approver cannot give."
HIDDEN_EDITED = "An edit cannot change a value hidden from approvers."


def _only_approve() -> CapabilityError:
    return CapabilityError(
        Code.INPUT_INVALID,
        issues=(InputIssue("edited_input_json", "an edited input can only be approved"),),
        reason="edited_input_json with a rejection",
    )


def _eligible(approver: Actor, record: ApprovalRecord, now: float) -> bool:
    """As the store decides it (scripts.DECIDE): every approver role, or, once the approval is
    escalated (or due), every escalation role."""
    held = set(approver.roles)
    if set(record.approver_roles) <= held:
        return True
    due = record.escalated_at is not None or (
        record.escalate_at is not None and now >= record.escalate_at
    )
    return due and bool(record.escalation_roles) and set(record.escalation_roles) <= held


def _check_approver(
    approver: Actor, record: ApprovalRecord, *, now: float, reject_self: bool
) -> None:
    """FORBIDDEN, then APPROVAL_SELF_APPROVAL: the store's order (scripts.DECIDE)."""
    if approver.anonymous or not _eligible(approver, record, now):
        raise CapabilityError(Code.FORBIDDEN, reason="approver lacks a required role")
    if reject_self and approver.identity == record.requester.identity:
        raise CapabilityError(Code.APPROVAL_SELF_APPROVAL, reason="approver is the requester")


def _check_covered(governed: GovernedEdit, record: ApprovalRecord, approver: Actor) -> None:
    """The edited call's approval is one this decision can give: the approver holds every role
    it needs, it needs no more approvers (quorum, distinct roles) than the record collects, and,
    when others still vote after this approver, no role the record does not ask of them. An
    edit cannot raise what the record asks of approvers; a stricter call is the requester's to
    make (ADR 0040)."""
    need = governed.requirement
    if need is None:
        return  # the edited call would run without an approval: this one suffices
    roles = set(need.roles)
    why = ""
    if not roles <= set(approver.roles):
        why = "approver lacks a role the edited input needs"
    elif need.quorum > record.quorum:
        why = "the edited input needs a larger quorum"
    elif not set(need.distinct_roles) <= set(record.distinct_roles):
        why = "the edited input needs other distinct roles"
    elif record.quorum > 1 and not roles <= set(record.approver_roles):
        why = "the edited input needs roles the other approvers are not asked for"
    elif _stricter_escalation(need, record):
        why = "the edited input escalates later or to other roles"
    if why:
        raise CapabilityError(Code.FORBIDDEN, message=NOT_COVERED, reason=why)


def unredacted(record: ApprovalRecord, redactor: Redactor, submitted: bytes) -> bytes:
    """The edited input an approver means: they edit what they were shown (the current input
    after `redact.approval_input`), so the patch from that view to what they sent is applied
    to the real input, and every value a rule hides stays as it is. An operation at, under or
    above a redacted path is refused (INPUT_INVALID naming its path). A body that is not JSON
    goes on as sent, to be refused as the requester's call would be."""
    try:
        edited = orjson.loads(submitted)
    except orjson.JSONDecodeError:
        return submitted
    patch = jsonpatch.diff(redactor.apply(record.input), edited)
    for op in patch:
        if redactor.touches_hidden(jsonpatch.tokens(op["path"])):
            raise CapabilityError(
                Code.INPUT_INVALID,
                message=HIDDEN_EDITED,
                issues=(InputIssue(op["path"] or "/", "a value hidden from approvers"),),
                reason="edit touches a redacted path",
            )
    return orjson.dumps(jsonpatch.apply(record.input, patch))


def _stricter_escalation(need: GateRequirement, record: ApprovalRecord) -> bool:
    """The edited call's escalation asks more than the record's: it never escalates where the
    record does, escalates later, or to roles the record does not ask once escalated (the
    record's escalation would let someone decide whom the edited call does not allow)."""
    if record.escalate_at is None:
        return False  # the record never escalates: no escalation asks more
    if need.escalate_after_s is None:
        return True
    if record.created_at + need.escalate_after_s > record.escalate_at + 1e-3:
        return True
    return not set(need.escalation_roles) <= set(record.escalation_roles)


def _own_edit(record: ApprovalRecord, approver: Actor) -> bool:
    """This approver's edit is the pending input: a retry after a lost reply, which the store
    answers with the record when the edit is the same (and with a mismatch otherwise)."""
    return record.edited_by is not None and record.edited_by.identity == approver.identity


class EditDecisions:
    """Decides approvals with an edited input over the current snapshot and runtime."""

    def __init__(self, snapshot: Callable[[], Snapshot], runtime: Runtime) -> None:
        self._snapshot = snapshot
        self._rt = runtime

    async def decide(
        self,
        store: RedisApprovalStore,
        request: admin_pb2.DecideApprovalRequest,
        *,
        approver: Actor,
        via: Actor | None,
    ) -> ApprovalRecord:
        """The decided record, or the refusal (`CapabilityError`); nothing is stored unless
        the edit passed every check."""
        if request.verdict != admin_pb2.VERDICT_APPROVE:
            raise _only_approve()
        record = await store.get(request.approval_id)
        if record is None:
            raise not_found()
        reject_self = store.settings.reject_self_approval
        _check_approver(approver, record, now=self._rt.wall(), reject_self=reject_self)
        edit: EditedInput | None = None
        if record.status is Status.PENDING:
            if request.input_hash != record.input_hash and not _own_edit(record, approver):
                # Another approver's edit landed since this one saw the input (SI-5).
                raise CapabilityError(Code.APPROVAL_INPUT_MISMATCH, reason="decide refused")
            edit = await self._governed(record, request, approver)
        # Not pending: the store answers as for a plain decision (expired, already decided, or
        # the record again for this approver's repeat after a lost reply).
        return await store.decide(
            request.approval_id,
            approve=True,
            approver=approver,
            via=via,
            note=request.note,
            input_hash=request.input_hash,
            edit=edit,
        )

    async def _governed(
        self, record: ApprovalRecord, request: admin_pb2.DecideApprovalRequest, approver: Actor
    ) -> EditedInput | None:
        """The edit to store (None: the edited input is the one the approver saw, a plain
        approval)."""
        snapshot = self._snapshot()
        prepared = snapshot.capabilities.get(record.capability_id)
        if prepared is None or not prepared.capability.approval.editable:
            raise CapabilityError(Code.FORBIDDEN, message=NOT_EDITABLE, reason="not editable")
        body = request.edited_input_json
        if prepared.approval_redactor:
            body = unredacted(record, prepared.approval_redactor, body)
        governed = await govern_edit(snapshot, self._rt, record, body)
        _check_covered(governed, record, approver)
        if governed.input_hash == request.input_hash:
            return None
        return EditedInput(input=governed.input, input_hash=governed.input_hash)
