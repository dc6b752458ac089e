"""Errors of the upstream layer that are not governed call failures.

`UpstreamConfigError` is a load-time error: config that names an unknown or streaming method,
an unreadable descriptor set, missing TLS files. Invalid config never starts the server
(DESIGN §10), so these never reach a caller.

`TranscodeError` is a JSON ⇄ protobuf conversion failure. Its message and path never contain
the offending value (DESIGN §12: issue messages never echo values); `to_capability_error`
turns it into INPUT_INVALID (request side, nothing was sent) or OUTPUT_INVALID (response side,
the upstream already ran).
"""

from __future__ import annotations

from typing import Literal

from gateway.errors import CapabilityError, Code, InputIssue
from gateway.upstream.state import ExecutionState, with_state

__all__ = [
    "TranscodeError",
    "UpstreamConfigError",
    "UpstreamUnreachable",
]


class UpstreamConfigError(Exception):
    """An upstream, descriptor or capability-to-method binding that cannot be loaded."""


class UpstreamUnreachable(UpstreamConfigError):
    """An upstream that did not answer while it was being loaded (not listening, unavailable,
    too slow): the same config may load once it answers, so a reload is tried again."""


class TranscodeError(Exception):
    """A value that does not fit its message type; `path` is JSONPath-like (`$.items[0].sku`)."""

    def __init__(self, direction: Literal["request", "response"], path: str, message: str) -> None:
        super().__init__(f"{direction} {path}: {message}")
        self.direction = direction
        self.path = path
        self.message = message

    def to_capability_error(self) -> CapabilityError:
        """INPUT_INVALID with one issue for requests; withheld OUTPUT_INVALID for responses."""
        if self.direction == "request":
            return with_state(
                CapabilityError(
                    Code.INPUT_INVALID,
                    reason=f"request transcoding: {self.path}: {self.message}",
                    issues=(InputIssue(self.path, self.message),),
                ),
                ExecutionState.NOT_STARTED,
            )
        # Stage 12 semantics: the upstream answered, so its effect happened (executed=True).
        return with_state(
            CapabilityError(
                Code.OUTPUT_INVALID,
                reason=f"response transcoding: {self.path}: {self.message}",
                executed=True,
            ),
            ExecutionState.COMPLETED,
        )
