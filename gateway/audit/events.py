"""Builds audit events. Fields: ids, names, codes, reasons, stances, durations, the input HMAC
and the revision — never input or output payloads or credentials (SI-10).

Names are seed 001's (`gateway.errors.Event`); which code ends in which terminal event is the
error table's (DESIGN §12). Every event carries the config/policy revision hash. Caller-chosen
strings that are not payloads (a requested capability id, a correlation id, an approval id, actor
ids, reasons) are kept through `caller_text`: control, format (bidi), separator, surrogate,
private-use, unassigned and blank-looking characters become `\\uXXXX` escapes (a backslash
`\\\\`), and the result is at most `MAX_TEXT` characters, so that a probe can neither inflate nor
disguise the trail.

The input HMAC is HMAC-SHA256 over the validated input serialized with sorted keys and no
whitespace (orjson), truncated to 128 bits, under `audit.hmac_key`; `input_hmac_key_id` names
the key so keys can rotate (a reload with a new key and id). It is computed once per execution,
on the first event after input validation, and only when a key is configured. Why not RFC 8785:
the pure-Python JCS encoder costs ≈ 90 µs on a 1 KB input and the plain path computes no
canonical form otherwise; sorted orjson is ≈ 3 µs and equally deterministic for one value.
"""

from __future__ import annotations

import hmac
import re
import time
from typing import TYPE_CHECKING, Any, Final

import orjson

from capgate.v1 import types_pb2
from gateway.errors import CapabilityError, Event
from gateway.upstream.state import UPSTREAM_STATUS_KEY

if TYPE_CHECKING:
    from gateway.config.settings import AuditSettings
    from gateway.model import Actor
    from gateway.state.approvals.records import ApprovalRecord

MAX_TEXT: Final = 256
# google.rpc.ErrorInfo.reason is a constant like ORDER_NOT_FOUND; anything else is not kept.
MACHINE_REASON: Final = re.compile(r"[A-Z][A-Z0-9_]{0,62}")
# Letters and marks that render as nothing (Hangul fillers, braille blank, variation selectors).
_BLANK: Final = frozenset(
    (0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0, 0x2800, *range(0xFE00, 0xFE10))
) | frozenset(range(0xE0100, 0xE01F0))


# Fields a stage may pass to `build` that hold a caller's string.
CALLER_KEYS: Final = frozenset({"approval_id", "capability_id", "correlation_id", "reason"})


def _escaped(char: str) -> str | None:
    if char == "\\":
        return "\\\\"
    if char.isprintable() and ord(char) not in _BLANK:
        return None
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def caller_text(value: str, limit: int = MAX_TEXT) -> str:
    """A caller-supplied string as the trail keeps it: every character that does not show
    itself (`str.isprintable` is false: Cc, Cf incl. bidi controls, Cs, Co, Cn, Zl, Zp, Zs but
    the space; or a blank-looking letter) as its `\\uXXXX`/`\\UXXXXXXXX` escape, a backslash
    doubled so an escape is never ambiguous, whole characters or escapes up to `limit`."""
    if value.isascii() and value.isprintable() and "\\" not in value:
        return value[:limit]  # the common case: nothing to escape
    out: list[str] = []
    size = 0
    for char in value:
        piece = _escaped(char) or char
        size += len(piece)
        if size > limit:
            break
        out.append(piece)
    return "".join(out)


STATES: Final[dict[int, str]] = {
    types_pb2.EXECUTION_STATE_NOT_STARTED: "NOT_STARTED",
    types_pb2.EXECUTION_STATE_COMPLETED: "COMPLETED",
    types_pb2.EXECUTION_STATE_UNKNOWN: "UNKNOWN",
}
_APPROVAL_EVENTS: Final = {
    "approved": Event.APPROVED,
    "rejected": Event.REJECTED,
    "expired": Event.APPROVAL_EXPIRED,
    "voted": Event.APPROVAL_VOTED,
    "escalated": Event.APPROVAL_ESCALATED,
    "edited": Event.APPROVAL_EDITED,
}


class InputHasher:
    """HMAC-SHA256 of the canonical input under a rotatable key id (DESIGN §12)."""

    __slots__ = ("_key", "key_id")

    def __init__(self, key: bytes, key_id: str):
        self._key = key
        self.key_id = key_id

    def digest(self, value: Any) -> str:
        """32 hex digits; raises TypeError for a value with no JSON form."""
        canonical = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        return hmac.digest(self._key, canonical, "sha256")[:16].hex()


_hashers: dict[tuple[str, str], InputHasher] = {}


def hasher_for(settings: AuditSettings) -> InputHasher | None:
    """The hasher of a snapshot's audit settings (cached per key and key id); None without a key."""
    if not settings.hmac_key:
        return None
    ident = (settings.hmac_key, settings.hmac_key_id)
    found = _hashers.get(ident)
    if found is None:
        if len(_hashers) > 8:  # reloads with rotated keys: keep the cache small
            _hashers.clear()
        found = _hashers[ident] = InputHasher(settings.hmac_key.encode(), settings.hmac_key_id)
    return found


_SECOND: list[Any] = [-1, ""]  # the last formatted second: events of one second share it


def format_time(now: float) -> str:
    """RFC 3339 UTC with milliseconds, as `isoformat(timespec="milliseconds")` writes it, at a
    fifth of its cost (three events a call)."""
    second = int(now)
    if second != _SECOND[0]:
        _SECOND[1] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _SECOND[0] = second
    return f"{_SECOND[1]}.{int((now - second) * 1000):03d}+00:00"


def discovered_event(
    execution_id: str,
    *,
    surface: str,
    actor: Actor,
    capability_ids: list[str],
    revision: str,
    now: float,
) -> dict[str, Any]:
    """`capabilities.discovered` for one Describe (seed 001's describe pipeline): an execution
    of its own, so it carries an execution id and the deterministic event id of every
    execution's events (`<execution>:<event>:0`: nothing is attempted); nothing runs."""
    name = Event.DISCOVERED.value
    return {
        "event": name,
        "event_id": f"{execution_id}:{name}:0",
        "time": format_time(now),
        "execution_id": execution_id,
        "surface": surface,
        "actor_id": caller_text(actor.id),
        "actor_issuer": caller_text(actor.issuer),
        "actor_kind": actor.kind,
        "revision": revision,
        "execution_state": "NOT_STARTED",
        "capability_ids": capability_ids,
    }


def reason_of(err: CapabilityError) -> str | None:
    """The true cause, fit for the trail: an upstream's free text (status details) may carry
    payload fragments or secrets, so for upstream statuses only the status name is kept."""
    status = err.details.get(UPSTREAM_STATUS_KEY)
    if isinstance(status, str):
        return f"upstream status {status}"
    return caller_text(err.reason) if err.reason else None


def approval_event(kind: str, record: ApprovalRecord, now: float, revision: str) -> dict[str, Any]:
    """`capability.approved` / `.rejected` / `.approval_expired` / `.approval_voted` /
    `.approval_escalated` for one approval transition.

    `actor_*` is who acted (the approver, or the voter; absent for an expiry and an
    escalation), `requester_*` who asked, `via_*` the inbox identity that decided on a human's
    behalf. A vote carries the quorum progress, an escalation the roles that may now decide too;
    neither carries the input."""
    name = _APPROVAL_EVENTS[kind]
    requester = record.requester
    event: dict[str, Any] = {
        "event": name.value,
        "event_id": _approval_event_id(kind, record, name),
        "time": format_time(now),
        "execution_id": record.requesting_execution_id,
        "approval_id": caller_text(record.id),
        "capability_id": caller_text(record.capability_id),
        "surface": record.surface,
        "requester_id": caller_text(requester.id),
        "requester_issuer": caller_text(requester.issuer),
        "requester_kind": requester.kind,
        "outcome": kind,
        "revision": revision,
        "execution_state": "NOT_STARTED",
    }
    approver = record.votes[-1] if kind == "voted" and record.votes else record.decided_by
    if kind == "edited":
        approver = record.edited_by
    if approver is not None and kind not in ("expired", "escalated"):
        event.update(
            actor_id=caller_text(approver.id),
            actor_issuer=caller_text(approver.issuer),
            actor_kind=approver.kind,
        )
    via = record.decided_via
    if via is not None and kind in ("approved", "rejected"):
        event.update(via_id=caller_text(via.id), via_issuer=caller_text(via.issuer))
    if kind in ("voted", "approved") and record.quorum > 1:
        event.update(quorum=record.quorum, approvals_received=len(record.votes))
    if record.edited and kind != "expired":
        # Both hashes (approval hashes of the two inputs, ADR 0040), never either input.
        event.update(
            edited=True,
            approval_input_hash=record.input_hash,
            original_input_hash=record.original_input_hash,
        )
    if kind == "escalated":
        # `status` is the record's after the call that escalated it: "pending", or the verdict
        # of a decision that found the escalation due and decided it at once (nothing to notify).
        event.update(
            escalation_roles=[caller_text(r) for r in record.escalation_roles],
            reasons=list(record.reasons),
            expires_at=record.expires_at,
            status=record.status.value,
        )
    return event


def _approval_event_id(kind: str, record: ApprovalRecord, name: Event) -> str:
    """`<approval>:<event>`; a vote adds how many votes its input has then and that input's
    hash (an approval has several votes, and an edit starts counting again)."""
    if kind == "voted":
        return f"{record.id}:{name.value}:{len(record.votes)}:{record.input_hash[:16]}"
    if kind == "edited":  # each edit is of another input
        return f"{record.id}:{name.value}:{record.input_hash[:16]}"
    return f"{record.id}:{name.value}"
