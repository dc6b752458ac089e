"""How the approval store fails: one mapping of outages, one not-found, the consumed error."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from gateway.errors import CapabilityError, Code
from gateway.state.approvals.records import ApprovalRecord
from gateway.state.connections import RedisUnavailable, mapped_errors


@dataclass(eq=False)
class ApprovalConsumed(CapabilityError):
    """APPROVAL_CONSUMED carrying the record, so a repeated Resume can answer with the stored
    envelope (`executed`) or report the outcome as unknown (`consumed`: never re-run)."""

    record: ApprovalRecord | None = None


@contextmanager
def available() -> Iterator[None]:
    """Redis unreachable → the retryable APPROVAL_UNAVAILABLE (DESIGN §7)."""
    try:
        with mapped_errors():
            yield
    except RedisUnavailable as exc:
        raise CapabilityError(
            Code.APPROVAL_UNAVAILABLE, reason=f"approval store unavailable ({exc})"
        ) from exc


def not_found() -> CapabilityError:
    """SI-8: one answer for unknown ids and for other requesters' or surfaces' approvals."""
    return CapabilityError(Code.APPROVAL_NOT_FOUND, reason="unknown approval")
