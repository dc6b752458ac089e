"""Approval records and errors as `capgate.v1` messages.

`to_proto` is the default view: the input appears only when asked (ApprovalAdmin) and then only
after the capability's `redact.approval_input` rules (DESIGN §12: what approvers see is redacted
server-side). The requester's view never carries the input; both views carry an edit's patch
after those rules (`shown_patch`).
"""

from __future__ import annotations

import math
from typing import Any, Final

import orjson
from google.protobuf.timestamp_pb2 import Timestamp

from capgate.v1 import types_pb2
from gateway.errors import CapabilityError
from gateway.model import Actor
from gateway.state.approvals.records import ApprovalRecord
from gateway.values import jsonpatch
from gateway.values.redact import Redactor


def _timestamp(seconds: float) -> Timestamp:
    whole = math.floor(seconds)
    return Timestamp(seconds=whole, nanos=min(round((seconds - whole) * 1e9), 999_999_999))


def actor_to_proto(actor: Actor) -> types_pb2.Actor:
    return types_pb2.Actor(id=actor.id, issuer=actor.issuer, kind=actor.kind, roles=actor.roles)


def actor_from_proto(message: types_pb2.Actor) -> Actor:
    return Actor(
        id=message.id,
        issuer=message.issuer,
        kind=message.kind or "user",
        roles=tuple(message.roles),
    )


def status_name(record: ApprovalRecord) -> str:
    """The proto enum name of the record's status (`APPROVAL_STATUS_PENDING`, ...)."""
    return f"APPROVAL_STATUS_{record.status.value.upper()}"


MAX_DESCRIPTION: Final = 1000


def to_proto(
    record: ApprovalRecord,
    *,
    include_input: bool = False,
    redactor: Redactor | None = None,
    description: str = "",
) -> types_pb2.Approval:
    """The record as an `Approval` message; `input_json` only with `include_input`;
    `description` (the capability's, cut at 1,000 characters) and whom the requester acts for
    are for approvers too (ApprovalAdmin's view)."""
    message = types_pb2.Approval(
        id=record.id,
        capability_id=record.capability_id,
        status=status_name(record),
        reasons=record.reasons,
        message=record.message,
        created_at=_timestamp(record.created_at),
        expires_at=_timestamp(record.expires_at),
        requester=actor_to_proto(record.requester),
        decision_note=record.note,
        input_hash=record.input_hash,
        risk=record.risk,
        side_effect=record.side_effect,
        approvers=types_pb2.ApproverConstraint(roles=record.approver_roles),
        requesting_execution_id=record.requesting_execution_id,
        resumed_execution_id=record.resumed_execution_id,
        surface=record.surface,
        edited=record.edited,
        original_input_hash=record.original_input_hash,
        edited_by=actor_to_proto(record.edited_by) if record.edited_by else None,
        quorum=record.quorum,
        # Votes count for the current input only: an edit resets them (docs/approvals.md).
        approvals_received=len(record.votes),
        distinct_roles=record.distinct_roles,
        escalation_roles=record.escalation_roles,
    )
    if record.escalate_at is not None:
        message.escalate_at.CopyFrom(_timestamp(record.escalate_at))
    if record.escalated_at is not None:
        message.escalated_at.CopyFrom(_timestamp(record.escalated_at))
    if record.decided_at is not None:
        message.decided_at.CopyFrom(_timestamp(record.decided_at))
    if record.decided_by is not None:
        message.decided_by.CopyFrom(actor_to_proto(record.decided_by))
    if record.decided_via is not None:
        message.decided_via.CopyFrom(actor_to_proto(record.decided_via))
    if include_input:
        shown = redactor.apply(record.input) if redactor else record.input
        message.input_json = orjson.dumps(shown).decode()
        message.capability_description = description[:MAX_DESCRIPTION]
        message.requester_on_behalf_of = record.requester.on_behalf_of
        message.approved_by.extend(actor_to_proto(a) for a in record.votes)
    # Both views, the requester's too (ADR 0040): the patch, never the input.
    message.patch_json = shown_patch(record, redactor)
    return message


def shown_patch(record: ApprovalRecord, redactor: Redactor | None) -> str:
    """`patch_json` for a view: with the capability's rules (`redactor`) as they read; without
    them (the capability is no longer configured) every value shows as `REDACTED`, so a view
    never shows a value a rule would have hidden."""
    if not record.edited:
        return ""
    if redactor is not None:
        return patch_json(record, redactor)
    ops = jsonpatch.diff(record.original_input, record.input)
    for op in ops:
        if "value" in op:
            op["value"] = REDACTED
    return orjson.dumps(ops).decode()


def patch_json(record: ApprovalRecord, redactor: Redactor | None) -> str:
    """The record's edit as RFC 6902 JSON Patch text, as approvers and the requester may see it:
    the operations from the requester's input to the edited one, each value written as it reads
    in the edited input after the capability's `redact.approval_input` rules; a change at or
    under a redacted path shows as one `replace` of that path with `REDACTED` (`shown_ops`).
    Empty unless edited."""
    if not record.edited:
        return ""
    ops = jsonpatch.diff(record.original_input, record.input)
    if redactor:
        ops = shown_ops(ops, record.input, redactor)
    return orjson.dumps(ops).decode()


def shown_ops(ops: list[dict[str, Any]], after: Any, redactor: Redactor) -> list[dict[str, Any]]:
    """`ops` as approvers may see them: every operation at or under a redacted path becomes one
    `replace` at the rule's matched path with the value `REDACTED` (its keys below stay unsaid,
    an object's keys may be secrets), once; other values as they read in `after` redacted."""
    shown = redactor.apply(after)
    out: list[dict[str, Any]] = []
    hidden: set[str] = set()
    for op in ops:
        at = redactor.hidden_at(jsonpatch.tokens(op["path"]))
        if at is not None:
            path = jsonpatch.pointer([*at])
            if path not in hidden:
                hidden.add(path)
                out.append({"op": "replace", "path": path, "value": REDACTED})
            continue
        value = {"value": jsonpatch.lookup(shown, op["path"], default=REDACTED)}
        out.append({**op, **value} if "value" in op else op)
    return out


REDACTED: Final = "REDACTED"


def error_to_proto(error: CapabilityError) -> types_pb2.CapabilityError:
    """The public face of a governed failure: code, stage, public message, flags, issues.

    `reason` and `details` stay server-side (SI-9).
    """
    return types_pb2.CapabilityError(
        code=types_pb2.ErrorCode.Value(f"ERROR_CODE_{error.code.value}"),
        stage=error.spec.stage,
        message=error.public_message,
        retryable=error.is_retryable,
        expose_to_model=error.exposed,
        issues=[types_pb2.Issue(path=i.path, message=i.message) for i in error.issues],
        executed_before_failure=error.executed,
    )
