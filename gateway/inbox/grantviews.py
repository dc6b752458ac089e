"""Standing grants in the inbox: plain-text view models, list filters, and the "approve and
grant similar calls" form read into a CreateGrant request.

As for approvals, every value handed to a template is plain text (autoescaped), and who may see
a grant here is a convenience filter: ApprovalAdmin decides who may create or revoke one.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from google.protobuf import duration_pb2

from capgate.v1 import admin_pb2, types_pb2
from gateway.config.durations import parse_duration
from gateway.inbox.views import iso, when, who
from gateway.model import Actor

STATUSES: Final = ("active", "revoked", "exhausted", "expired")
MAX_EXPRESSION: Final = 2000
MAX_SUGGESTED: Final = 3


def status_name(grant: types_pb2.Grant) -> str:
    return str(types_pb2.GrantStatus.Name(grant.status)).removeprefix("GRANT_STATUS_").lower()


def status_values(names: Iterable[str]) -> list[types_pb2.GrantStatus]:
    return [types_pb2.GrantStatus.Value(f"GRANT_STATUS_{n.upper()}") for n in names]


def may_revoke(human: Actor, grant: types_pb2.Grant) -> bool:
    """Its creator, or a human holding every one of its approver roles (as ApprovalAdmin
    decides on RevokeGrant)."""
    mine = (grant.created_by.issuer, grant.created_by.id) == (human.issuer, human.id)
    return mine or set(grant.approver_roles) <= set(human.roles)


def visible(human: Actor, grant: types_pb2.Grant, auditor_roles: Iterable[str]) -> bool:
    """As ApprovalAdmin shows grants: auditors see every one; others those they may revoke."""
    return bool(set(human.roles) & set(auditor_roles)) or may_revoke(human, grant)


@dataclass(frozen=True, slots=True)
class GrantFilters:
    status: str = "active"  # one of STATUSES, or "all"
    capability: str = ""
    actor: str = ""

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> GrantFilters:
        status = query.get("status", "active")
        return cls(
            status=status if status in (*STATUSES, "all") else "active",
            capability=query.get("capability", "")[:200],
            actor=query.get("actor", "")[:200],
        )

    def statuses(self) -> list[types_pb2.GrantStatus]:
        return status_values(STATUSES if self.status == "all" else (self.status,))


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"


def whom(grant: types_pb2.Grant) -> str:
    return f"role {grant.role}" if grant.role else who(grant.actor)


def what(grant: types_pb2.Grant) -> str:
    return f"tag {grant.tag}" if grant.tag else grant.capability_id


def row(grant: types_pb2.Grant) -> dict[str, Any]:
    """Plain values of one grant for the templates."""
    uses = f"{grant.uses} of {grant.max_uses}" if grant.max_uses else str(grant.uses)
    total = (
        f"{_number(grant.total)} of {_number(grant.max_total)}"
        if grant.max_total
        else (_number(grant.total) if grant.amount else "")
    )
    revoked = grant.HasField("revoked_at")
    return {
        "id": grant.id,
        "status": status_name(grant),
        "whom": whom(grant),
        "what": what(grant),
        "constraint": grant.constraint,
        "amount": grant.amount,
        "uses": uses,
        "total": total,
        "created": when(grant.created_at),
        "created_iso": iso(grant.created_at),
        "expires": when(grant.expires_at),
        "expires_iso": iso(grant.expires_at),
        "created_by": who(grant.created_by) if grant.HasField("created_by") else "",
        "created_via": who(grant.created_via) if grant.HasField("created_via") else "",
        "note": grant.note,
        "from_approval_id": grant.from_approval_id,
        "revoked": when(grant.revoked_at) if revoked else "",
        "revoked_iso": iso(grant.revoked_at) if revoked else "",
        "revoked_by": who(grant.revoked_by) if grant.HasField("revoked_by") else "",
        "approver_roles": list(grant.approver_roles),
        "active": grant.status == types_pb2.GRANT_STATUS_ACTIVE,
    }


class GrantFormError(ValueError):
    """A field of the grant form that the inbox cannot send (nothing was decided)."""


def _count(text: str, field: str) -> int:
    text = text.strip()
    if not text:
        return 0
    if not text.isdigit() or len(text) > 12:
        raise GrantFormError(f"{field}: a whole number of uses, such as 10, or empty for none")
    return int(text)


def _limit(text: str) -> float:
    text = text.strip()
    if not text:
        return 0.0
    try:
        value = float(text)
    except ValueError:
        raise GrantFormError("max total: a number, such as 500, or empty for none") from None
    if not math.isfinite(value) or value < 0:
        raise GrantFormError("max total: a number of 0 or more")
    return value


def grant_request(form: Mapping[str, str], approval_id: str) -> admin_pb2.CreateGrantRequest:
    """CreateGrant from an approval (whom and what default to its requester and capability):
    expires in (required, a duration such as 1h), optional max uses, optional max total (sent
    with its amount expression), optional constraint, note."""
    text = form.get("expires_in", "").strip()
    try:
        seconds = parse_duration(text)
    except ValueError:
        raise GrantFormError("expires in: a duration such as 30m, 1h or 8h") from None
    if seconds <= 0:
        raise GrantFormError("expires in: more than 0, such as 1h")
    max_total = _limit(form.get("max_total", ""))
    amount = form.get("amount", "").strip()[:MAX_EXPRESSION]
    if max_total and not amount:
        raise GrantFormError("max total needs an amount expression, such as input.amount")
    return admin_pb2.CreateGrantRequest(
        from_approval_id=approval_id,
        expires_in=duration_pb2.Duration(seconds=int(seconds), nanos=int(seconds % 1 * 1e9)),
        max_uses=_count(form.get("max_uses", ""), "max uses"),
        max_total=max_total,
        amount=amount if max_total else "",
        constraint=form.get("constraint", "").strip()[:MAX_EXPRESSION],
        note=form.get("note", "")[:1000],
    )


def _field(key: str) -> str | None:
    return f"input.{key}" if key.isidentifier() and key.isascii() else None


def suggestion(input_json: str) -> dict[str, str]:
    """Prefilled values for the grant form: a constraint bounding the input's first numeric
    fields by their values here (`input.amount <= 800`), and the first of them as the amount."""
    try:
        value = json.loads(input_json) if input_json else None
    except ValueError:
        value = None
    if not isinstance(value, dict):
        return {"constraint": "", "amount": ""}
    bounds: list[str] = []
    for key, item in value.items():
        field = _field(str(key))
        if field and isinstance(item, int | float) and not isinstance(item, bool):
            bounds.append(f"{field} <= {json.dumps(item)}")
        if len(bounds) == MAX_SUGGESTED:
            break
    amount = bounds[0].split(" <= ")[0] if bounds else ""
    return {"constraint": " && ".join(bounds), "amount": amount}
