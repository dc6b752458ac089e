"""The approval record and its Redis hash form (DESIGN §7, §12).

A record is one Redis hash. Scalars are stored as text; nested values (actors, tuples, the
validated input) as orjson. A few fields are duplicated flat (`req_iss`, `req_id`, `dec_iss`,
`dec_id`) so the Lua transition scripts compare identities without decoding JSON (SI-4).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import orjson

from gateway.errors import CapabilityError
from gateway.model import Actor
from gateway.values.canonical import input_hash


class Status(StrEnum):
    """Record states: pending → approved|rejected|expired; approved → consumed → executed."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CONSUMED = "consumed"  # a Resume took it; running, or its outcome was lost (UNKNOWN)
    EXECUTED = "executed"  # the resumed execution finished; its envelope is stored


# States in which the expiry still matters (after it passes they read as EXPIRED).
LIVE: frozenset[Status] = frozenset({Status.PENDING, Status.APPROVED})


@dataclass(frozen=True, slots=True)
class ApprovalRecord:
    """One approval request. `input` is the validated value the hash binds (SI-5, SI-6)."""

    id: str
    capability_id: str
    capability_digest: str  # upstream + method + schema version, computed by the caller
    surface: str
    requester: Actor
    input: Any
    input_hash: str
    created_at: float
    expires_at: float
    reasons: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    risk: str = ""
    side_effect: str = ""
    approver_roles: tuple[str, ...] = ()  # an approver must hold ALL of them
    message: str = ""  # public, for the requester
    status: Status = Status.PENDING
    decided_at: float | None = None
    decided_by: Actor | None = None
    decided_via: Actor | None = None
    note: str = ""
    requesting_execution_id: str = ""
    resumed_execution_id: str = ""
    traceparent: str = ""
    # The requester's idempotency key, if the call had one: the Resume executes under it, so
    # the upstream sees the caller's key and a repeat with it replays the outcome (ADR 0034).
    idempotency_key: str = field(default="", repr=False)
    # The hash of the input as the requester sent it (validated, before pre-hooks rewrote it):
    # the journal matches a repeat of the Invoke by it too (ADR 0034).
    request_hash: str = field(default="", repr=False)
    outcome_envelope: bytes | None = field(default=None, repr=False)
    outcome_code: str | None = None
    # Approve with edits (docs/approvals.md "Edits", ADR 0040): `input`/`input_hash` are then the
    # edited input's; `original_input` and `original_input_hash` are the requester's (the JSON
    # Patch between the two is computed when shown, after redaction: convert.patch_json).
    edited: bool = False
    original_input: Any = field(default=None, repr=False)
    original_input_hash: str = ""
    edited_by: Actor | None = None
    # Quorum (docs/approvals.md "Quorum"): approvals needed, roles each held by a different
    # approver, and the approvers counted so far for the current input (distinct (issuer, id)).
    quorum: int = 1
    distinct_roles: tuple[str, ...] = ()
    votes: tuple[Actor, ...] = ()
    # Escalation (docs/approvals.md "Escalation"): when it is due, who may then decide too, and
    # when it happened (once).
    escalate_at: float | None = None
    escalation_roles: tuple[str, ...] = ()
    escalated_at: float | None = None

    def __post_init__(self) -> None:
        # Callers may pass the plain string ("pending"); comparisons below rely on the enum.
        object.__setattr__(self, "status", Status(self.status))

    def expired_at(self, now: float) -> bool:
        """True when the record is past its expiry in a state where expiry applies."""
        return self.status in LIVE and now > self.expires_at


def verify_input(record: ApprovalRecord) -> bool:
    """SI-5: the stored input still hashes to the hash the approver saw."""
    try:
        return input_hash(record.input) == record.input_hash
    except CapabilityError:
        return False


def actor_json(actor: Actor) -> bytes:
    data = {
        "id": actor.id,
        "kind": actor.kind,
        "issuer": actor.issuer,
        "roles": list(actor.roles),
        "attributes": dict(actor.attributes),
    }
    if actor.on_behalf_of:
        data["on_behalf_of"] = actor.on_behalf_of
    return orjson.dumps(data)


def actor_from(raw: bytes) -> Actor:
    data = orjson.loads(raw)
    return Actor(
        id=data["id"],
        kind=data["kind"],
        issuer=data["issuer"],
        roles=tuple(data["roles"]),
        attributes=data["attributes"],
        # Absent from records written before it was kept.
        on_behalf_of=data.get("on_behalf_of", ""),
    )


def _time(value: float) -> bytes:
    if not math.isfinite(value):
        raise ValueError("approval times must be finite")
    return repr(value).encode()


def to_hash(record: ApprovalRecord) -> dict[str, bytes]:
    """The Redis hash fields of a record (every field present, empty when unset)."""
    decided_by, via = record.decided_by, record.decided_via
    return {
        "id": record.id.encode(),
        "capability_id": record.capability_id.encode(),
        "capability_digest": record.capability_digest.encode(),
        "surface": record.surface.encode(),
        "requester": actor_json(record.requester),
        "req_iss": record.requester.issuer.encode(),
        "req_id": record.requester.id.encode(),
        "input": orjson.dumps(record.input),
        "input_hash": record.input_hash.encode(),
        "reasons": orjson.dumps(list(record.reasons)),
        "types": orjson.dumps(list(record.types)),
        "risk": record.risk.encode(),
        "side_effect": record.side_effect.encode(),
        "approver_roles": orjson.dumps(list(record.approver_roles)),
        "message": record.message.encode(),
        "status": str(record.status).encode(),
        "created_at": _time(record.created_at),
        "expires_at": _time(record.expires_at),
        "decided_at": b"" if record.decided_at is None else _time(record.decided_at),
        "decided_by": b"" if decided_by is None else actor_json(decided_by),
        "dec_iss": b"" if decided_by is None else decided_by.issuer.encode(),
        "dec_id": b"" if decided_by is None else decided_by.id.encode(),
        "decided_via": b"" if via is None else actor_json(via),
        "note": record.note.encode(),
        "requesting_execution_id": record.requesting_execution_id.encode(),
        "resumed_execution_id": record.resumed_execution_id.encode(),
        "traceparent": record.traceparent.encode(),
        "idempotency_key": record.idempotency_key.encode(),
        "request_hash": record.request_hash.encode(),
        "outcome_envelope": record.outcome_envelope or b"",
        "outcome_code": (record.outcome_code or "").encode(),
        "edited": b"1" if record.edited else b"",
        "original_input_hash": record.original_input_hash.encode(),
        "original_input": orjson.dumps(record.original_input) if record.edited else b"",
        "edited_by": b"" if record.edited_by is None else actor_json(record.edited_by),
        "quorum": str(record.quorum).encode(),
        "distinct_roles": orjson.dumps(list(record.distinct_roles)),
        "votes": orjson.dumps([orjson.loads(actor_json(a)) for a in record.votes]),
        "escalate_at": b"" if record.escalate_at is None else _time(record.escalate_at),
        "escalation_roles": orjson.dumps(list(record.escalation_roles)),
        "escalated_at": b"" if record.escalated_at is None else _time(record.escalated_at),
    }


def _text(raw: Mapping[Any, Any], name: str) -> str:
    value: bytes = raw.get(name.encode(), b"")
    return value.decode()


def from_hash(raw: Mapping[Any, Any]) -> ApprovalRecord:
    """Rebuild a record from HGETALL output (bytes keys and values)."""

    def blob(name: str) -> bytes:
        value: bytes = raw.get(name.encode(), b"")
        return value

    decided_at = _text(raw, "decided_at")
    return ApprovalRecord(
        id=_text(raw, "id"),
        capability_id=_text(raw, "capability_id"),
        capability_digest=_text(raw, "capability_digest"),
        surface=_text(raw, "surface"),
        requester=actor_from(blob("requester")),
        input=orjson.loads(blob("input")),
        input_hash=_text(raw, "input_hash"),
        created_at=float(_text(raw, "created_at")),
        expires_at=float(_text(raw, "expires_at")),
        reasons=tuple(orjson.loads(blob("reasons"))),
        types=tuple(orjson.loads(blob("types"))),
        risk=_text(raw, "risk"),
        side_effect=_text(raw, "side_effect"),
        approver_roles=tuple(orjson.loads(blob("approver_roles"))),
        message=_text(raw, "message"),
        status=Status(_text(raw, "status")),
        decided_at=float(decided_at) if decided_at else None,
        decided_by=actor_from(blob("decided_by")) if blob("decided_by") else None,
        decided_via=actor_from(blob("decided_via")) if blob("decided_via") else None,
        note=_text(raw, "note"),
        requesting_execution_id=_text(raw, "requesting_execution_id"),
        resumed_execution_id=_text(raw, "resumed_execution_id"),
        traceparent=_text(raw, "traceparent"),
        idempotency_key=_text(raw, "idempotency_key"),
        request_hash=_text(raw, "request_hash"),
        outcome_envelope=blob("outcome_envelope") or None,
        outcome_code=_text(raw, "outcome_code") or None,
        # Absent from records written before issue 28: the defaults.
        edited=blob("edited") == b"1",
        original_input_hash=_text(raw, "original_input_hash"),
        original_input=orjson.loads(blob("original_input")) if blob("original_input") else None,
        edited_by=actor_from(blob("edited_by")) if blob("edited_by") else None,
        quorum=int(_text(raw, "quorum") or 1),
        distinct_roles=_texts(blob("distinct_roles")),
        votes=tuple(_actor_of(v) for v in orjson.loads(blob("votes"))) if blob("votes") else (),
        escalate_at=_optional_time(_text(raw, "escalate_at")),
        escalation_roles=_texts(blob("escalation_roles")),
        escalated_at=_optional_time(_text(raw, "escalated_at")),
    )


def _texts(raw: bytes) -> tuple[str, ...]:
    return tuple(orjson.loads(raw)) if raw else ()


def _optional_time(text: str) -> float | None:
    return float(text) if text else None


def _actor_of(data: Mapping[str, Any]) -> Actor:
    return actor_from(orjson.dumps(data))


def from_flat(items: list[Any]) -> ApprovalRecord:
    """Rebuild a record from a script's flat `HGETALL` reply ([field, value, field, ...])."""
    return from_hash({bytes(items[i]): bytes(items[i + 1]) for i in range(0, len(items), 2)})
