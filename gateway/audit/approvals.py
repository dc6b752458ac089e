"""Approval decisions and expiries into the audit trail and metrics.

The approval store calls `ApprovalAudit` once per transition it made (`approved`,
`rejected`, `expired`, a quorum's `voted`, `escalated`) — in whichever process made it, so each
transition is recorded exactly once however many gateway workers share the store. Deciding
happens on the admin listener, outside any execution, so these events carry the requesting
execution id and the approval id.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from gateway.audit.events import approval_event
from gateway.telemetry import metrics

if TYPE_CHECKING:
    from gateway.state.approvals.records import ApprovalRecord


class _Emitter(Protocol):
    def emit(self, event: dict[str, Any]) -> None: ...


class ApprovalAudit:
    """`on_transition` callback for `RedisApprovalStore`."""

    def __init__(
        self, audit: _Emitter, *, revision: Callable[[], str], clock: Callable[[], float]
    ) -> None:
        self._audit = audit
        self._revision = revision
        self._clock = clock

    def __call__(self, kind: str, record: ApprovalRecord) -> None:
        if kind in ("approved", "rejected"):
            metrics.approvals_decided.add((kind,))
        elif kind == "expired":
            metrics.approvals_expired.add()
        elif kind not in ("voted", "escalated", "edited"):
            return
        self._audit.emit(approval_event(kind, record, self._clock(), self._revision()))
