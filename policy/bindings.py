"""One request's CEL variables, normalised once per request (never per expression).

Missing actor or capability fields get empty defaults so that a policy reading
`actor.roles` on an actor without roles sees `[]` rather than failing; fields of the
wrong type are passed through, so policies reading them fail closed. `input` and `hooks` are
bound only in the invocation and execution phases; `approval` only in execution, where it is
always bound (null without an approval).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from policy.celsource import CONST_VAR
from policy.model import EvalRequest, Phase

__all__ = ["bindings_for", "parse_timestamp"]


def bindings_for(
    phase: Phase, req: EvalRequest, now: datetime, constants: Mapping[str, Any]
) -> dict[str, Any]:
    """Fresh, backend-neutral variables for `req` (timestamps as aware datetimes)."""
    actor = req.actor
    capability = req.capability
    variables: dict[str, Any] = {
        "actor": {
            "id": actor.get("id", ""),
            "kind": actor.get("kind", ""),
            "issuer": actor.get("issuer", ""),
            "roles": _list(actor.get("roles")),
            "attributes": actor.get("attributes") or {},
        },
        "capability": {
            "id": capability.get("id", ""),
            "tags": _list(capability.get("tags")),
            "side_effect": capability.get("side_effect", ""),
            "risk": capability.get("risk", ""),
        },
        "surface": req.surface,
        "request": {
            "now": _aware(now),
            "correlation_id": req.correlation_id,
            "metadata": dict(req.metadata),
        },
    }
    if constants:
        variables[CONST_VAR] = constants
    if phase is not Phase.DISCOVERY:
        variables["input"] = req.input
        variables["hooks"] = {name: dict(attrs) for name, attrs in req.hooks.items()}
    if phase is Phase.EXECUTION:
        variables["approval"] = _approval(req.approval) if req.approval is not None else None
        variables["limits"] = {k: dict(v) for k, v in (req.limits or {}).items()}
    return variables


def _approval(approval: Mapping[str, Any]) -> dict[str, Any]:
    approver = approval.get("approver") or {}
    decided = approval.get("decided_at")
    if isinstance(decided, str):
        try:
            decided = parse_timestamp(decided)
        except ValueError:
            decided = None  # a policy reading it then fails closed
    return {
        "id": approval.get("id", ""),
        "approver": {
            "id": approver.get("id", ""),
            "issuer": approver.get("issuer", ""),
            "roles": _list(approver.get("roles")),
        },
        "decided_at": _aware(decided) if isinstance(decided, datetime) else None,
        "reasons": _list(approval.get("reasons")),
        # A standing grant's use stands in for an approval (ADR 0038): true then, false else.
        "grant": approval.get("grant") is True,
    }


def _list(value: Any) -> Any:
    """Lists as lists (tuples too); a value of another type is passed through unchanged,
    so a policy using it as a list fails closed instead of matching by accident."""
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else value


def _aware(moment: Any) -> datetime:
    if not isinstance(moment, datetime):
        raise TypeError("timestamps must be datetime values")
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def parse_timestamp(text: str) -> datetime:
    """An RFC 3339 timestamp (`2025-03-04T10:00:00Z`); naive values are taken as UTC."""
    moment = datetime.fromisoformat(text.replace("z", "Z"))
    return _aware(moment)
