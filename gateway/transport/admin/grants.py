"""ApprovalAdmin's standing grants: CreateGrant, ListGrants, GetGrant, RevokeGrant
(docs/approvals.md "Grants"). The ApprovalAdmin servicer authenticates the caller and resolves
`on_behalf_of`; this module checks what a grant may be before the store keeps it, shows grants
to whom may see them, and records `approval.grant_created` / `approval.grant_revoked`.

Creating a grant is approving ahead of time, so its creator must be an approver of every call it
can cover: they hold the roles the covered capabilities' approvals need (the capability's
`approval.approvers.roles`, else the default approver role, plus the approvers of every
require-approval rule of an invocation-phase policy that can apply to it), and the grant covers
nothing that must be approved call by call (`grantable: false`). Its `constraint` and `amount`
are compiled now against the input schema of every capability it covers (a mistake is refused
with its line:column, not found at the first call).

Who sees a grant: its creator, a caller holding every one of its `approver_roles` (the roles its
creator held), a caller with one of the listener's `auditor_roles`, and an allow-listed inbox.
Who revokes it: its creator or a caller holding every one of its `approver_roles` (an auditor
only reads)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import grpc

from capgate.v1 import admin_pb2, types_pb2
from gateway.audit.events import caller_text, format_time
from gateway.audit.grants import grant_event
from gateway.config.settings import Listener
from gateway.errors import CapabilityError, Code, Event, InputIssue
from gateway.model import Actor
from gateway.pipeline.call import Runtime
from gateway.pipeline.grantexpr import GrantExprError, compile_grant_exprs
from gateway.pipeline.snapshot import Prepared, Snapshot
from gateway.state.approvals.convert import actor_from_proto, actor_to_proto, error_to_proto
from gateway.state.approvals.grants import GrantRecord, GrantStatus, RedisGrantStore
from gateway.state.approvals.records import Status
from policy import Decision, Phase

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]

MAX_EXPR: Final = 4096  # characters of a constraint or an amount
MAX_NOTE: Final = 1000  # characters of a creation or revocation note
MAX_NAME: Final = 256  # characters of a role, a tag, a capability id or an actor's id or issuer

_STATUS_OF = {
    types_pb2.GrantStatus.Value(f"GRANT_STATUS_{s.value.upper()}"): s for s in GrantStatus
}
_PROTO_STATUS = {s: v for v, s in _STATUS_OF.items()}
_FROM_APPROVAL = (Status.PENDING, Status.APPROVED)


def grant_to_proto(record: GrantRecord) -> types_pb2.Grant:
    """The record as a `capgate.v1.Grant`."""
    message = types_pb2.Grant(
        id=record.id,
        status=_PROTO_STATUS[record.status],
        role=record.role,
        capability_id=record.capability_id,
        tag=record.tag,
        constraint=record.constraint,
        max_uses=record.max_uses,
        uses=record.uses,
        amount=record.amount,
        max_total=record.max_total,
        total=record.total,
        created_by=actor_to_proto(record.created_by),
        note=record.note,
        from_approval_id=record.from_approval_id,
        approver_roles=record.approver_roles,
    )
    message.created_at.FromNanoseconds(round(record.created_at * 1e9))
    message.expires_at.FromNanoseconds(round(record.expires_at * 1e9))
    if record.actor is not None:
        message.actor.CopyFrom(actor_to_proto(record.actor))
    if record.created_via is not None:
        message.created_via.CopyFrom(actor_to_proto(record.created_via))
    if record.revoked_at is not None:
        message.revoked_at.FromNanoseconds(round(record.revoked_at * 1e9))
    if record.revoked_by is not None:
        message.revoked_by.CopyFrom(actor_to_proto(record.revoked_by))
    return message


def _invalid(path: str, message: str) -> CapabilityError:
    """A refused grant request: the problem is the public message and its field's issue."""
    return CapabilityError(
        Code.INPUT_INVALID,
        message=message,
        reason=f"grant refused: {path}",
        issues=(InputIssue(path, message),),
    )


@dataclass(frozen=True, slots=True)
class _Scope:
    """What a grant covers: the capabilities it names (one, or those carrying its tag)."""

    capability_id: str
    tag: str
    covered: tuple[Prepared, ...]


class GrantAdmin:
    """The grant RPCs over the runtime's grant store (None: grants are not available)."""

    def __init__(
        self, snapshot: Callable[[], Snapshot], runtime: Runtime, *, listener: Listener
    ) -> None:
        self._snapshot = snapshot
        self._rt = runtime
        self._listener = listener

    def _store(self) -> RedisGrantStore:
        store: RedisGrantStore | None = self._rt.grants
        if store is None:
            raise CapabilityError(
                Code.APPROVAL_UNAVAILABLE, retryable=False, reason="no grant store configured"
            )
        return store

    # -- who sees and revokes ----------------------------------------------------------------

    def _sees_all(self, caller: Actor) -> bool:
        auditor = bool(set(caller.roles) & set(self._listener.auditor_roles))
        return auditor or caller.identity in self._listener.on_behalf_of

    @staticmethod
    def _may_revoke(caller: Actor, record: GrantRecord) -> bool:
        own = caller.identity == record.created_by.identity
        return own or set(record.approver_roles) <= set(caller.roles)

    def _visible(self, caller: Actor) -> Callable[[GrantRecord], bool]:
        if self._sees_all(caller):
            return lambda _record: True
        return lambda record: self._may_revoke(caller, record)

    # -- CreateGrant --------------------------------------------------------------------------

    async def create(
        self, approver: Actor, via: Actor | None, request: admin_pb2.CreateGrantRequest
    ) -> admin_pb2.GrantResponse:
        try:
            record = await self._create(approver, via, request)
        except CapabilityError as err:
            return admin_pb2.GrantResponse(error=error_to_proto(err))
        return admin_pb2.GrantResponse(grant=grant_to_proto(record))

    async def _create(
        self, approver: Actor, via: Actor | None, request: admin_pb2.CreateGrantRequest
    ) -> GrantRecord:
        if approver.anonymous:
            raise CapabilityError(
                Code.FORBIDDEN,
                message="Creating a grant needs an authenticated approver.",
                reason="anonymous",
            )
        store = self._store()
        _check_sizes(request)
        snapshot = self._snapshot()
        whom, role, capability_id, tag = await self._defaults(approver, request)
        if (whom is None) == (not role):
            raise _invalid("actor", "name exactly one of actor (issuer and id) or role")
        if bool(capability_id) == bool(tag):
            raise _invalid("capability_id", "name exactly one of capability_id or tag")
        scope = _scope(snapshot, capability_id, tag)
        expires_in = _expires_in(request, store.settings.grants_max_expires_in_s)
        _check_caps(request)
        _check_grantable(snapshot, scope)
        needed = _check_roles(snapshot, scope, approver, store.settings.default_approver_role)
        if store.settings.reject_self_approval and whom and whom.identity == approver.identity:
            raise CapabilityError(
                Code.APPROVAL_SELF_APPROVAL,
                message="A grant cannot cover its own creator's calls (SI-4).",
                reason="grant to self",
            )
        _check_exprs(snapshot, scope, request)
        now = self._rt.wall()
        record = GrantRecord(
            id=f"grt_{self._rt.new_id()}",
            created_at=now,
            expires_at=now + expires_in,
            created_by=approver,
            actor=whom,
            role=role,
            capability_id=capability_id,
            tag=tag,
            constraint=request.constraint,
            amount=request.amount,
            max_uses=request.max_uses,
            max_total=request.max_total,
            created_via=via,
            note=request.note,
            from_approval_id=request.from_approval_id,
            approver_roles=needed,  # the roles its covering needs, not all the creator's
        )
        record = await store.create(record)
        self._emit(Event.GRANT_CREATED, record, approver, via, snapshot)
        return record

    async def _defaults(
        self, approver: Actor, request: admin_pb2.CreateGrantRequest
    ) -> tuple[Actor | None, str, str, str]:
        """Whom and what, from the request or else (from_approval_id) from the approval: its
        requester and its capability. The approval must be pending or approved and the creator
        one of its approvers."""
        whom = _whom(request.actor) if request.HasField("actor") else None
        role, capability_id, tag = request.role, request.capability_id, request.tag
        if not request.from_approval_id:
            return whom, role, capability_id, tag
        approvals = self._rt.approvals
        found = await approvals.get(request.from_approval_id) if approvals else None
        if found is None:
            raise CapabilityError(Code.APPROVAL_NOT_FOUND, reason="grant from unknown approval")
        if found.status not in _FROM_APPROVAL:
            raise _invalid(
                "from_approval_id", f"the approval is {found.status.value}, not pending or approved"
            )
        if found.quorum > 1 or found.distinct_roles:
            raise _invalid("from_approval_id", "not grantable: needs more than one approver")
        if not set(found.approver_roles) <= set(approver.roles):
            raise CapabilityError(
                Code.FORBIDDEN,
                message="Only an approver of the approval may create a grant from it.",
                reason="grant from an approval the creator may not decide",
            )
        if whom is None and not role:
            whom = found.requester
        if not capability_id and not tag:
            capability_id = found.capability_id
        return whom, role, capability_id, tag

    # -- ListGrants, GetGrant ----------------------------------------------------------------

    async def list(
        self, caller: Actor, request: admin_pb2.ListGrantsRequest, context: Context
    ) -> admin_pb2.ListGrantsResponse:
        statuses = []
        for value in request.statuses:
            if value not in _STATUS_OF:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "unknown grant status")
            statuses.append(_STATUS_OF[value])
        if request.page_size < 0:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "page_size must be >= 0")
        visible = self._visible(caller)
        try:
            records, token = await self._store().list(
                statuses=statuses or (GrantStatus.ACTIVE,),
                capability_id=request.capability_id,
                actor_id=request.actor_id,
                page_size=request.page_size,
                page_token=request.page_token,
            )
        except ValueError:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "invalid page_token")
            raise  # unreachable: abort raises
        except CapabilityError as err:
            return admin_pb2.ListGrantsResponse(error=error_to_proto(err))
        shown = [grant_to_proto(r) for r in records if visible(r)]
        return admin_pb2.ListGrantsResponse(grants=shown, next_page_token=token)

    async def get(
        self, caller: Actor, request: admin_pb2.GetGrantRequest
    ) -> admin_pb2.GrantResponse:
        try:
            record = await self._store().get(request.grant_id)
            if record is None or not self._visible(caller)(record):
                raise CapabilityError(Code.APPROVAL_NOT_FOUND, reason="unknown or unseen grant")
        except CapabilityError as err:
            return admin_pb2.GrantResponse(error=error_to_proto(err))
        return admin_pb2.GrantResponse(grant=grant_to_proto(record))

    # -- RevokeGrant ----------------------------------------------------------------------------

    async def revoke(
        self, approver: Actor, via: Actor | None, request: admin_pb2.RevokeGrantRequest
    ) -> admin_pb2.GrantResponse:
        try:
            if len(request.note) > MAX_NOTE:
                raise _invalid("note", f"at most {MAX_NOTE} characters")
            store = self._store()
            found = await store.get(request.grant_id)
            if found is None or not self._visible(approver)(found):
                raise CapabilityError(Code.APPROVAL_NOT_FOUND, reason="unknown or unseen grant")
            if not self._may_revoke(approver, found):
                raise CapabilityError(
                    Code.FORBIDDEN,
                    message="Only the grant's creator or an approver holding its roles may revoke"
                    " it.",
                    reason="revoke by a non-approver",
                )
            record = await store.revoke(found.id, by=approver, via=via, note=request.note)
        except CapabilityError as err:
            return admin_pb2.GrantResponse(error=error_to_proto(err))
        self._emit(Event.GRANT_REVOKED, record, approver, via, self._snapshot())
        return admin_pb2.GrantResponse(grant=grant_to_proto(record))

    def _emit(
        self, name: Event, record: GrantRecord, actor: Actor, via: Actor | None, snapshot: Snapshot
    ) -> None:
        """`approval.grant_created` / `_revoked`: who acted (and the inbox it acted through),
        the expiry and the approval it came from; never a constraint, an amount or a note
        (they may quote values of inputs)."""
        fields: dict[str, Any] = {
            "actor_id": caller_text(actor.id),
            "actor_issuer": caller_text(actor.issuer),
            "actor_kind": actor.kind,
            "expires_at": format_time(record.expires_at),
        }
        if record.from_approval_id:
            fields["approval_id"] = caller_text(record.from_approval_id)
        if via is not None:
            fields.update(via_id=caller_text(via.id), via_issuer=caller_text(via.issuer))
        now = self._rt.wall()
        event = grant_event(name, record, now=now, revision=snapshot.revision, **fields)
        self._rt.audit.emit(event)


# -- creation checks ---------------------------------------------------------------------------


def _whom(message: types_pb2.Actor) -> Actor:
    if not message.id or not message.issuer:
        raise _invalid("actor", "an actor needs an id and an issuer")
    return actor_from_proto(message)


def _check_sizes(request: admin_pb2.CreateGrantRequest) -> None:
    for path, text, most in (
        ("constraint", request.constraint, MAX_EXPR),
        ("amount", request.amount, MAX_EXPR),
        ("note", request.note, MAX_NOTE),
        ("role", request.role, MAX_NAME),
        ("capability_id", request.capability_id, MAX_NAME),
        ("tag", request.tag, MAX_NAME),
        ("actor", request.actor.id, MAX_NAME),
        ("actor", request.actor.issuer, MAX_NAME),
    ):
        if len(text) > most:
            raise _invalid(path, f"at most {most} characters")


def _scope(snapshot: Snapshot, capability_id: str, tag: str) -> _Scope:
    if capability_id:
        prepared = snapshot.capabilities.get(capability_id)
        if prepared is None:
            raise _invalid("capability_id", "no such capability")
        return _Scope(capability_id, "", (prepared,))
    covered = tuple(p for p in snapshot.capabilities.values() if tag in p.capability.tags)
    if not covered:
        raise _invalid("tag", "no capability carries this tag")
    return _Scope("", tag, covered)


def _expires_in(request: admin_pb2.CreateGrantRequest, most: float) -> float:
    if not request.HasField("expires_in"):
        raise _invalid("expires_in", "expires_in is required")
    seconds = float(request.expires_in.ToNanoseconds()) / 1e9
    if seconds <= 0:
        raise _invalid("expires_in", "expires_in must be positive")
    if seconds > most:
        raise _invalid("expires_in", f"expires_in is at most {most:g}s (grants.max_expires_in)")
    return seconds


def _check_caps(request: admin_pb2.CreateGrantRequest) -> None:
    if request.max_uses < 0:
        raise _invalid("max_uses", "max_uses must be >= 0 (0: no cap)")
    if not math.isfinite(request.max_total) or request.max_total < 0:
        raise _invalid("max_total", "max_total must be a finite number >= 0 (0: no cap)")
    if request.max_total and not request.amount.strip():
        raise _invalid("max_total", "max_total needs an amount expression")


def _require_approval_rules(snapshot: Snapshot, prepared: Prepared) -> Iterable[Any]:
    """The approval specs of every enforced require-approval rule of an invocation-phase
    policy that can apply to the capability (None for a rule without `approval`)."""
    policies = snapshot.policies.applicable(
        Phase.INVOCATION, prepared.policy_value, prepared.capability.policies
    )
    for policy in policies:
        if not policy.enforced:
            continue
        for rule in policy.rules:
            if rule.effect is Decision.REQUIRE_APPROVAL:
                yield rule.approval


def _grantable(snapshot: Snapshot, prepared: Prepared) -> str:
    """Why no grant can stand in for the capability's approvals ("" when one can)."""
    spec = prepared.capability.approval
    if not spec.grantable:
        return f"capability {prepared.capability.id} has approval.grantable: false"
    if spec.quorum > 1 or spec.distinct_roles:
        return f"capability {prepared.capability.id} needs more than one approver per call"
    if prepared.inline_approver is not None:
        return f"capability {prepared.capability.id} has an inline approver deciding each call"
    rules = list(_require_approval_rules(snapshot, prepared))
    if not spec.required and rules and all(r is not None and not r.grantable for r in rules):
        return f"every policy asking approval of {prepared.capability.id} says grantable: false"
    return ""


def _check_grantable(snapshot: Snapshot, scope: _Scope) -> None:
    """Refused when no covered capability can be covered; a tag grant may cover some that
    cannot (stage 8 never lets a grant stand in for those)."""
    reasons = [_grantable(snapshot, p) for p in scope.covered]
    if all(reasons):
        path = "capability_id" if scope.capability_id else "tag"
        raise _invalid(path, f"not grantable: {reasons[0]}")


def _check_roles(
    snapshot: Snapshot, scope: _Scope, approver: Actor, default_role: str
) -> tuple[str, ...]:
    """The approver roles the covered capabilities' approvals need (the grant keeps these as
    its `approver_roles`); FORBIDDEN when the creator lacks one."""
    needed: set[str] = set()
    for prepared in scope.covered:
        needed.update(prepared.capability.approval.roles or (default_role,))
        for spec in _require_approval_rules(snapshot, prepared):
            needed.update(spec.roles if spec is not None else (default_role,))
    missing = sorted(needed - set(approver.roles))
    if missing:
        raise CapabilityError(
            Code.FORBIDDEN,
            message=f"Creating this grant needs the approver roles: {', '.join(missing)}.",
            reason="grant creator lacks approver roles",
        )
    return tuple(sorted(needed))


def _check_exprs(snapshot: Snapshot, scope: _Scope, request: admin_pb2.CreateGrantRequest) -> None:
    ids = [p.capability.id for p in scope.covered]
    try:
        compile_grant_exprs(snapshot, ids, request.constraint, request.amount)
    except GrantExprError as exc:
        path = exc.field if exc.field in ("constraint", "amount") else "capability_id"
        raise _invalid(path, f"{path} {exc.position}: {exc.message}") from None
