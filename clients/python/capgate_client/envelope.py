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

    @property
    def decided(self) -> bool:
        """True once the approval left PENDING."""
        return self.status is not ApprovalStatus.PENDING


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
