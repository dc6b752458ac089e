"""What the state machine remembers of its own requests, and the invariants of issue 25 over
it, the upstream's log, the audit trail and Redis. Each check returns readable violations
(empty: it holds); every violation names the steps and ids it is about."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from capgate.v1 import gateway_pb2
from examples.orders import orders_pb2
from tests.gateway.harness import terminal_events
from tests.properties.kit import BUDGETED, outcome, state_name


@dataclass
class Request:
    """One Invoke or Resume the machine sent, and what came back (`result`, or `error`: the
    gRPC status when no envelope did, as for a caller's own deadline)."""

    step: int
    kind: str  # invoke | resume
    gateway: str
    correlation: str
    capability: str
    key: str = ""
    value: dict[str, Any] = field(default_factory=dict)
    approval_id: str = ""  # resume: the approval it resumes
    result: gateway_pb2.ExecutionResult | None = None
    error: str = ""
    disturbed: bool = False  # Redis's replies were withheld while it ran

    def describe(self) -> str:
        what = (
            f"invoke {self.capability} key={self.key or '-'} {self.value}"
            if self.kind == "invoke"
            else f"resume {self.approval_id}"
        )
        if self.result is None:
            answer = f"no envelope ({self.error})"
        else:
            answer = (
                f"{outcome(self.result)} {state_name(self.result)} exec={self.result.execution_id}"
            )
            if self.result.WhichOneof("outcome") == "approval_required":
                answer += f" approval={self.result.approval_required.approval.id}"
        return f"#{self.step} {what} on {self.gateway} (corr {self.correlation}) -> {answer}"


@dataclass
class Approval:
    """An approval some envelope announced, and the Invoke that asked for it."""

    id: str
    origin: Request
    input_hash: str


@dataclass
class Observation:
    """What the system holds after a step, once it settled."""

    upstream: list[orders_pb2.CallRecord]
    spent: float
    approvals: dict[str, tuple[str, str]]  # id -> (status, requesting execution id)
    running: list[tuple[str, str]]  # (capability, key) still `running` in the journal
    events: dict[str, list[dict[str, Any]]]  # execution id -> its audit events, in order


@dataclass
class Model:
    requests: list[Request] = field(default_factory=list)
    approvals: dict[str, Approval] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # the step log, with fault steps

    def by_correlation(self, correlation: str) -> Request | None:
        return next((r for r in self.requests if r.correlation == correlation), None)

    def origin(self, record: orders_pb2.CallRecord) -> Request | None:
        """The Invoke an upstream call stems from: via its approval for a resumed call."""
        if record.approval_id:
            approval = self.approvals.get(record.approval_id)
            return approval.origin if approval is not None else None
        return self.by_correlation(record.correlation_id)

    def who(self, record: orders_pb2.CallRecord) -> str:
        request = self.by_correlation(record.correlation_id)
        via = f" approval={record.approval_id}" if record.approval_id else ""
        name = request.describe() if request is not None else "an unknown request"
        return (
            f"[upstream call exec={record.execution_id} corr={record.correlation_id}{via}: {name}]"
        )


def _value_key(value: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(value.items()))


def repeats_never_execute(model: Model, obs: Observation) -> list[str]:
    """(1) at most one upstream call per capability and forwarded idempotency key (a key is
    scoped to its capability; the actor is one per sequence), per approval, and per
    (capability, key, input) a caller sent, a resumed approval counting for the Invoke that
    asked for it."""
    out = []
    forwarded = defaultdict(list)
    per_approval = defaultdict(list)
    per_key = defaultdict(list)
    for record in obs.upstream:
        forwarded[(record.capability, record.idempotency_key)].append(record)
        if record.approval_id:
            per_approval[record.approval_id].append(record)
        origin = model.origin(record)
        if origin is not None and origin.key:
            per_key[(origin.capability, origin.key, _value_key(origin.value))].append(record)
    for key, records in forwarded.items():
        if len(records) > 1:
            who = ", ".join(model.who(r) for r in records)
            out.append(
                f"forwarded idempotency key {key} reached the upstream {len(records)} times: {who}"
            )
    for approval_id, records in per_approval.items():
        if len(records) > 1:
            who = ", ".join(model.who(r) for r in records)
            out.append(f"approval {approval_id} reached the upstream {len(records)} times: {who}")
    for (capability, key, value), records in per_key.items():
        if len(records) > 1:
            who = ", ".join(model.who(r) for r in records)
            out.append(
                f"{capability} key={key} input={dict(value)} ran {len(records)} times "
                f"upstream: {who}"
            )
    return out


def one_terminal_event(model: Model, obs: Observation) -> list[str]:
    """(2) every execution with `capability.requested` ends in exactly one terminal event, its
    last (docs/observability.md)."""
    out = []
    for execution_id, events in obs.events.items():
        if not any(e["event"] == "capability.requested" for e in events):
            continue
        terminals = terminal_events(events)
        names = [e["event"] + (" (replayed)" if e.get("replayed") else "") for e in events]
        who = _by_execution(model, obs, execution_id)
        if len(terminals) != 1:
            out.append(
                f"execution {execution_id} has {len(terminals)} terminal events {names}: {who}"
            )
        elif terminals[0] is not events[-1]:
            last = "the terminal event is not its last"
            out.append(f"execution {execution_id}: {last} {names}: {who}")
    return out


_ENDS = {
    "completed": ("capability.completed",),
    "approval_required": ("capability.approval_requested",),
    "failed": ("capability.failed", "capability.denied"),
    "cancelled": ("capability.cancelled",),
}


def envelopes_agree_with_the_trail(model: Model, obs: Observation) -> list[str]:
    """(7) an envelope, also a replayed one, ends the way the trail says its execution ended
    (the first terminal event of the execution id it carries): the journal and the approval
    record keep what really happened, not a later cancel's rewrite."""
    out = []
    for request in model.requests:
        result = request.result
        if result is None or result.execution_id not in obs.events:
            continue
        ends = terminal_events(obs.events[result.execution_id])
        kind = str(result.WhichOneof("outcome"))
        if ends and ends[0]["event"] not in _ENDS[kind]:
            out.append(
                f"{request.describe()}: the envelope says {kind}, its execution "
                f"{result.execution_id} ended with {ends[0]['event']} in the trail"
            )
    return out


def approvals_consumed_iff_attempted(model: Model, obs: Observation) -> list[str]:
    """(3) an approval is consumed (or executed) iff an attempt for it reached the upstream;
    and no approval record outlives an execution that did not end by asking for it (an orphan:
    the create ran, the call ended otherwise). A record whose execution did end with
    `capability.approval_requested` was answered; a caller that gave up first never learns
    its id, which no gateway can prevent."""
    out = []
    attempted = Counter(r.approval_id for r in obs.upstream if r.approval_id)
    for approval_id, (status, requested_by) in sorted(obs.approvals.items()):
        known = model.approvals.get(approval_id)
        if known is None:
            ended = [e["event"] for e in terminal_events(obs.events.get(requested_by, []))]
            if ended != ["capability.approval_requested"]:
                out.append(
                    f"approval {approval_id} ({status}) exists, but its execution "
                    f"{requested_by} ended with {ended or 'no terminal event'} "
                    f"({_by_execution(model, obs, requested_by)})"
                )
            continue
        consumed = status in ("CONSUMED", "EXECUTED")
        if consumed != bool(attempted[approval_id]):
            resumes = [r.describe() for r in model.requests if r.approval_id == approval_id]
            out.append(
                f"approval {approval_id} (asked by {known.origin.describe()}) is {status} but "
                f"{attempted[approval_id]} attempt(s) reached the upstream; resumes: {resumes}"
            )
    return out


def _by_execution(model: Model, obs: Observation, execution_id: str) -> str:
    """The request behind an execution, found through its audit events' correlation id."""
    events = obs.events.get(execution_id, [])
    correlation = events[0].get("correlation_id", "") if events else ""
    request = model.by_correlation(correlation)
    return request.describe() if request is not None else f"corr {correlation or '?'}"


def budget_matches_upstream(model: Model, obs: Observation) -> list[str]:
    """(4) the budget's spent amount equals the sum of the amounts that reached the upstream."""
    reached: dict[str, float] = {}
    unknown = []
    for record in obs.upstream:
        origin = model.origin(record)
        if origin is None:
            unknown.append(model.who(record))
        elif origin.capability == BUDGETED:
            reached[record.execution_id] = float(origin.value["amount"])
    if unknown:
        return [f"upstream calls the machine cannot trace to a request: {unknown}"]
    expected = sum(reached.values())
    if obs.spent == expected:
        return []
    runs = [model.who(r) for r in obs.upstream if r.execution_id in reached]
    return [
        f"budget spent {obs.spent:g} but {expected:g} reached the upstream "
        f"({len(reached)} call(s): {runs})"
    ]


def states_tell_the_truth(model: Model, obs: Observation) -> list[str]:
    """(5) an envelope says COMPLETED only when its execution reached the upstream, and
    NOT_STARTED only when it did not; a completed outcome is COMPLETED."""
    out = []
    reached = {r.execution_id for r in obs.upstream}
    for request in model.requests:
        result = request.result
        if result is None:
            continue
        state, ran = state_name(result), result.execution_id in reached
        if (state == "COMPLETED" and not ran) or (state == "NOT_STARTED" and ran):
            out.append(f"{request.describe()}: says {state}, reached the upstream: {ran}")
        elif result.WhichOneof("outcome") == "completed" and state != "COMPLETED":
            out.append(f"{request.describe()}: completed but says {state}")
    return out


def no_key_left_running(model: Model, obs: Observation) -> list[str]:
    """(6) once every call returned, no idempotency key stays claimed (`running`): a claim
    whose call ended is released or completed, or every repeat is refused for good. The one
    exception is documented (docs/approvals.md): an outcome Redis could not record, for a call
    that reached the upstream, leaves the key to answer "outcome unknown" after its lease."""
    out = []
    for capability, key in obs.running:
        users = [r for r in model.requests if r.capability == capability and r.key == key]
        ran = any(any(model.origin(x) is u for u in users) for x in obs.upstream)
        if ran and any(r.disturbed for r in users):
            continue
        steps = [r.describe() for r in users]
        what = "" if ran else " although none of its calls reached the upstream"
        out.append(f"{capability} key={key} is still `running` in the journal{what}: {steps}")
    return out


INVARIANTS = {
    "I1 a key's repeat (or an approval) never executes twice": repeats_never_execute,
    "I2 exactly one terminal event per capability.requested": one_terminal_event,
    "I3 an approval is consumed iff an attempt went out": approvals_consumed_iff_attempted,
    "I4 the budget's spent amount equals what reached the upstream": budget_matches_upstream,
    "I5 execution_state tells the truth": states_tell_the_truth,
    "I6 no idempotency key left claimed after its call returned": no_key_left_running,
    "I7 every envelope agrees with its execution's trail": envelopes_agree_with_the_trail,
}


def replay_violation(recorded: Request, repeat: Request) -> str | None:
    """(0) a repeat of a finished keyed call with the same input answers the recorded envelope
    (its execution id and outcome). Other truthful answers that run nothing: a retryable
    NOT_STARTED UPSTREAM_UNAVAILABLE while Redis cannot be reached; and, when Redis's replies
    were withheld during the finished call (its recording may be lost, docs/approvals.md),
    IDEMPOTENCY_IN_PROGRESS until the claim's lease ends, then "outcome unknown"."""
    first, again = recorded.result, repeat.result
    assert first is not None
    if again is not None:
        code, state = outcome(again), state_name(again)
        same = again.execution_id == first.execution_id and code == outcome(first)
        unreachable = code == "UPSTREAM_UNAVAILABLE" and state == "NOT_STARTED"
        lost = recorded.disturbed and (
            code == "IDEMPOTENCY_IN_PROGRESS"
            or (code == "EXECUTION_FAILED" and state == "UNKNOWN" and not again.failed.retryable)
        )
        if same or (unreachable and again.failed.retryable) or lost:
            return None
    return (
        f"the repeat {repeat.describe()} did not answer the recorded envelope of "
        f"{recorded.describe()}"
    )
