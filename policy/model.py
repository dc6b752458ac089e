"""The evaluation vocabulary: phases, decisions, stances and what the gateway receives.

`Decision` is ordered so that combining stances is `max` (seed 001, stage 7:
deny > hide > require-approval > allow); `combine` holds that rule in one place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import IntEnum, StrEnum
from typing import Any

__all__ = [
    "ApprovalRequirement",
    "Decision",
    "EvalRequest",
    "Evaluation",
    "Limits",
    "Phase",
    "Stance",
    "combine",
]


class Phase(StrEnum):
    """Where in the pipeline policies run: Describe, stage 7, stage 9."""

    DISCOVERY = "discovery"
    INVOCATION = "invocation"
    EXECUTION = "execution"


class Decision(IntEnum):
    """A policy's effect; the integer order is the combining precedence."""

    ALLOW = 0
    REQUIRE_APPROVAL = 1
    HIDE = 2
    DENY = 3

    @property
    def label(self) -> str:
        """The spelling used in policy files, test suites and explain output."""
        return self.name.lower().replace("_", "-")

    @classmethod
    def from_label(cls, label: str) -> Decision:
        """Parse `deny`, `hide`, `require-approval` or `allow`."""
        try:
            return cls[label.upper().replace("-", "_")]
        except KeyError:
            raise ValueError(f"unknown effect {label!r}") from None


def combine(effects: Iterable[Decision]) -> Decision:
    """Combine enforced effects: the strongest wins, nothing at all means allow."""
    return max(effects, default=Decision.ALLOW)


@dataclass(frozen=True, slots=True)
class Stance:
    """One applicable policy's answer to one request.

    `effect` is None when the policy abstained (no rule matched). An error stance has
    `effect=DENY` and `error` set to a safe cause (never input values); SI-7.
    """

    policy: str
    mode: str
    effect: Decision | None
    rule: int | None
    message: str | None
    error: str | None

    @property
    def enforced(self) -> bool:
        """Shadow stances are recorded for audit and never change the decision."""
        return self.mode == "enforce"


@dataclass(frozen=True, slots=True)
class ApprovalRequirement:
    """The merged approval request: an approver must satisfy every part of it.

    `grantable` is false when any part forbids a standing grant; `quorum` is the largest
    part's (at least one approver per distinct role); `distinct_roles` the union of the
    parts'; `escalate_after` the latest of the parts that declare one, `escalation_roles` the
    union of their escalation roles and of the approver roles of every part without one.
    """

    reasons: tuple[str, ...]
    roles: frozenset[str]
    expires_in: timedelta | None
    policies: tuple[str, ...]
    grantable: bool = True
    quorum: int = 1
    distinct_roles: frozenset[str] = frozenset()
    escalate_after: timedelta | None = None
    escalation_roles: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The combined answer for one phase of one request, with every stance kept."""

    decision: Decision
    stances: tuple[Stance, ...]
    message: str | None
    approval: ApprovalRequirement | None
    failed: bool
    duration_s: float


@dataclass(frozen=True, slots=True)
class EvalRequest:
    """Everything a policy may see about one call. `input` is the validated value (SI-6)."""

    actor: Mapping[str, Any]
    capability: Mapping[str, Any]
    capability_policies: tuple[str, ...] = ()
    surface: str = ""
    input: Any = None
    now: datetime | None = None
    correlation_id: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)
    approval: Mapping[str, Any] | None = None
    # hook name -> the context attributes its PreInvoke returned (the gateway's pre-hooks).
    hooks: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # Execution phase: what is left of each gateway limit that applied to the call, by name
    # (`limits.<name>.remaining`; docs/limits.md). The limit script ran before stage 8.
    limits: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on evaluation (SI-7).

    `cpu_time_s` bounds the CPU time one policy's evaluation spends on the evaluating thread
    (`time.thread_time`): the policy's own work, never the time the thread waited for a CPU
    or for the GIL, so contention alone cannot fail a trivial policy. cel-expr-python cannot be
    interrupted (it holds the GIL), so the limit is checked after each policy's evaluation and
    a late result is discarded. Its comprehension budget is fixed by the binding at
    `ITERATION_BUDGET` iterations.
    """

    cpu_time_s: float = 0.050

    def __post_init__(self) -> None:
        if not self.cpu_time_s > 0:
            raise ValueError("Limits.cpu_time_s must be positive")


ITERATION_BUDGET = 10_000
"""Iterations cel-expr-python allows per evaluation (fixed in the binding)."""
