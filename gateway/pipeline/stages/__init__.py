"""One module per pipeline stage, named by what it does; each docstring starts with the
seed-001 stage number and the invariants it enforces.

A stage returns None to go on, raises `CapabilityError` to fail, or returns one typed early
outcome (STYLE "Typed early exits") that the runner alone turns into the envelope and the
terminal audit event: `Suspended` (stage 8 recorded an approval request) or `Replayed` (a stored
envelope answers: an idempotent repeat at stage 10, a repeated Resume at stage 8).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from capgate.v1 import gateway_pb2

if TYPE_CHECKING:
    from gateway.state.approvals.records import ApprovalRecord


@dataclass(frozen=True, slots=True)
class Suspended:
    """Stage 8: the call waits for a human. The runner builds the `approval_required` envelope
    and emits `capability.approval_requested`, this execution's terminal event."""

    record: ApprovalRecord


@dataclass(frozen=True, slots=True)
class Replayed:
    """A recorded outcome answers instead of a new execution: `result` is the stored envelope
    (sent as stored), `of` the execution that produced it. The runner emits the terminal event
    that outcome ends in, marked `replayed: true` with `replay_of`."""

    result: gateway_pb2.ExecutionResult
    source: Literal["idempotency", "approval"]

    @property
    def of(self) -> str:
        return self.result.execution_id


Outcome = Suspended | Replayed
