"""Execution state of an upstream call, attached to every stage-11 `CapabilityError`.

The values are the proto `ExecutionState` names without their prefix. They answer the
caller's real question after a failure — did the effect happen?

- NOT_STARTED: the request never reached the upstream (connect failure, no time left, the
  request could not be encoded). Safe to call again.
- COMPLETED: the upstream gave a definite answer (a reply, or an error status it chose).
- UNKNOWN: no definite answer (deadline, cancellation, connection lost after sending, an
  internal upstream fault). Never re-run automatically unless SI-11 allows it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from gateway.errors import CapabilityError

__all__ = [
    "ATTEMPTS_KEY",
    "RETRY_AFTER_KEY",
    "STATE_KEY",
    "UPSTREAM_STATUS_KEY",
    "ExecutionState",
    "state_of",
    "with_state",
]

STATE_KEY: Final = "execution_state"
UPSTREAM_STATUS_KEY: Final = "upstream_status"
ATTEMPTS_KEY: Final = "attempts"
RETRY_AFTER_KEY: Final = "retry_after_s"  # an HTTP upstream's Retry-After, in seconds


class ExecutionState(StrEnum):
    NOT_STARTED = "NOT_STARTED"
    COMPLETED = "COMPLETED"
    UNKNOWN = "UNKNOWN"


def with_state(error: CapabilityError, state: ExecutionState) -> CapabilityError:
    """Record `state` in `error.details` and return the error (for `raise with_state(...)`)."""
    error.details[STATE_KEY] = state.value
    return error


def state_of(error: CapabilityError) -> ExecutionState:
    """The recorded state; an error raised before any call attempt is NOT_STARTED."""
    value = error.details.get(STATE_KEY)
    return ExecutionState(value) if isinstance(value, str) else ExecutionState.NOT_STARTED
