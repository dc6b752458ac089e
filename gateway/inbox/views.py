"""What a page shows: visibility for one human, filters, and plain-text view models.

Every value handed to a template is plain text; the templates escape all of it (autoescape),
so attacker-controlled strings — inputs, actor ids, reasons, notes — render inert. Visibility
here is a convenience filter only: ApprovalAdmin decides who may decide (approver roles,
self-approval, input hash), whatever the page shows.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from capgate.v1 import types_pb2
from gateway.model import Actor
from gateway.values.jsonpatch import lookup

RISKS: Final = ("low", "medium", "high", "critical")
MAX_INPUT_CHARS: Final = 100_000


def _seconds(stamp: Any) -> float:
    return float(stamp.seconds + stamp.nanos / 1e9)


def visible(human: Actor, approval: types_pb2.Approval, auditor_roles: Iterable[str]) -> bool:
    """Auditors see everything; others see approvals whose required roles they all hold, or,
    once escalated, whose escalation roles they all hold."""
    roles = set(human.roles)
    return (
        bool(roles & set(auditor_roles))
        or set(approval.approvers.roles) <= roles
        or escalated_to(approval, roles)
    )


def escalated_to(
    approval: types_pb2.Approval, roles: Iterable[str], now: float | None = None
) -> bool:
    """The approval escalated, or its `escalate_at` has come (the gateway lets escalation roles
    decide from then on, before its sweep marks it), and `roles` include every one of its
    escalation roles."""
    wanted = set(approval.escalation_roles)
    if not wanted or not wanted <= set(roles):
        return False
    if approval.HasField("escalated_at"):
        return True
    when = time.time() if now is None else now
    return approval.HasField("escalate_at") and _seconds(approval.escalate_at) <= when


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


SUMMARY_FIELDS: Final = 3
SUMMARY_CHARS: Final = 40
MAX_TREE_NODES: Final = 1000
MAX_TREE_DEPTH: Final = 12
HASH_PREFIX: Final = 12
_KINDS: Final = {"user": "a user", "agent": "an agent", "service": "a service"}


def _parsed(input_json: str) -> Any:
    if not input_json or len(input_json) > MAX_INPUT_CHARS:
        return None
    try:
        return json.loads(input_json)
    except ValueError:
        return None


def parsed_input(input_json: str) -> Any:
    """The input as JSON data; None when there is none or it cannot be read."""
    return _parsed(input_json)


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value)  # numbers, true, false, null as JSON writes them


def _truncated(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summary(input_json: str) -> list[tuple[str, str]]:
    """The first few top-level scalar fields of the (redacted) input, values truncated: what
    tells one row of the list from the next."""
    value = _parsed(input_json)
    if not isinstance(value, dict):
        return []
    out = []
    for key, item in value.items():
        if isinstance(item, dict | list):
            continue
        out.append((_truncated(str(key), SUMMARY_CHARS), _truncated(_scalar(item), SUMMARY_CHARS)))
        if len(out) == SUMMARY_FIELDS:
            break
    return out


@dataclass(frozen=True, slots=True)
class Node:
    """One field of the input table: a scalar (`value`) or a nested object/array (`children`)."""

    key: str
    kind: str  # string, number, bool, null, object, array, more
    value: str = ""
    children: tuple[Node, ...] | None = None


def input_tree(input_json: str) -> list[Node]:
    """The input as rows for a table, nested values as sub-tables; bounded in nodes and depth
    (the raw JSON view shows the rest)."""
    value = _parsed(input_json)
    if value is None:
        return []
    budget = [MAX_TREE_NODES]

    def kind_of(item: Any) -> str:
        if isinstance(item, bool):
            return "bool"
        if item is None:
            return "null"
        if isinstance(item, int | float):
            return "number"
        return "string"

    def nodes(items: Iterable[tuple[str, Any]], depth: int, total: int) -> tuple[Node, ...]:
        out: list[Node] = []
        for index, (key, item) in enumerate(items):
            if budget[0] <= 0:
                out.append(Node("…", "more", f"{total - index} more in the raw JSON"))
                break
            budget[0] -= 1
            if isinstance(item, dict | list):
                out.append(branch(key, item, depth))
            else:
                out.append(Node(key, kind_of(item), _scalar(item)))
        return tuple(out)

    def branch(key: str, item: dict[str, Any] | list[Any], depth: int) -> Node:
        pairs = list(item.items()) if isinstance(item, dict) else list(enumerate(item))
        kind = "object" if isinstance(item, dict) else "array"
        label = (
            f"{len(pairs)} field{'s' if len(pairs) != 1 else ''}"
            if kind == "object"
            else (f"{len(pairs)} item{'s' if len(pairs) != 1 else ''}")
        )
        if depth >= MAX_TREE_DEPTH:
            return Node(key, "more", f"{label}, nested too deep: see the raw JSON")
        named = [(str(k) if kind == "object" else f"[{k}]", v) for k, v in pairs]
        return Node(key, kind, label, nodes(named, depth + 1, len(named)))

    if isinstance(value, dict | list):
        top = branch("", value, 0)
        return list(top.children or ())
    return [Node("(value)", kind_of(value), _scalar(value))]


def asking(actor: types_pb2.Actor) -> str:
    """Who is asking, in words: "an agent", "a user", "a service" (else the kind as given)."""
    return _KINDS.get(actor.kind, f"a {actor.kind}" if actor.kind else "an unnamed kind of caller")


def decision_block(approval: types_pb2.Approval, human: Actor) -> str:
    """Why this human may not decide (naming what is missing), or "" when it may. Whether the
    gateway refuses self-approval is the gateway's own word, carried by every approval."""
    missing = sorted(set(approval.approvers.roles) - set(human.roles))
    requester = approval.requester
    if missing and not escalated_to(approval, human.roles):
        plural = "s" if len(missing) > 1 else ""
        return f"You cannot decide this: you lack the role{plural} {', '.join(missing)}."
    mine = (requester.issuer, requester.id) == (human.issuer, human.id)
    if approval.self_approval_refused and mine:
        return (
            "You cannot decide this: you requested the call, and the gateway refuses self-approval."
        )
    return ""


def row(approval: types_pb2.Approval, human: Actor, now: float) -> dict[str, Any]:
    """Plain values of one approval for the templates."""
    created, expires = _seconds(approval.created_at), _seconds(approval.expires_at)
    requester = approval.requester
    decided = approval.status != types_pb2.APPROVAL_STATUS_PENDING
    return {
        "id": approval.id,
        "capability": approval.capability_id,
        "description": approval.capability_description,
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
        "hash_prefix": approval.input_hash[:HASH_PREFIX],
        "input": pretty_input(approval.input_json),
        "summary": summary(approval.input_json),
        "tree": input_tree(approval.input_json),
        "surface": approval.surface,
        "message": approval.message,
        "asking": asking(requester),
        "requester_kind": requester.kind,
        "on_behalf_of": approval.requester_on_behalf_of,
        "requester_roles": list(requester.roles),
        "created_iso": iso(approval.created_at),
        "expires_iso": iso(approval.expires_at),
        "decided_iso": iso(approval.decided_at) if approval.HasField("decided_at") else "",
        "verdict": verdict(approval) if decided else "",
        "self_approval_refused": approval.self_approval_refused,
        "cannot_decide": decision_block(approval, human),
        "quorum": quorum(approval, human),
        "escalation": escalation(approval),
        "edit": edit_view(approval),
    }


def iso(stamp: Any) -> str:
    """RFC 3339 UTC for <time datetime=…> (the page's script adds the viewer's local time)."""
    if not stamp.seconds and not stamp.nanos:
        return ""
    return datetime.fromtimestamp(_seconds(stamp), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def verdict(approval: types_pb2.Approval) -> str:
    """What was decided: approved or rejected (consumed and executed were approved first);
    expired when nobody decided."""
    status = approval.status
    if status == types_pb2.APPROVAL_STATUS_REJECTED:
        return "rejected"
    if status == types_pb2.APPROVAL_STATUS_EXPIRED:
        return "expired undecided"
    return "approved"


def capabilities_of(approvals: Sequence[types_pb2.Approval]) -> list[str]:
    return sorted({a.capability_id for a in approvals})


def _same_actor(a: types_pb2.Actor, b: Actor | types_pb2.Actor) -> bool:
    return (a.issuer, a.id) == (b.issuer, b.id)


def roles_still_needed(
    distinct_roles: Sequence[str], approvers: Sequence[Sequence[str]]
) -> list[str]:
    """The distinct roles no approver so far can be counted for, each approver counting for one
    role at most (a maximum matching of approvers to roles; a few of each, so the simple
    augmenting-path search)."""
    held_by: dict[str, int] = {}  # role -> index of the approver counted for it

    def place(who: int, seen: set[str]) -> bool:
        for role in distinct_roles:
            if role in approvers[who] and role not in seen:
                seen.add(role)
                if role not in held_by or place(held_by[role], seen):
                    held_by[role] = who
                    return True
        return False

    for index in range(len(approvers)):
        place(index, set())
    return [role for role in distinct_roles if role not in held_by]


def quorum(approval: types_pb2.Approval, human: Actor) -> dict[str, Any]:
    """Progress of a multi-person approval: "1 of 2 approvals", who approved, the distinct
    roles still needed, whether this human approved already. Empty for a one-person approval."""
    needed = max(approval.quorum, 1)
    if needed == 1 and not approval.distinct_roles:
        return {}
    received = approval.approvals_received
    return {
        "needed": needed,
        "received": received,
        "text": f"{received} of {needed} approval{'s' if needed != 1 else ''}",
        "approved_by": [who(a) for a in approval.approved_by],
        "distinct_roles": list(approval.distinct_roles),
        "roles_needed": roles_still_needed(
            list(approval.distinct_roles), [list(a.roles) for a in approval.approved_by]
        ),
        "mine": any(_same_actor(a, human) for a in approval.approved_by),
    }


def escalation(approval: types_pb2.Approval) -> dict[str, Any]:
    """When the approval escalates or escalated, and to whom; empty when it never does."""
    escalated = approval.HasField("escalated_at")
    if not escalated and not approval.HasField("escalate_at"):
        return {}
    stamp = approval.escalated_at if escalated else approval.escalate_at
    return {
        "escalated": escalated,
        "at": when(stamp),
        "at_iso": iso(stamp),
        "roles": list(approval.escalation_roles),
    }


MAX_PATCH_ROWS: Final = 200


@dataclass(frozen=True, slots=True)
class Change:
    """One operation of an edit, for the diff table: values as JSON text."""

    op: str
    path: str
    before: str
    after: str


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def changes(patch: Iterable[Any], before: Any = None) -> list[Change]:
    """Diff rows of RFC 6902 operations; `before` (the input the approver saw), when given,
    supplies each changed path's old value."""
    missing = object()
    out: list[Change] = []
    for op in patch:
        if not isinstance(op, dict):
            continue
        path = str(op.get("path", ""))
        old = lookup(before, path, default=missing) if before is not None else missing
        new = op.get("value", missing)
        out.append(
            Change(
                op=str(op.get("op", "")),
                path=path or "(the whole input)",
                before="" if old is missing else _json_text(old),
                after="" if new is missing else _json_text(new),
            )
        )
        if len(out) == MAX_PATCH_ROWS:
            break
    return out


def edit_view(approval: types_pb2.Approval) -> dict[str, Any]:
    """What an approver's edit changed (the gateway's patch, after redaction); empty if none."""
    if not approval.edited:
        return {}
    try:
        patch = json.loads(approval.patch_json) if approval.patch_json else []
    except ValueError:
        patch = []
    return {
        "by": who(approval.edited_by) if approval.HasField("edited_by") else "",
        "original_hash": approval.original_input_hash,
        "changes": changes(patch if isinstance(patch, list) else []),
    }
