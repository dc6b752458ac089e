"""Standing grants' audit events (`approval.grant_*`, ADR 0038) and the expiry callback.

A grant event names the grant and what it covers (the capability id or the tag), never its
constraint or amount expressions' values and never input: a use carries the call's input hash
like every event of the call. An event of a call (`grant_used`, `grant_exhausted`) carries the
call's execution id and surface; one outside any call (an expiry found by the sweep or a read,
a creation, a revocation) has an execution id of its own and an empty surface.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from gateway.audit.events import caller_text, format_time
from gateway.errors import Event
from gateway.telemetry import metrics

if TYPE_CHECKING:
    from gateway.state.approvals.grants import GrantRecord


class _Emitter(Protocol):
    def emit(self, event: dict[str, Any]) -> None: ...


def grant_event(
    name: Event,
    record: GrantRecord,
    *,
    now: float,
    revision: str,
    execution_id: str = "",
    surface: str = "",
    **fields: Any,
) -> dict[str, Any]:
    """One `approval.grant_*` event; `fields` are the event's own (ids, counts, hashes)."""
    event: dict[str, Any] = {
        "event": name.value,
        "event_id": f"{execution_id or record.id}:{name.value}",
        "time": format_time(now),
        "execution_id": execution_id or os.urandom(16).hex(),
        "surface": surface,
        "revision": revision,
        "execution_state": "NOT_STARTED",
        "grant_id": record.id,
    }
    if record.capability_id:
        event["capability_id"] = caller_text(record.capability_id)
    else:
        event["tag"] = caller_text(record.tag)
    event.update(fields)
    return event


class GrantExpiryAudit:
    """`on_expired` callback of `RedisGrantStore`: `approval.grant_expired`, once per expiry,
    from the process whose script made it."""

    def __init__(
        self, audit: _Emitter, *, revision: Callable[[], str], clock: Callable[[], float]
    ) -> None:
        self._audit = audit
        self._revision = revision
        self._clock = clock

    def __call__(self, record: GrantRecord) -> None:
        metrics.grants_expired.add()
        self._audit.emit(
            grant_event(Event.GRANT_EXPIRED, record, now=self._clock(), revision=self._revision())
        )
