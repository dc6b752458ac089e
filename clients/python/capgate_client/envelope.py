"""The normalized envelope as dataclasses usable with `match`, inputs and outputs as native values.

    match await client.invoke("orders.get", {"order_id": "o-1001"}):
        case Completed(output):           ...
        case ApprovalRequired(approval):  ...
        case Failed(error) | Cancelled(error): ...

Every outcome also carries the execution fields (`execution_id`, `attempts`, `duration`, ...) as
keyword-only attributes, and `unwrap()` returns the output or raises the `CapgateError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, TypeAlias

from capgate_client import _json
from capgate_client._proto import types_pb2
from capgate_client.errors import CapgateError, ErrorCode, ExecutionState, _by_number

JsonLoads: TypeAlias = Callable[[bytes | str], Any]


class ApprovalStatus(StrEnum):
    """PENDING → APPROVED | REJECTED | EXPIRED → CONSUMED → EXECUTED."""

    UNSPECIFIED = "UNSPECIFIED"
    PENDING = "PENDING"
    APPROVED = "APPROVED"
    REJECTED = "REJECTED"
    EXPIRED = "EXPIRED"
    CONSUMED = "CONSUMED"
    EXECUTED = "EXECUTED"

    @classmethod
    def from_proto(cls, value: int) -> ApprovalStatus:
        return _by_number(cls, types_pb2.ApprovalStatus, value, "APPROVAL_STATUS_")

    def to_proto(self) -> int:
        return int(types_pb2.ApprovalStatus.Value(f"APPROVAL_STATUS_{self.value}"))


class GrantStatus(StrEnum):
    """ACTIVE → REVOKED | EXHAUSTED (max_uses or max_total reached) | EXPIRED."""

    UNSPECIFIED = "UNSPECIFIED"
    ACTIVE = "ACTIVE"
    REVOKED = "REVOKED"
    EXHAUSTED = "EXHAUSTED"
    EXPIRED = "EXPIRED"

    @classmethod
    def from_proto(cls, value: int) -> GrantStatus:
        return _by_number(cls, types_pb2.GrantStatus, value, "GRANT_STATUS_")

    def to_proto(self) -> int:
        return int(types_pb2.GrantStatus.Value(f"GRANT_STATUS_{self.value}"))


# One RFC 6902 JSON Patch operation as the gateway sent it: {"op", "path", "value"} (the gateway
# writes add, remove and replace), ready for a JSON Patch library.
PatchOperation: TypeAlias = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Actor:
    """An authenticated identity; identity is the pair (issuer, id)."""

    id: str
    issuer: str
    kind: str
    roles: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Approval:
    """One approval request as the requester (or, with `input`, an approver) sees it."""

    id: str
    capability_id: str
    status: ApprovalStatus
    input_hash: str  # hex SHA-256 of the canonical input; approvers send it back when deciding
    reasons: tuple[str, ...] = ()
    message: str = ""
    created_at: datetime | None = None
    expires_at: datetime | None = None
    decided_at: datetime | None = None
    requester: Actor | None = None
    decided_by: Actor | None = None
    decided_via: Actor | None = None
    decision_note: str = ""
    input: Any = None  # the redacted input; only on ApprovalAdmin answers
    risk: str = ""
    side_effect: str = ""
    approver_roles: tuple[str, ...] = ()  # an approver must hold all of them
    requesting_execution_id: str = ""
    resumed_execution_id: str = ""
    surface: str = ""
    # Approve with edits: once an approver changed the input, `input_hash` is the edited input's
    # and `original_input_hash` the requester's; `patch` is the change (after the capability's
    # redact.approval_input rules).
    edited: bool = False
    original_input_hash: str = ""
    patch: tuple[PatchOperation, ...] = ()
    edited_by: Actor | None = None
    # Quorum: distinct approvers needed and approvals counted so far for the current input.
    quorum: int = 1
    approvals_received: int = 0
    distinct_roles: tuple[str, ...] = ()  # each held by a different approver
    approved_by: tuple[Actor, ...] = ()  # only on ApprovalAdmin answers
    # Escalation: set once the approval stayed pending past escalate_after (`escalate_at`);
    # holders of `escalation_roles` may then decide too.
    escalated_at: datetime | None = None
    escalate_at: datetime | None = None
    escalation_roles: tuple[str, ...] = ()

    @property
    def decided(self) -> bool:
        """True once the approval left PENDING."""
        return self.status is not ApprovalStatus.PENDING

    @property
    def progress(self) -> str:
        """The quorum progress as approvers read it: "1 of 2"."""
        return f"{self.approvals_received} of {self.quorum}"


@dataclass(frozen=True, slots=True)
class Grant:
    """A standing approval: calls it covers that policies send to approval run at once."""

    id: str
    status: GrantStatus
    actor: Actor | None = None  # whom: one actor (issuer and id) ...
    role: str = ""  # ... or every actor holding this role
    capability_id: str = ""  # what: one capability ...
    tag: str = ""  # ... or every capability carrying this tag
    constraint: str = ""  # CEL over `input`; empty covers any input
    created_at: datetime | None = None
    expires_at: datetime | None = None
    max_uses: int = 0  # 0: no cap
    uses: int = 0
    amount: str = ""  # CEL amount over `input`, capped in total by max_total (0: no cap)
    max_total: float = 0.0
    total: float = 0.0
    created_by: Actor | None = None
    created_via: Actor | None = None
    note: str = ""
    from_approval_id: str = ""
    revoked_at: datetime | None = None
    revoked_by: Actor | None = None
    approver_roles: tuple[str, ...] = ()  # the creator's approver roles at creation

    @property
    def active(self) -> bool:
        return self.status is GrantStatus.ACTIVE


@dataclass(frozen=True, slots=True)
class CapabilityDescriptor:
    """A capability this caller may see on this surface."""

    id: str
    description: str
    input_schema: Any  # the input JSON Schema, parsed
    side_effect: str
    risk: str
    tags: tuple[str, ...] = ()
    requires_approval: bool = False


@dataclass(frozen=True, slots=True)
class Catalog:
    """What `describe` answers: the visible capabilities and the config revision."""

    capabilities: tuple[CapabilityDescriptor, ...]
    revision: str

    def __iter__(self) -> Iterator[CapabilityDescriptor]:
        return iter(self.capabilities)

    def __contains__(self, capability_id: object) -> bool:
        return any(c.id == capability_id for c in self.capabilities)

    def get(self, capability_id: str) -> CapabilityDescriptor | None:
        return next((c for c in self.capabilities if c.id == capability_id), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Execution:
    """What every envelope carries besides its outcome."""

    execution_id: str = ""
    capability_id: str = ""
    attempts: int = 0
    duration: timedelta | None = None  # None on concealed answers (they equal not-found, SI-8)
    execution_state: ExecutionState = ExecutionState.UNSPECIFIED
    approval_id: str = ""  # set on executions that resume an approval
    revision: str = ""
    grant_id: str = ""  # set when a standing grant stood in for the approval this call needed
    # On a Resume whose approver edited the input: the edited input ran; `patch` is the change
    # from the requester's input (after the capability's redact.approval_input rules).
    edited: bool = False
    patch: tuple[PatchOperation, ...] = ()


@dataclass(frozen=True, slots=True)
class Completed(Execution):
    output: Any

    def unwrap(self) -> Any:
        return self.output


@dataclass(frozen=True, slots=True)
class ApprovalRequired(Execution):
    approval: Approval

    def unwrap(self) -> Any:
        """Raises CapgateError(APPROVAL_PENDING): the call waits for a human decision."""
        raise CapgateError(
            ErrorCode.APPROVAL_PENDING,
            self.approval.message or f"approval {self.approval.id} is required",
            stage="approval",
            expose_to_model=True,
            execution_state=self.execution_state,
            execution_id=self.execution_id,
        )


@dataclass(frozen=True, slots=True)
class Failed(Execution):
    error: CapgateError

    def unwrap(self) -> Any:
        raise self.error


@dataclass(frozen=True, slots=True)
class Cancelled(Execution):
    error: CapgateError

    def unwrap(self) -> Any:
        raise self.error


Outcome: TypeAlias = Completed | ApprovalRequired | Failed | Cancelled


def _when(message: Any, field: str) -> datetime | None:
    if not message.HasField(field):
        return None
    stamp = getattr(message, field)
    return datetime.fromtimestamp(stamp.seconds, UTC) + timedelta(microseconds=stamp.nanos // 1000)


def _actor(message: Any, field: str) -> Actor | None:
    if not message.HasField(field):
        return None
    a = getattr(message, field)
    return Actor(a.id, a.issuer, a.kind, tuple(a.roles))


def _patch(text: str, loads: JsonLoads) -> tuple[PatchOperation, ...]:
    return tuple(loads(text)) if text else ()


def _actors(actors: Any) -> tuple[Actor, ...]:
    return tuple(Actor(a.id, a.issuer, a.kind, tuple(a.roles)) for a in actors)


def approval_from_proto(a: Any, loads: JsonLoads = _json.loads) -> Approval:
    return Approval(
        id=a.id,
        capability_id=a.capability_id,
        status=ApprovalStatus.from_proto(a.status),
        input_hash=a.input_hash,
        reasons=tuple(a.reasons),
        message=a.message,
        created_at=_when(a, "created_at"),
        expires_at=_when(a, "expires_at"),
        decided_at=_when(a, "decided_at"),
        requester=_actor(a, "requester"),
        decided_by=_actor(a, "decided_by"),
        decided_via=_actor(a, "decided_via"),
        decision_note=a.decision_note,
        input=loads(a.input_json) if a.input_json else None,
        risk=a.risk,
        side_effect=a.side_effect,
        approver_roles=tuple(a.approvers.roles),
        requesting_execution_id=a.requesting_execution_id,
        resumed_execution_id=a.resumed_execution_id,
        surface=a.surface,
        edited=a.edited,
        original_input_hash=a.original_input_hash,
        patch=_patch(a.patch_json, loads),
        edited_by=_actor(a, "edited_by"),
        quorum=max(1, a.quorum),  # a gateway from before quorums sends 0: one approver
        approvals_received=a.approvals_received,
        distinct_roles=tuple(a.distinct_roles),
        approved_by=_actors(a.approved_by),
        escalated_at=_when(a, "escalated_at"),
        escalate_at=_when(a, "escalate_at"),
        escalation_roles=tuple(a.escalation_roles),
    )


def grant_from_proto(g: Any) -> Grant:
    return Grant(
        id=g.id,
        status=GrantStatus.from_proto(g.status),
        actor=_actor(g, "actor"),
        role=g.role,
        capability_id=g.capability_id,
        tag=g.tag,
        constraint=g.constraint,
        created_at=_when(g, "created_at"),
        expires_at=_when(g, "expires_at"),
        max_uses=g.max_uses,
        uses=g.uses,
        amount=g.amount,
        max_total=g.max_total,
        total=g.total,
        created_by=_actor(g, "created_by"),
        created_via=_actor(g, "created_via"),
        note=g.note,
        from_approval_id=g.from_approval_id,
        revoked_at=_when(g, "revoked_at"),
        revoked_by=_actor(g, "revoked_by"),
        approver_roles=tuple(g.approver_roles),
    )


def catalog_from_proto(r: Any, loads: JsonLoads = _json.loads) -> Catalog:
    return Catalog(
        capabilities=tuple(
            CapabilityDescriptor(
                id=d.id,
                description=d.description,
                input_schema=loads(d.input_schema_json) if d.input_schema_json else {},
                side_effect=d.side_effect,
                risk=d.risk,
                tags=tuple(d.tags),
                requires_approval=d.requires_approval,
            )
            for d in r.capabilities
        ),
        revision=r.revision,
    )


def outcome_from_proto(r: Any, loads: JsonLoads = _json.loads) -> Outcome:
    """The native outcome of a `capgate.v1.ExecutionResult`."""
    info: dict[str, Any] = {
        "execution_id": r.execution_id,
        "capability_id": r.capability_id,
        "attempts": r.attempts,
        "duration": r.duration.ToTimedelta() if r.HasField("duration") else None,
        "execution_state": ExecutionState.from_proto(r.execution_state),
        "approval_id": r.approval_id,
        "revision": r.revision,
        "grant_id": r.grant_id,
        "edited": r.edited,
        "patch": _patch(r.patch_json, loads),
    }
    kind = r.WhichOneof("outcome")
    if kind == "completed":
        text = r.completed.output_json
        return Completed(loads(text) if text else None, **info)
    if kind == "approval_required":
        return ApprovalRequired(approval_from_proto(r.approval_required.approval, loads), **info)
    if kind == "failed":
        return Failed(CapgateError.from_proto(r.failed, r.execution_id), **info)
    if kind == "cancelled":
        return Cancelled(CapgateError.from_proto(r.cancelled, r.execution_id), **info)
    # A gateway always sets the outcome; an envelope without one is a protocol fault.
    raise CapgateError(
        ErrorCode.UNSPECIFIED,
        "the gateway answered an envelope without an outcome",
        stage="transport",
        execution_id=r.execution_id,
    )
