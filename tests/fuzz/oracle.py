"""What every reply must satisfy, whatever was sent (issue 14, "grow the project's own defences").

An `Observation` is one request's reply (an envelope or a gRPC status) together with the number
of calls the real upstream counted while it ran. The checks return violations as text, so that
one test can run many cases and report every broken one, each with its case name:

- a reply is a documented envelope (`ExecutionResult` whose error code, stage, kind and
  retryability are the row of `gateway/errors.py` for that code) or a documented transport
  status (`TRANSPORT`);
- `execution_state` tells the truth: NOT_STARTED exactly when the upstream counted no call,
  COMPLETED only when it did (a completed outcome always), never UNSPECIFIED;
- a refusal of invalid input is an input-validation (or not-found) code with nothing executed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import grpc
import orjson

from capgate.v1 import gateway_pb2, types_pb2
from gateway.errors import TABLE, Code, Kind

NOT_STARTED = types_pb2.EXECUTION_STATE_NOT_STARTED
COMPLETED = types_pb2.EXECUTION_STATE_COMPLETED
UNKNOWN = types_pb2.EXECUTION_STATE_UNKNOWN

# The gRPC statuses a caller listener answers without an envelope: authentication (stage 1,
# gateway/transport/servicer.py), a message over the listener's size limit (grpcio,
# gateway/transport/server.py), and a request message grpcio cannot decode (it never reaches the
# gateway's code; UNKNOWN, docs/observability.md).
TRANSPORT: dict[str, frozenset[grpc.StatusCode]] = {
    "auth": frozenset({grpc.StatusCode.UNAUTHENTICATED}),
    "size": frozenset({grpc.StatusCode.RESOURCE_EXHAUSTED}),
    "decode": frozenset({grpc.StatusCode.UNKNOWN}),
}

# Codes a malformed request may be refused with before anything runs: every code of the
# input-validation stage (whatever a fix adds there), and not-found for unknown ids.
INPUT_CODES: frozenset[str] = frozenset(
    code.value for code, spec in TABLE.items() if spec.stage == "input-validation"
)
NOT_FOUND_CODES: frozenset[str] = frozenset(
    {Code.CAPABILITY_NOT_FOUND.value, Code.APPROVAL_NOT_FOUND.value}
)


def code_name(err: types_pb2.CapabilityError) -> str:
    return types_pb2.ErrorCode.Name(err.code).removeprefix("ERROR_CODE_")


def error_of(result: gateway_pb2.ExecutionResult) -> types_pb2.CapabilityError | None:
    outcome = result.WhichOneof("outcome")
    if outcome == "failed":
        return result.failed
    if outcome == "cancelled":
        return result.cancelled
    return None


@dataclass
class Observation:
    case: str
    result: gateway_pb2.ExecutionResult | None = None
    status: grpc.StatusCode | None = None
    delta: int = 0  # upstream calls counted while the request ran

    def outcome(self) -> str:
        """A short label for tallies: `completed`, `failed:INPUT_INVALID`, `rpc:UNAUTHENTICATED`."""
        if self.result is None:
            return f"rpc:{self.status.name if self.status else '?'}"
        err = error_of(self.result)
        kind = self.result.WhichOneof("outcome") or "none"
        return f"{kind}:{code_name(err)}" if err is not None else kind


def envelope_violations(obs: Observation, transport: Iterable[str] = ()) -> list[str]:
    """The reply is a documented envelope, or one of the named transport statuses."""
    if obs.result is None:
        allowed = frozenset().union(*(TRANSPORT[t] for t in transport))
        if obs.status in allowed:
            return []
        return [f"{obs.case}: undocumented transport status {obs.status}"]
    result = obs.result
    outcome = result.WhichOneof("outcome")
    problems: list[str] = []
    if outcome is None:
        return [f"{obs.case}: envelope without an outcome"]
    if not result.execution_id:
        problems.append(f"{obs.case}: envelope without an execution id")
    err = error_of(result)
    if err is not None:
        name = code_name(err)
        if name not in Code.__members__:
            return [*problems, f"{obs.case}: undocumented error code {name}"]
        spec = TABLE[Code(name)]
        expected_kind = "cancelled" if spec.kind is Kind.CANCELLED else "failed"
        if outcome != expected_kind:
            problems.append(f"{obs.case}: {name} in a {outcome} envelope")
        if err.stage != spec.stage:
            problems.append(f"{obs.case}: {name} with stage {err.stage!r}")
        if err.retryable != spec.retryable:
            problems.append(f"{obs.case}: {name} with retryable={err.retryable}")
        if err.execution_state != result.execution_state:
            problems.append(f"{obs.case}: error and envelope disagree on execution_state")
    elif outcome == "completed":
        try:
            orjson.loads(result.completed.output_json)
        except orjson.JSONDecodeError:
            problems.append(f"{obs.case}: completed output is not JSON")
    elif outcome == "approval_required" and not result.approval_required.approval.id:
        problems.append(f"{obs.case}: approval_required without an approval id")
    return problems


def truth_violations(obs: Observation, *, replay: bool = False) -> list[str]:
    """`execution_state` agrees with what the upstream counted. `replay`: a stored envelope
    answered (idempotent repeat, repeated Resume), so the upstream counts nothing new."""
    if obs.result is None:
        return [] if obs.delta == 0 else [f"{obs.case}: {obs.delta} upstream calls, no envelope"]
    result, state = obs.result, obs.result.execution_state
    name = types_pb2.ExecutionState.Name(state)
    problems: list[str] = []
    if state == types_pb2.EXECUTION_STATE_UNSPECIFIED:
        problems.append(f"{obs.case}: execution_state UNSPECIFIED")
    outcome = result.WhichOneof("outcome")
    if outcome == "completed" and state != COMPLETED:
        problems.append(f"{obs.case}: completed outcome with execution_state {name}")
    if outcome == "approval_required" and state != NOT_STARTED:
        problems.append(f"{obs.case}: approval_required with execution_state {name}")
    err = error_of(result)
    if err is not None and err.executed_before_failure and state == NOT_STARTED:
        problems.append(f"{obs.case}: executed_before_failure with execution_state NOT_STARTED")
    if replay:
        if obs.delta:
            problems.append(f"{obs.case}: a replay made {obs.delta} upstream calls")
        return problems
    if obs.delta == 0 and state != NOT_STARTED:
        problems.append(f"{obs.case}: execution_state {name} but the upstream counted no call")
    if obs.delta > 0 and state == NOT_STARTED:
        problems.append(f"{obs.case}: NOT_STARTED but the upstream counted {obs.delta} call(s)")
    return problems


def refusal_violations(
    obs: Observation, codes: frozenset[str], transport: Iterable[str] = ()
) -> list[str]:
    """Refused with one of `codes` (or one of the named transport statuses), NOT_STARTED, and
    the upstream counted nothing."""
    problems: list[str] = []
    allowed = frozenset().union(*(TRANSPORT[t] for t in transport))
    err = error_of(obs.result) if obs.result is not None else None
    if obs.result is None and obs.status in allowed:
        pass
    elif err is None or code_name(err) not in codes:
        problems.append(f"{obs.case}: expected a refusal in {sorted(codes)}, got {obs.outcome()}")
    elif obs.result is not None and obs.result.execution_state != NOT_STARTED:
        problems.append(f"{obs.case}: a refusal with execution_state other than NOT_STARTED")
    if obs.delta:
        problems.append(f"{obs.case}: invalid input reached the upstream ({obs.delta} calls)")
    return problems


@dataclass
class Tally:
    """Requests sent and their outcomes, printed at the end of a test (the report's numbers)."""

    name: str
    outcomes: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)

    def add(self, obs: Observation, problems: list[str]) -> None:
        self.outcomes[obs.outcome()] += 1
        self.problems.extend(problems)

    def report(self) -> str:
        total = sum(self.outcomes.values())
        parts = ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items()))
        return f"[fuzz] {self.name}: {total} requests ({parts}); {len(self.problems)} violations"

    def verdict(self, limit: int = 40) -> str:
        shown = "\n".join(self.problems[:limit])
        more = len(self.problems) - limit
        return f"{self.report()}\n{shown}" + (f"\n... and {more} more" if more > 0 else "")
