"""Approve with edits: the edited input governed as the requester's call (ADR 0040).

An approver who changes the input does not approve the requester's call: they approve another
one, made in the requester's name. `govern_edit` runs that call through what `Check` runs
(`discovery.check`, ADR 0035) — stages 3-7 with the requester as the actor on the requester's
surface: exposure and input-free hides, schema validation, the actor check, pre-hooks as a dry
run, the invocation policies and the hooks' asks, the limits peeked without spending (an
overrun of a `require-approval` budget the record does not name refused as RATE_LIMITED) — and
answers with the input Resume would execute and the approval that call would need, or raises
the refusal Invoke would answer (a concealed capability as the not-found answer, SI-8).
`mark_edited` puts the edit on a resumed call's envelope.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from capgate.v1 import gateway_pb2
from gateway.errors import CapabilityError, Code
from gateway.pipeline.call import Call, Runtime
from gateway.pipeline.envelope import ERROR_CODES, NOT_FOUND
from gateway.pipeline.stages.actor import check_actor
from gateway.pipeline.stages.approval import GateRequirement, gate_requirement
from gateway.pipeline.stages.exposure import check_exposure
from gateway.pipeline.stages.hooks import merge_hook_asks, run_pre_hooks
from gateway.pipeline.stages.limits import budget_reason, peek_limits
from gateway.pipeline.stages.policies import (
    evaluate_invocation_policies,
    hide_before_validation,
)
from gateway.pipeline.stages.resolve import resolve_capability
from gateway.pipeline.stages.validate import validate_input
from gateway.state.approvals.convert import shown_patch
from gateway.values.canonical import input_hash

if TYPE_CHECKING:
    from gateway.pipeline.snapshot import Snapshot
    from gateway.state.approvals.records import ApprovalRecord

# Check's stages 3-7, in Invoke's order (discovery.check); nothing here spends or stores.
_VALIDATION = (
    resolve_capability,
    check_exposure,
    hide_before_validation,  # bad input to a hidden capability is not found, as on Invoke
    validate_input,
    check_actor,
)
_GOVERNANCE = (
    run_pre_hooks,  # dry run: told that nothing will run (docs/hooks.md)
    evaluate_invocation_policies,
    merge_hook_asks,
    peek_limits,  # read, never spent
)


_NOT_FOUND = frozenset(ERROR_CODES[c] for c in NOT_FOUND)


@dataclass(frozen=True, slots=True)
class GovernedEdit:
    """The edited call as Resume will execute it: `input` after the pre-hooks (what is stored
    and run), its approval hash, and the approval it needs (None: it would run without one)."""

    input: Any
    input_hash: str
    requirement: GateRequirement | None


async def govern_edit(
    snapshot: Snapshot, rt: Runtime, record: ApprovalRecord, edited_json: bytes
) -> GovernedEdit:
    """The edited input of `record` governed as its requester's call, or the refusal that call
    would get (`CapabilityError`: INPUT_INVALID, INPUT_TOO_LARGE, CAPABILITY_NOT_FOUND for a
    missing or concealed capability, POLICY_DENIED, POLICY_FAILED, HOOK_DENIED, HOOK_FAILED,
    RATE_LIMITED, APPROVAL_UNSERIALIZABLE_INPUT; APPROVAL_INPUT_MISMATCH when the capability
    changed since the request, which its Resume would refuse too)."""
    call = Call(
        snapshot=snapshot,
        surface=record.surface,
        actor=record.requester,
        capability_id=record.capability_id,
        raw_input=edited_json,
        dry_run=True,
    )
    for stage in _VALIDATION:
        await stage(call, rt)
    assert call.prepared is not None
    if call.prepared.digest != record.capability_digest:
        raise CapabilityError(
            Code.APPROVAL_INPUT_MISMATCH, reason="capability changed since the approval (digest)"
        )
    for stage in _GOVERNANCE:
        await stage(call, rt)
    _refuse_unapproved_overrun(call, record)
    needs = call.requirement is not None or call.prepared.capability.approval.required
    return GovernedEdit(
        input=call.input,
        input_hash=input_hash(call.input),  # APPROVAL_UNSERIALIZABLE_INPUT, as stage 8 would
        requirement=gate_requirement(call) if needs else None,
    )


def _refuse_unapproved_overrun(call: Call, record: ApprovalRecord) -> None:
    """RATE_LIMITED, as a `deny` budget's overrun: the edited call overruns a `require-approval`
    budget the record's approval does not name. The record's reasons stay as requested, so its
    Resume would refuse the overrun; the edit is refused as that call would be."""
    assert call.prepared is not None
    asked = call.requirement.reasons if call.requirement is not None else ()
    budgets = {budget_reason(lim.spec.name) for lim in call.prepared.limits if lim.spec.budget}
    over = [r for r in asked if r in budgets and r not in record.reasons]
    if over:
        raise CapabilityError(Code.RATE_LIMITED, reason="edit overruns an unapproved budget")


def mark_edited(result: gateway_pb2.ExecutionResult, call: Call) -> None:
    """A resumed call whose approver edited the input says so on its envelope, with the patch
    after the capability's `redact.approval_input` rules (the requester sees what changed,
    never a redacted value in clear). The envelope a repeated Resume replays is this one."""
    record = call.approval
    if record is None or not record.edited or result.failed.code in _NOT_FOUND:
        return  # a not-found answer is the same whatever it concealed (SI-8)
    result.edited = True
    redactor = call.prepared.approval_redactor if call.prepared is not None else None
    result.patch_json = shown_patch(record, redactor)
