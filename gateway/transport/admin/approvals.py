"""`ApprovalAdmin` — list, decide and watch approvals; served on admin listeners only (§12).

Deciding executes nothing: it moves one record from pending to approved or rejected. Governed
failures travel in the response's `error` field; gRPC statuses are kept for transport faults
(bad credentials → UNAUTHENTICATED, malformed request → INVALID_ARGUMENT, a trimmed watch
position → OUT_OF_RANGE so the client re-lists, the store down while streaming → UNAVAILABLE).

Who sees what: a caller sees the approvals it may decide — it holds every required role and,
with self-approval refused, is not the requester (SI-4) — unless it holds one of the listener's
`auditor_roles` or is an allow-listed inbox (`on_behalf_of`), which see every approval.
Standing grants' RPCs are `gateway.transport.admin.grants`'s (who sees and revokes which).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeAlias

import grpc

from capgate.v1 import admin_pb2, admin_pb2_grpc, types_pb2
from gateway.config.settings import Listener
from gateway.errors import CapabilityError, Code
from gateway.model import Actor
from gateway.pipeline.drain import Drain
from gateway.state.approvals.convert import actor_from_proto, error_to_proto, to_proto
from gateway.state.approvals.events import WatchGap
from gateway.state.approvals.records import ApprovalRecord, Status
from gateway.state.approvals.store import RedisApprovalStore
from gateway.transport.admin.edits import EditDecisions
from gateway.transport.admin.grants import GrantAdmin
from gateway.transport.auth.base import AuthenticationFailed

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]
Authenticate: TypeAlias = Callable[[Context], Actor | Awaitable[Actor]]
View: TypeAlias = Callable[[ApprovalRecord], types_pb2.Approval]

_STATUS_NAMES = {
    types_pb2.ApprovalStatus.Value(f"APPROVAL_STATUS_{s.value.upper()}"): s for s in Status
}


def _default_view(record: ApprovalRecord) -> types_pb2.Approval:
    # Without the capability's redaction rules at hand, show no input at all (§12).
    return to_proto(record, include_input=False, redactor=None)


def may_decide(actor: Actor, record: ApprovalRecord, *, reject_self: bool, now: float) -> bool:
    """As the store decides it (scripts.DECIDE): the actor holds every required role — or, once
    the approval is escalated or its `escalate_at` has come, every escalation role — and, when
    SI-4 applies (reject_self, or a quorum above one), is not the requester."""
    roles = set(actor.roles)
    due = record.escalated_at is not None or (
        record.escalate_at is not None and now >= record.escalate_at
    )
    escalated = due and bool(record.escalation_roles)
    if not (
        set(record.approver_roles) <= roles or (escalated and set(record.escalation_roles) <= roles)
    ):
        return False
    self_refused = reject_self or record.quorum > 1
    return not (self_refused and actor.identity == record.requester.identity)


class ApprovalAdminServicer(admin_pb2_grpc.ApprovalAdminServicer):  # type: ignore[misc]  # generated
    """ApprovalAdmin over a `RedisApprovalStore` (None: approvals are not configured)."""

    def __init__(
        self,
        store: RedisApprovalStore | None,
        *,
        authenticate: Authenticate,
        listener: Listener,
        view: View | None = None,
        drain: Drain | None = None,
        edits: EditDecisions | None = None,  # approve with edits (ADR 0040); None: refused
        grants: GrantAdmin | None = None,
    ) -> None:
        self._store = store
        self._edits = edits
        self._grants = grants
        # A shutdown ends watch streams with status OK before the grace period ends.
        self._drain = drain
        self._authenticate = authenticate
        self._listener = listener
        self._view = view or _default_view

    def _show(self, record: ApprovalRecord) -> types_pb2.Approval:
        """The view, plus whether the gateway refuses self-approval (so an inbox need not be
        told separately, and cannot be told wrong)."""
        message = self._view(record)
        message.self_approval_refused = self._reject_self()
        return message

    def _reject_self(self) -> bool:
        return self._store.settings.reject_self_approval if self._store else True

    async def _actor(self, context: Context) -> Actor:
        try:
            found = self._authenticate(context)
            actor = await found if inspect.isawaitable(found) else found
        except AuthenticationFailed as exc:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, exc.reason)
            raise  # unreachable: abort raises
        return actor

    def _visible(self, caller: Actor) -> Callable[[ApprovalRecord], bool]:
        if set(caller.roles) & set(self._listener.auditor_roles):
            return lambda _record: True
        if caller.identity in self._listener.on_behalf_of:
            return lambda _record: True  # the inbox filters for the human it serves
        reject_self = self._reject_self()
        store = self._store
        return lambda record: may_decide(
            caller, record, reject_self=reject_self, now=store.now() if store else 0.0
        )

    def _unconfigured(self) -> CapabilityError:
        return CapabilityError(
            Code.APPROVAL_UNAVAILABLE, retryable=False, reason="no approval store configured"
        )

    async def ListApprovals(
        self, request: admin_pb2.ListApprovalsRequest, context: Context
    ) -> admin_pb2.ListApprovalsResponse:
        caller = await self._actor(context)
        statuses = []
        for value in request.statuses:
            if value not in _STATUS_NAMES:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "unknown approval status")
            statuses.append(_STATUS_NAMES[value])
        if request.page_size < 0:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "page_size must be >= 0")
        if self._store is None:
            return admin_pb2.ListApprovalsResponse(error=error_to_proto(self._unconfigured()))
        try:
            records, token = await self._store.list(
                statuses=statuses or (Status.PENDING,),
                capability_id=request.capability_id,
                requester_id=request.requester_id,
                page_size=request.page_size,
                page_token=request.page_token,
                visible=self._visible(caller),
            )
        except ValueError:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "invalid page_token")
            raise  # unreachable: abort raises
        except CapabilityError as err:
            return admin_pb2.ListApprovalsResponse(error=error_to_proto(err))
        return admin_pb2.ListApprovalsResponse(
            approvals=[self._show(r) for r in records], next_page_token=token
        )

    async def _approver(
        self,
        caller: Actor,
        request: admin_pb2.DecideApprovalRequest
        | admin_pb2.CreateGrantRequest
        | admin_pb2.RevokeGrantRequest,
        context: Context,
    ) -> tuple[Actor, Actor | None]:
        if not request.HasField("on_behalf_of"):
            return caller, None
        if caller.identity not in self._listener.on_behalf_of:
            raise CapabilityError(Code.FORBIDDEN, reason="on_behalf_of from a non-listed identity")
        human = request.on_behalf_of
        # An empty issuer would make ("", id) differ from the requester's identity and slip past
        # the self-approval check (SI-4): the asserted human must be fully named.
        if not human.id or not human.issuer:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "on_behalf_of needs an id and an issuer"
            )
        return actor_from_proto(human), caller

    async def DecideApproval(
        self, request: admin_pb2.DecideApprovalRequest, context: Context
    ) -> admin_pb2.DecideApprovalResponse:
        caller = await self._actor(context)
        if not request.approval_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "approval_id is required")
        if request.verdict not in (admin_pb2.VERDICT_APPROVE, admin_pb2.VERDICT_REJECT):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "verdict is required")
        try:
            approver, via = await self._approver(caller, request, context)
            if self._store is None:
                raise self._unconfigured()
            if request.edited_input_json:
                record = await self._decide_edited(request, approver, via)
                return admin_pb2.DecideApprovalResponse(approval=self._show(record))
            record = await self._store.decide(
                request.approval_id,
                approve=request.verdict == admin_pb2.VERDICT_APPROVE,
                approver=approver,
                via=via,
                note=request.note,
                input_hash=request.input_hash,
            )
        except CapabilityError as err:
            return admin_pb2.DecideApprovalResponse(error=error_to_proto(err))
        return admin_pb2.DecideApprovalResponse(approval=self._show(record))

    async def _decide_edited(
        self, request: admin_pb2.DecideApprovalRequest, approver: Actor, via: Actor | None
    ) -> ApprovalRecord:
        """Approve with edits (`edits.py`): governed as the requester's call first."""
        assert self._store is not None
        if self._edits is None:
            raise CapabilityError(
                Code.FORBIDDEN,
                message="This capability's approvals cannot be edited.",
                reason="no edits on this servicer",
            )
        return await self._edits.decide(self._store, request, approver=approver, via=via)

    async def WatchApprovals(
        self, request: admin_pb2.WatchApprovalsRequest, context: Context
    ) -> AsyncIterator[admin_pb2.ApprovalEvent]:
        caller = await self._actor(context)
        if self._store is None:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "approvals are not configured")
            return
        visible = self._visible(caller)
        try:
            events = self._store.watch(request.after_event_id or None)
            if self._drain is not None:
                events = self._drain.until_closing(events)
            async for event in events:
                if event.record is None or not visible(event.record):
                    continue
                yield admin_pb2.ApprovalEvent(
                    event_id=event.event_id, type=event.type, approval=self._show(event.record)
                )
        except WatchGap:
            await context.abort(
                grpc.StatusCode.OUT_OF_RANGE,
                "events after after_event_id are no longer available; list approvals again",
            )
        except ValueError:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "malformed after_event_id")
        except CapabilityError as err:
            await context.abort(grpc.StatusCode.UNAVAILABLE, err.public_message)

    # -- standing grants (gateway/transport/admin/grants.py) -------------------------------------

    def _no_grants(self) -> types_pb2.CapabilityError:
        return error_to_proto(
            CapabilityError(Code.APPROVAL_UNAVAILABLE, retryable=False, reason="grants are off")
        )

    async def CreateGrant(
        self, request: admin_pb2.CreateGrantRequest, context: Context
    ) -> admin_pb2.GrantResponse:
        caller = await self._actor(context)
        try:
            approver, via = await self._approver(caller, request, context)
        except CapabilityError as err:
            return admin_pb2.GrantResponse(error=error_to_proto(err))
        if self._grants is None:
            return admin_pb2.GrantResponse(error=self._no_grants())
        return await self._grants.create(approver, via, request)

    async def ListGrants(
        self, request: admin_pb2.ListGrantsRequest, context: Context
    ) -> admin_pb2.ListGrantsResponse:
        caller = await self._actor(context)
        if self._grants is None:
            return admin_pb2.ListGrantsResponse(error=self._no_grants())
        return await self._grants.list(caller, request, context)

    async def GetGrant(
        self, request: admin_pb2.GetGrantRequest, context: Context
    ) -> admin_pb2.GrantResponse:
        caller = await self._actor(context)
        if self._grants is None:
            return admin_pb2.GrantResponse(error=self._no_grants())
        return await self._grants.get(caller, request)

    async def RevokeGrant(
        self, request: admin_pb2.RevokeGrantRequest, context: Context
    ) -> admin_pb2.GrantResponse:
        caller = await self._actor(context)
        if not request.grant_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "grant_id is required")
        try:
            approver, via = await self._approver(caller, request, context)
        except CapabilityError as err:
            return admin_pb2.GrantResponse(error=error_to_proto(err))
        if self._grants is None:
            return admin_pb2.GrantResponse(error=self._no_grants())
        return await self._grants.revoke(approver, via, request)
