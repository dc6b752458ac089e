"""Requests written as JSON or YAML (explain, test suites) → `EvalRequest`.

The shape mirrors `EvalRequest`: `{"phase", "surface", "capability", "capability_policies",
"actor", "input", "now", "correlation_id", "metadata", "approval", "hooks"}`; `now` and
`approval.decided_at` are RFC 3339 text.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from policy.bindings import parse_timestamp
from policy.model import EvalRequest, Phase

__all__ = ["request_from_data"]

_KEYS = frozenset(
    {
        "phase",
        "surface",
        "capability",
        "capability_policies",
        "actor",
        "input",
        "now",
        "correlation_id",
        "metadata",
        "approval",
        "hooks",
    }
)


def request_from_data(data: Any) -> tuple[Phase, EvalRequest]:
    """The phase and request described by `data`; ValueError says what is wrong."""
    if not isinstance(data, Mapping):
        raise ValueError("a request must be an object")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise ValueError(f"unknown request field(s): {', '.join(map(str, unknown))}")
    phase = _phase(data.get("phase", "invocation"))
    actor = _mapping(data, "actor", required=True)
    capability = _mapping(data, "capability", required=True)
    policies = data.get("capability_policies") or []
    if not isinstance(policies, list) or not all(isinstance(p, str) for p in policies):
        raise ValueError("capability_policies must be a list of policy names")
    metadata = _mapping(data, "metadata", required=False)
    if not all(isinstance(v, str) for v in metadata.values()):
        raise ValueError("metadata values must be strings")
    approval = data.get("approval")
    if approval is not None and not isinstance(approval, Mapping):
        raise ValueError("approval must be an object or null")
    hooks = _mapping(data, "hooks", required=False)  # hook name -> its context attributes
    if not all(isinstance(v, Mapping) for v in hooks.values()):
        raise ValueError("hooks values must be objects (a hook's context attributes)")
    return phase, EvalRequest(
        actor=actor,
        capability=capability,
        capability_policies=tuple(policies),
        surface=_text(data, "surface"),
        input=data.get("input"),
        now=_moment(data.get("now")),
        correlation_id=_text(data, "correlation_id"),
        metadata={str(k): v for k, v in metadata.items()},
        approval=approval,
        hooks={str(k): v for k, v in hooks.items()},
    )


def _phase(value: Any) -> Phase:
    try:
        return Phase(value)
    except ValueError:
        raise ValueError(f"phase must be one of {', '.join(Phase)}, not {value!r}") from None


def _mapping(data: Mapping[str, Any], key: str, *, required: bool) -> Mapping[str, Any]:
    value = data.get(key)
    if value is None and not required:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{key} must be an object")
    return value


def _text(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key, "")
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string")
    return value


def _moment(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        raise ValueError("now must be an RFC 3339 timestamp")
    try:
        return parse_timestamp(value)
    except ValueError:
        raise ValueError(f"now: {value!r} is not an RFC 3339 timestamp") from None
