"""What a page shows: visibility for one human, filters, and plain-text view models.

Every value handed to a template is plain text; the templates escape all of it (autoescape),
so attacker-controlled strings — inputs, actor ids, reasons, notes — render inert. Visibility
here is a convenience filter only: ApprovalAdmin decides who may decide (approver roles,
self-approval, input hash), whatever the page shows.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from capgate.v1 import types_pb2
from gateway.model import Actor

RISKS: Final = ("low", "medium", "high", "critical")
MAX_INPUT_CHARS: Final = 100_000


def _seconds(stamp: Any) -> float:
    return float(stamp.seconds + stamp.nanos / 1e9)


def visible(human: Actor, approval: types_pb2.Approval, auditor_roles: Iterable[str]) -> bool:
    """Auditors see everything; others see approvals whose required roles they all hold."""
    roles = set(human.roles)
    return bool(roles & set(auditor_roles)) or set(approval.approvers.roles) <= roles


@dataclass(frozen=True, slots=True)
class Filters:
    capability: str = ""
    risk: str = ""

    @classmethod
    def parse(cls, capability: str | None, risk: str | None) -> Filters:
        return cls(capability=(capability or "")[:200], risk=risk if risk in RISKS else "")

    def keep(self, approval: types_pb2.Approval) -> bool:
        return (not self.capability or approval.capability_id == self.capability) and (
            not self.risk or approval.risk == self.risk
        )


def span(seconds: float) -> str:
    """A short human duration: 45s, 3m 12s, 2h 5m, 3d 4h."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def when(stamp: Any) -> str:
    if not stamp.seconds and not stamp.nanos:
        return ""
    return datetime.fromtimestamp(_seconds(stamp), UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def status_name(approval: types_pb2.Approval) -> str:
    name = str(types_pb2.ApprovalStatus.Name(approval.status))
    return name.removeprefix("APPROVAL_STATUS_").lower()


def who(actor: types_pb2.Actor) -> str:
    return f"{actor.id} ({actor.issuer})" if actor.issuer else actor.id


def pretty_input(input_json: str) -> str:
    """The redacted input, indented; shown as text (never markup)."""
    if not input_json:
        return ""
    try:
        text = json.dumps(json.loads(input_json), indent=2, ensure_ascii=False)
    except ValueError:
        text = input_json
    return text[:MAX_INPUT_CHARS]


def row(approval: types_pb2.Approval, human: Actor, now: float) -> dict[str, Any]:
    """Plain values of one approval for the templates."""
    created, expires = _seconds(approval.created_at), _seconds(approval.expires_at)
    requester = approval.requester
    return {
        "id": approval.id,
        "capability": approval.capability_id,
        "risk": approval.risk if approval.risk in RISKS else "unknown",
        "side_effect": approval.side_effect,
        "status": status_name(approval),
        "requester": who(requester),
        "mine": (requester.issuer, requester.id) == (human.issuer, human.id),
        "reasons": list(approval.reasons),
        "roles": list(approval.approvers.roles),
        "lacks_roles": sorted(set(approval.approvers.roles) - set(human.roles)),
        "age": span(now - created),
        "time_left": span(expires - now) if expires > now else "expired",
        "created": when(approval.created_at),
        "expires": when(approval.expires_at),
        "decided": when(approval.decided_at) if approval.HasField("decided_at") else "",
        "decided_by": who(approval.decided_by) if approval.HasField("decided_by") else "",
        "decided_via": who(approval.decided_via) if approval.HasField("decided_via") else "",
        "note": approval.decision_note,
        "input_hash": approval.input_hash,
        "input": pretty_input(approval.input_json),
        "surface": approval.surface,
    }


def capabilities_of(approvals: Sequence[types_pb2.Approval]) -> list[str]:
    return sorted({a.capability_id for a in approvals})
