"""Stage 8, inline mode (issue 4 item 4): the capability names an upstream implementing
`capgate.v1.Approver`, called synchronously within the call's deadline. No answer, an error, a
refusal, an approver who is the requester (SI-4) or who lacks a required role, or a requirement
with a quorum above one (one answer is one approver): rejected — fail closed. An approval
granted inline binds this execution only and is never stored for reuse."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import grpc

from capgate.v1 import procedure_pb2
from gateway.errors import CapabilityError, Code, Event
from gateway.pipeline.call import Call, Runtime
from gateway.pipeline.events import build
from gateway.pipeline.stages.controls import compute_deadline
from gateway.state.approvals.convert import actor_from_proto, to_proto
from gateway.state.approvals.records import ApprovalRecord, Status
from gateway.values.jsonvalue import dumps

log = logging.getLogger("capgate.approvals.inline")


def _rejected(reason: str) -> CapabilityError:
    return CapabilityError(Code.APPROVAL_REJECTED, reason=f"inline approver: {reason}")


async def decide_inline(call: Call, rt: Runtime, record: ApprovalRecord, stub: Any) -> None:
    assert call.prepared is not None and call.actor is not None
    call.approval_id = record.id
    rt.audit.emit(
        build(
            Event.APPROVAL_REQUESTED,
            call,
            rt.wall(),
            approval_id=record.id,
            reasons=list(record.reasons),
            inline=True,
        )
    )
    view = call.prepared.approval_redactor.apply(record.input)
    request = procedure_pb2.ApproverDecideRequest(
        approval=to_proto(record, include_input=False, redactor=None),
        input_json=dumps(view).decode(),
    )
    timeout = max(compute_deadline(call, rt) - rt.monotonic(), 0.0)
    try:
        answer = await stub.Decide(request, timeout=timeout)
    except grpc.aio.AioRpcError as exc:
        rt.audit.emit(
            build(
                Event.REJECTED,
                call,
                rt.wall(),
                approval_id=record.id,
                reason=f"approver status {exc.code().name}",
            )
        )
        raise _rejected(f"status {exc.code().name}") from None
    if not isinstance(answer, procedure_pb2.ApproverDecideResponse):
        # grpc.aio logs a response it cannot parse and hands back None: no usable answer.
        reason = "approver answer is not an ApproverDecideResponse"
        rt.audit.emit(build(Event.REJECTED, call, rt.wall(), approval_id=record.id, reason=reason))
        raise _rejected(reason)
    approver = actor_from_proto(answer.approver) if answer.HasField("approver") else None
    if not answer.approved or approver is None or not approver.id:
        reason = "refused" if not answer.approved else "no approver identity"
    elif approver.identity == call.actor.identity:
        reason = "self-approval"  # SI-4
    elif not set(record.approver_roles) <= set(approver.roles):
        reason = "approver lacks a required role"
    elif record.quorum > 1:
        # One answer is one approver: a quorum (docs/approvals.md) is never met inline.
        reason = f"one approver cannot make a quorum of {record.quorum}"
    else:
        reason = ""
    if reason or approver is None:
        rt.audit.emit(build(Event.REJECTED, call, rt.wall(), approval_id=record.id, reason=reason))
        raise _rejected(reason)
    call.approval = dataclasses.replace(
        record,
        status=Status.APPROVED,
        decided_by=approver,
        decided_at=rt.wall(),
        note=answer.note,
    )
    call.input_hash = record.input_hash
    rt.audit.emit(
        build(
            Event.APPROVED,
            call,
            rt.wall(),
            approval_id=record.id,
            inline=True,
            approver_id=approver.id,
        )
    )
