"""Builds audit events. Fields: ids, names, codes, reasons, stances, durations, the input HMAC
and the revision — never input or output payloads or credentials (SI-10)."""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from capgate.v1 import types_pb2

if TYPE_CHECKING:
    from gateway.call import Call

_STATES = {
    types_pb2.EXECUTION_STATE_NOT_STARTED: "NOT_STARTED",
    types_pb2.EXECUTION_STATE_COMPLETED: "COMPLETED",
    types_pb2.EXECUTION_STATE_UNKNOWN: "UNKNOWN",
}


class InputHasher:
    """HMAC-SHA256 of the canonical input under a rotatable key id (DESIGN §12)."""

    __slots__ = ("_key", "key_id")

    def __init__(self, key: bytes, key_id: str):
        self._key = key
        self.key_id = key_id

    def digest(self, canonical: bytes) -> str:
        return f"{self.key_id}:{hmac.new(self._key, canonical, hashlib.sha256).hexdigest()[:32]}"


def stances(call: Call) -> list[dict[str, Any]]:
    ev = call.evaluation
    if ev is None:
        return []
    return [
        {
            "policy": s.policy,
            "mode": s.mode,
            "effect": None if s.effect is None else s.effect.name.lower().replace("_", "-"),
            "rule": s.rule,
            "error": s.error,
        }
        for s in ev.stances
    ]


def build(name: str, call: Call, now: float, **fields: Any) -> dict[str, Any]:
    actor = call.actor
    event: dict[str, Any] = {
        "event": name,
        "event_id": f"{call.execution_id}:{name}:{call.attempts}",
        "time": datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds"),
        "execution_id": call.execution_id,
        "capability_id": call.capability_id,
        "surface": call.surface,
        "actor_id": actor.id if actor else None,
        "actor_issuer": actor.issuer if actor else None,
        "actor_kind": actor.kind if actor else None,
        "revision": call.snapshot.revision,
    }
    if call.correlation_id:
        event["correlation_id"] = call.correlation_id
    if call.approval_id:
        event["approval_id"] = call.approval_id
    if call.extra.get("input_hmac"):
        event["input_hmac"] = call.extra["input_hmac"]
    event["execution_state"] = _STATES.get(call.state, "NOT_STARTED")
    event.update(fields)
    return event
