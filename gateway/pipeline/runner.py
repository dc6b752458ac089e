"""The invocation pipeline: stage order is data (STYLE principle 1) and one runner is the only
broad error boundary (principle 2): it alone builds envelopes, terminal audit events and span
status. `INVOKE` is pinned to seed 001 by a test; reordering needs an ADR.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from capgate.v1 import gateway_pb2, types_pb2
from gateway.errors import CapabilityError, Code, Event
from gateway.pipeline import envelope
from gateway.pipeline.call import Call, Runtime
from gateway.pipeline.drain import MARGIN_S
from gateway.pipeline.edits import mark_edited
from gateway.pipeline.events import build, completion_fields, failure_fields, replay_event, stances
from gateway.pipeline.stages import Outcome, Replayed, Suspended
from gateway.pipeline.stages.actor import check_actor
from gateway.pipeline.stages.approval import approval_gate
from gateway.pipeline.stages.cache import cache_lookup, cache_store, hit_failure, unless_cached
from gateway.pipeline.stages.controls import attach_controls, replay_finished
from gateway.pipeline.stages.exposure import check_exposure
from gateway.pipeline.stages.grants import give_back as give_back_grant
from gateway.pipeline.stages.hooks import (
    merge_hook_asks,
    run_failure_hooks,
    run_post_hooks,
    run_pre_hooks,
)
from gateway.pipeline.stages.identity import assign_execution_id
from gateway.pipeline.stages.invoke import invoke_procedure
from gateway.pipeline.stages.limits import enforce_limits, spend_after_inline_approval
from gateway.pipeline.stages.limits import give_back as give_back_limits
from gateway.pipeline.stages.output import redact_output, validate_output
from gateway.pipeline.stages.policies import (
    evaluate_execution_policies,
    evaluate_invocation_policies,
    hide_before_validation,
    reevaluate_invocation_policies,
)
from gateway.pipeline.stages.resolve import resolve_capability
from gateway.pipeline.stages.resume import (
    consume_approval,
    load_approval,
    verify_capability_digest,
    verify_input_hash,
)
from gateway.pipeline.stages.validate import validate_input
from gateway.state.approvals.convert import to_proto
from gateway.telemetry import child_span, link_to, metrics, root_span
from gateway.upstream.call import rerun_safe
from gateway.values.jsonvalue import dumps

log = logging.getLogger("capgate.pipeline")
_perf = time.perf_counter

StageFn = Callable[[Call, Runtime], Awaitable[Outcome | None]]


@dataclass(frozen=True, slots=True)
class Stage:
    number: int
    name: str
    run: StageFn
    span: str | None = None
    span_kind: SpanKind = SpanKind.INTERNAL

    label: tuple[str] = field(init=False)  # the stage-latency metric's label, built once

    def __post_init__(self) -> None:
        object.__setattr__(self, "label", (self.name,))


# Governance hooks (seed 002, ADR 0027, docs/hooks.md). Pre-hooks after the actor check (6):
# they see only validated input from a well-formed actor, of a capability exposure and the
# input-free hide policies let through; before the invocation policies (7) so that their
# context is visible to policies (`hooks.<hook>.<attr>`) and before the approval gate (8) so
# that an updated input is the one the approval binds. No span of their own: each hook call is
# a CLIENT span (`agent.hook`).
PRE_HOOKS = Stage(6, "pre-hooks", run_pre_hooks)
# Right after the policies: a hook's ask joins their approval requirement (a hook's allow has
# nothing to remove: it never lowers a deny, hide or require-approval).
HOOK_ASKS = Stage(7, "hook-asks", merge_hook_asks)
# After output validation (12), so a hook sees only valid output and its updated_output is
# validated again; before redaction (13), so redaction applies to what the hook returned.
POST_HOOKS = Stage(12, "post-hooks", run_post_hooks)

# The result cache (ADR 0024, docs/cache.md). The lookup after controls (10): stages 1-10 ran,
# so exposure, validation, policies, the approval gate, execution-phase policies, the
# idempotency claim and `capability.started` are never skipped by a hit. The store right after
# output validation (12): only an output stage 12 accepted is stored, validated and before
# post-hooks and redaction, which run per request on a hit too.
CACHE_LOOKUP = Stage(10, "cache-lookup", cache_lookup)
CACHE_STORE = Stage(12, "cache-store", cache_store)

# Rate limits and budgets (ADR 0022): after the invocation policies, so a denied or hidden
# call spends nothing and reveals nothing; before the approval gate, so an over-budget call
# can become an approval request (`on_exceed: require-approval`) and a refused one never
# creates a pending approval. Numbered 7: the seed has no stage between 7 and 8.
LIMITS = Stage(7, "limits", enforce_limits)
# After the gate: an inline approver approved an over-budget call in this execution, so what
# was not spent at LIMITS is spent now (a no-op unless that happened).
LIMITS_AFTER_INLINE_APPROVAL = Stage(8, "limits-inline-approval", spend_after_inline_approval)

# Stage 10's journal, read without claiming (ADR 0034); numbered 6, where it runs.
IDEMPOTENCY_REPLAY = Stage(6, "idempotency-replay", replay_finished)

# Seed 001, stages 2-13 (1 is the listener; 14-15 are the runner's completion).
INVOKE: tuple[Stage, ...] = (
    Stage(2, "execution-identity", assign_execution_id),
    Stage(3, "resolve", resolve_capability),
    Stage(4, "exposure", check_exposure),
    # Still stage 4, concealment: input-free `hide` policies decide before validation, so that
    # bad input to a hidden capability answers as for a missing one (SI-8; ADR 0016).
    # No span of its own: most capabilities have no such policy and skip it at once.
    Stage(4, "input-free-hide", hide_before_validation),
    Stage(5, "input-validation", validate_input),
    Stage(6, "actor-check", check_actor),
    # The idempotency journal read early (ADR 0034): a repeat of a finished keyed call answers
    # its recording before pre-hooks, policies, limits or the approval gate, which govern new
    # executions, could turn it into another answer; after 3-6, so a capability removed, hidden
    # or unexposed since answers as missing (SI-8) and the key's input hash is the validated one.
    IDEMPOTENCY_REPLAY,
    PRE_HOOKS,
    Stage(7, "invocation-policies", evaluate_invocation_policies, "agent.policy_evaluation"),
    HOOK_ASKS,
    LIMITS,
    # agent.approval_request: opened in stages/approval.py only when an approval is requested.
    Stage(8, "approval-gate", approval_gate),
    LIMITS_AFTER_INLINE_APPROVAL,
    Stage(9, "execution-policies", evaluate_execution_policies, "agent.policy_evaluation"),
    Stage(10, "controls", attach_controls),
    CACHE_LOOKUP,
    # agent.procedure_execution: a CLIENT span per attempt, opened in stages/invoke.py.
    # Stages 11-12 do nothing when the cache supplied the validated output.
    Stage(11, "procedure-invocation", unless_cached(invoke_procedure)),
    Stage(12, "output-validation", unless_cached(validate_output)),
    CACHE_STORE,
    POST_HOOKS,
    Stage(13, "redaction", redact_output),
)

# Resume re-enters at stage 8: the record is loaded and checked first, stages 3-7 re-run on the
# stored input (deny/hide re-evaluated, ADR 0007), the approval is consumed, then 9 onwards.
RESUME: tuple[Stage, ...] = (
    INVOKE[0],
    Stage(8, "approval-load", load_approval, "agent.approval_request"),
    INVOKE[1],
    INVOKE[2],
    INVOKE[3],
    Stage(8, "approval-input-hash", verify_input_hash),
    INVOKE[4],
    Stage(8, "approval-capability-digest", verify_capability_digest),
    INVOKE[5],
    # A Resume of a keyed call (the key travels in the approval record) whose key already
    # finished, by a concurrent Resume or a repeat, answers that recording before the approval
    # is consumed: nothing runs twice, no approval is spent on a replay (ADR 0034).
    IDEMPOTENCY_REPLAY,
    # Pre-hooks again, on the stored (approved) input: their context is current for the
    # re-evaluated policies; an input a re-run hook changes is refused (APPROVAL_INPUT_MISMATCH).
    PRE_HOOKS,
    Stage(7, "invocation-policies", reevaluate_invocation_policies, "agent.policy_evaluation"),
    # Limits again on the stored input, before the approval is consumed: a refused Resume
    # keeps its approval for a later retry; an approved over-budget call passes once.
    LIMITS,
    Stage(8, "approval-consume", consume_approval, "agent.approval_request"),
    *INVOKE[[s.name for s in INVOKE].index("limits-inline-approval") + 1 :],
)


async def run(
    call: Call, rt: Runtime, stages: tuple[Stage, ...] = INVOKE
) -> gateway_pb2.ExecutionResult:
    """Runs the stages; never raises for governed failures (seed 001: invoke never throws).

    A caller's cancel or a shutdown may interrupt the stages at any await until the upstream
    answered. From there on (stages 12-13, then the settlement) a cancel no longer changes what
    the call records or answers: a tail that can wait (post-hooks, a cache store) finishes on a
    task of its own (`_finish`); one that cannot runs inline up to its settlement. Every outcome
    is settled as one shielded unit (`_settle`): records first, the terminal event last, never
    a second one (issue 25). The root span ends when the call has finished, not when its
    caller left."""
    with root_span("agent.capability_call", end_on_exit=False) as span:
        try:
            return await _run(call, rt, stages, span)
        finally:
            finishing = call.finishing
            if finishing is None or finishing.done():
                span.end()
            else:
                finishing.add_done_callback(lambda _: span.end())


async def _run(
    call: Call, rt: Runtime, stages: tuple[Stage, ...], span: Span
) -> gateway_pb2.ExecutionResult:
    started = _perf()
    try:
        with rt.drain.track():  # a shutdown may cancel the stages, not what follows
            head, tail = _split(stages)
            outcome = await _rows(call, rt, head)
            if outcome is None and tail:
                # The upstream was called (or the cache answered): the rest runs to its end.
                if not _tail_waits(call):
                    return await _finish(call, rt, tail, span, started)
                call.finishing = rt.drain.keep(
                    asyncio.ensure_future(_finish(call, rt, tail, span, started))
                )
                return await asyncio.shield(call.finishing)
    except CapabilityError as err:
        _observe(call, span, err.spec.kind.value, err.code.value, started)
        return await _failed(call, rt, err)
    except asyncio.CancelledError:
        if call.finishing is not None or call.result is not None:
            # The outcome is decided (the upstream answered, or it is being settled): it
            # stands, whatever the caller does. A shutdown still answers the caller: with the
            # outcome when it is ready within the margin, else with what the state says (the
            # effect happened; never the UNAVAILABLE of an aborted RPC, which reads as safe to
            # send again).
            if rt.drain.claimed():
                return await _answer_decided(call, rt)
            raise
        if rt.drain.claimed():
            # A shutdown's grace period is ending (gateway/pipeline/drain.py): answer the
            # caller with the truth instead of letting grpc.aio abort the RPC as UNAVAILABLE.
            shutdown = drained(call)
            _observe(call, span, shutdown.spec.kind.value, shutdown.code.value, started)
            return await _failed(call, rt, shutdown)
        # The caller went away: record it, then let cancellation propagate (nobody to answer).
        gone = CapabilityError(Code.CANCELLED, reason="caller cancelled", executed=_answered(call))
        _observe(call, span, gone.spec.kind.value, gone.code.value, started)
        await asyncio.shield(_failed(call, rt, gone))
        raise
    except Exception as exc:
        if call.result is not None:  # settled already: the error came after (logged there)
            return settled(call.result)
        return await _unexpected(call, rt, exc, span, started)
    # An early exit, or a table without an upstream call: settled here, shielded.
    if isinstance(outcome, Suspended):
        _observe(call, span, "approval_required", "", started)
        return await _suspended(call, rt, outcome)
    if isinstance(outcome, Replayed):
        _observe(call, span, "replayed", "", started)
        return await _replayed(call, rt, outcome)
    _observe(call, span, "completed", "", started)
    return await _completed(call, rt)


def settled(result: object) -> gateway_pb2.ExecutionResult:
    assert isinstance(result, gateway_pb2.ExecutionResult)
    return result


async def _answer_decided(call: Call, rt: Runtime) -> gateway_pb2.ExecutionResult:
    """A shutdown's answer for a call whose outcome is decided: the outcome, when it is
    settled within half the drain's margin; otherwise the cancelled envelope the state
    tells (COMPLETED: executed, not retryable), built without recording anything (the
    finishing task records the real outcome)."""
    if call.finishing is not None:
        await asyncio.wait({call.finishing}, timeout=SHUTDOWN_HOOKS_S)
        finishing = call.finishing
        if finishing.done() and not finishing.cancelled() and finishing.exception() is None:
            return settled(finishing.result())
    if call.result is not None:
        return settled(call.result)
    return _failure_envelope(call, rt, drained(call))


def _tail_waits(call: Call) -> bool:
    """Whether stages 12-13 of this call can wait (post-hooks, a cache store): then they run on
    a task of their own, out of the caller's reach. Otherwise they never suspend, so nothing
    can interrupt them before the settlement, and they run inline (a task and a shield cost
    about 15 µs)."""
    prepared = call.prepared
    return prepared is not None and (bool(prepared.hooks.post) or prepared.cache_scope is not None)


async def _rows(call: Call, rt: Runtime, rows: tuple[Stage, ...]) -> Outcome | None:
    """Runs stage rows in order until one returns a typed early exit."""
    outcome: Outcome | None = None
    for stage in rows:
        # Inline rather than a helper coroutine: one frame less per stage, 13 per call.
        began = _perf()
        try:
            if stage.span is None:
                outcome = await stage.run(call, rt)
            else:
                attrs = {"capgate.stage": stage.number}
                with child_span(stage.span, stage.span_kind, attrs):
                    outcome = await stage.run(call, rt)
        finally:
            metrics.stage_duration.observe(_perf() - began, stage.label)
        if outcome is not None:
            break  # a typed early exit: suspended or replayed
    return outcome


# By the table's identity: hashing a 21-row tuple of dataclasses costs a few µs a call. Tables
# are module constants (INVOKE, RESUME, MCP's), so the map stays this small.
_SPLITS: dict[int, tuple[tuple[Stage, ...], tuple[Stage, ...], tuple[Stage, ...]]] = {}


def _split(stages: tuple[Stage, ...]) -> tuple[tuple[Stage, ...], tuple[Stage, ...]]:
    """(up to and including the upstream call, what follows it); a table without the upstream
    call is all head. Computed once per table."""
    known = _SPLITS.get(id(stages))
    if known is None or known[0] is not stages:
        names = [stage.name for stage in stages]
        cut = names.index(UPSTREAM_ROW) + 1 if UPSTREAM_ROW in names else len(stages)
        known = _SPLITS[id(stages)] = (stages, stages[:cut], stages[cut:])
    return known[1], known[2]


UPSTREAM_ROW = "procedure-invocation"


async def _finish(
    call: Call, rt: Runtime, tail: tuple[Stage, ...], span: Span, started: float
) -> gateway_pb2.ExecutionResult:
    """Stages 12-13 after the upstream answered, then the settlement: a task of its own, so
    a caller who leaves now cannot turn an effect that happened into CANCELLED (its output is
    recorded for a repeat). Bounded like any call: output checks, post-hooks within their
    timeouts and the call's deadline, the cache write, the settlement within SETTLE_S."""
    try:
        try:
            await _rows(call, rt, tail)  # no early exits after the upstream call
        except CapabilityError as err:
            _observe(call, span, err.spec.kind.value, err.code.value, started)
            return await _failed(call, rt, err)
        _observe(call, span, "completed", "", started)
        return await _completed(call, rt)
    except Exception as exc:  # the whole tail is one error boundary: one terminal event
        if call.result is not None:  # settled already: what failed came after
            log.warning("after settling %s: %s", call.execution_id, type(exc).__name__)
            return settled(call.result)
        return await _unexpected(call, rt, exc, span, started)


async def _unexpected(
    call: Call, rt: Runtime, exc: Exception, span: Span, started: float
) -> gateway_pb2.ExecutionResult:
    log.exception("unexpected error in execution %s", call.execution_id, exc_info=exc)
    # After the upstream answered (stages 12-13) the effect happened: say so (the envelope's
    # execution_state stays the truthful call.state).
    fault = CapabilityError(
        Code.EXECUTION_FAILED,
        reason=f"unexpected {type(exc).__name__}",
        executed=_answered(call),
    )
    _observe(call, span, fault.spec.kind.value, fault.code.value, started)
    return await _failed(call, rt, fault)


def drained(call: Call) -> CapabilityError:
    """The answer to a call a shutdown cancelled (gateway/pipeline/drain.py). Retrying it elsewhere
    is safe only when no request reached the upstream; otherwise the envelope says UNKNOWN and the
    caller decides (a retry could run the effect twice)."""
    not_started = call.state == types_pb2.EXECUTION_STATE_NOT_STARTED
    return CapabilityError(
        Code.CANCELLED,
        message="The gateway is shutting down; the call was cancelled.",
        reason="gateway shutdown",
        retryable=not_started,
        executed=call.state == types_pb2.EXECUTION_STATE_COMPLETED,
    )


def _observe(call: Call, span: Span, outcome: str, code: str, started: float) -> None:
    """Root span attributes and status, and the invocation metrics. Label values are bounded:
    a capability id the registry does not hold is `(unknown)` (callers choose those ids)."""
    capability = call.prepared.capability.id if call.prepared is not None else "(unknown)"
    metrics.invocations.add((capability, call.surface, outcome, code))
    metrics.invocation_duration.observe(_perf() - started, (capability, outcome))
    if not span.is_recording():
        return
    span.set_attributes(
        {
            "capgate.capability_id": call.capability_id[:256],
            "capgate.surface": call.surface,
            "capgate.revision": call.snapshot.revision,
            "capgate.execution_id": call.execution_id,
            "capgate.outcome": outcome,
            "capgate.attempts": call.attempts,
        }
    )
    if call.cache:  # hit | miss, capabilities with a cache (docs/cache.md)
        span.set_attribute("capgate.cache", call.cache)
    if call.approval_id:
        span.set_attribute("capgate.approval_id", call.approval_id[:256])
    if call.approval is not None and call.approval.traceparent:
        link = link_to(call.approval.traceparent)  # Resume: back to the approval's request
        if link is not None:
            span.add_link(link.context, {"capgate.link": "approval_request"})
    if code:
        span.set_attribute("capgate.code", code)
        span.set_status(Status(StatusCode.ERROR, code))


def _answered(call: Call) -> bool:
    """Whether the upstream answered: a failure from here on was executed before failing."""
    return call.state == types_pb2.EXECUTION_STATE_COMPLETED


async def _suspended(call: Call, rt: Runtime, outcome: Suspended) -> gateway_pb2.ExecutionResult:
    """Stage 8 recorded an approval request: the envelope and the terminal event."""
    record = outcome.record
    result = envelope.approval_required(
        execution_id=call.execution_id,
        capability_id=record.capability_id,
        duration_s=_duration(call, rt),
        revision=call.snapshot.revision,
        approval=to_proto(record, include_input=False, redactor=None),
    )
    event = build(
        Event.APPROVAL_REQUESTED,
        call,
        rt.wall(),
        approval_id=record.id,
        reasons=list(record.reasons),
        expires_at=record.expires_at,
        duration_ms=round(_duration(call, rt) * 1000, 3),
        stances=stances(call),
    )
    # It waits to run: its Resume spends (docs/limits.md).
    await _settle(call, rt, result, lambda: event, _give_back_unrun(call, rt))
    return result


async def _replayed(call: Call, rt: Runtime, outcome: Replayed) -> gateway_pb2.ExecutionResult:
    """A stored envelope answers, as stored (its execution id is the one that ran). This
    execution still ends in one terminal event, marked as a replay; nothing is recorded again,
    and nothing this execution took is kept: budgets and an approval it consumed (a Resume
    that lost the key to a concurrent one after consuming) are given back (ADR 0034)."""
    duration_ms = round(_duration(call, rt) * 1000, 3)
    event = replay_event(call, outcome.result, outcome.source, rt.wall(), duration_ms)

    def terminal() -> dict[str, Any]:
        if call.approval_released:  # as every terminal event of a call that gave one back
            event["approval_released"] = True
        if call.grant_released:  # built before the grant's use was given back
            event["grant_released"] = True
        return event

    await _settle(
        call, rt, outcome.result, terminal, _give_back_unrun(call, rt, release_approval=True)
    )
    return outcome.result


# The settlement's own bound: the outcome's records are written within it even when the caller
# has gone (a stuck Redis cannot hold a finished call's task forever); past it each unwritten
# record is logged and counted, and the terminal event is emitted all the same.
SETTLE_S = 10.0


async def _settle(
    call: Call,
    rt: Runtime,
    result: gateway_pb2.ExecutionResult,
    event: Callable[[], dict[str, Any]],
    recording: Awaitable[object],
) -> None:
    """Records a finished execution's outcome (envelope in the journal and the approval, the
    limit spend settled, an approval given back) and emits its terminal event, as ONE unit:
    a task of its own that the caller's cancel does not reach (shielded), bounded by
    `SETTLE_S`, which a shutdown waits for. The terminal event goes last, built once the
    records are written: events a record emits (an approval given back) come before it, and a
    reader who sees it finds the journal written."""
    call.result = result

    async def unit() -> None:
        try:
            async with asyncio.timeout(SETTLE_S):
                await recording
        except TimeoutError:
            log.warning("recording the outcome of %s timed out", call.execution_id)
            metrics.outcome_record_failures.add(("settle_timeout",))
        except Exception as exc:  # recording never escapes: logged by type, counted
            log.warning(
                "recording the outcome of %s failed (%s)", call.execution_id, type(exc).__name__
            )
            metrics.outcome_record_failures.add(("settle",))
        finally:
            rt.audit.emit(event())

    if call.finishing is not None and asyncio.current_task() is call.finishing:
        # Already on the task that finishes the call (kept by the drain, out of the caller's
        # reach): one task per call is enough (a task and a shield cost about 15 µs).
        await unit()
        return
    await asyncio.shield(rt.drain.keep(asyncio.ensure_future(unit())))


async def _give_back_unrun(call: Call, rt: Runtime, *, release_approval: bool = False) -> None:
    """A call that ends without its upstream called keeps nothing it took (a spend whose reply
    was lost included)."""
    await _collect_unanswered(call, rt)
    if call.limit_spent:
        await _guarded("limits", call, give_back_limits(call, rt))
    await give_back_grant(call, rt, None)  # a replayed call ran nothing: its grant use returns
    if release_approval:
        # A replayed Resume that consumed its approval (it lost the key to a concurrent
        # execution after consuming) ran nothing: the approval goes back to `approved`.
        await _give_back_approval(call, rt, None)


def _duration(call: Call, rt: Runtime) -> float:
    return rt.monotonic() - call.started if call.started else 0.0


async def _completed(call: Call, rt: Runtime) -> gateway_pb2.ExecutionResult:
    result = envelope.completed(
        execution_id=call.execution_id,
        capability_id=call.capability_id,
        attempts=call.attempts,
        duration_s=_duration(call, rt),
        output_json=dumps(call.output).decode(),
        revision=call.snapshot.revision,
        approval_id=call.approval_id if call.approval is not None else "",
    )
    result.grant_id = call.grant_id
    mark_edited(result, call)  # the edited input ran (ADR 0040)
    duration_ms = round(_duration(call, rt) * 1000, 3)
    event = build(Event.COMPLETED, call, rt.wall(), **completion_fields(call, duration_ms))
    await _settle(call, rt, result, lambda: event, _record_outcome(call, rt, result))
    return result


def _failure_envelope(call: Call, rt: Runtime, err: CapabilityError) -> gateway_pb2.ExecutionResult:
    result = envelope.failure(
        err,
        execution_id=call.execution_id,
        capability_id=call.capability_id,
        attempts=call.attempts,
        duration_s=_duration(call, rt),
        state=call.state,
        revision=call.snapshot.revision,
        approval_id=call.approval_id if call.approval is not None else "",
        rerun_safe=call.prepared is not None and rerun_safe(call.prepared.capability),
    )
    result.grant_id = call.grant_id
    mark_edited(result, call)
    return result


async def _failed(call: Call, rt: Runtime, err: CapabilityError) -> gateway_pb2.ExecutionResult:
    err = hit_failure(call, err)  # a cache hit sent nothing upstream (docs/cache.md)
    result = _failure_envelope(call, rt, err)
    duration_ms = round(_duration(call, rt) * 1000, 3)
    # What a retry depends on comes first, shielded: the approval given back, the outcome
    # recorded (idempotency, approval, budgets). A shutdown that cancels this task at the end of
    # its grace (grpc.aio's stop) cannot leave an approval consumed or a key running for
    # nothing run: the recording finishes on its own.
    call.result = result
    recording = rt.drain.keep(asyncio.ensure_future(_record_failure(call, rt, err, result)))
    try:
        await asyncio.shield(recording)
        # Then the observe-only PostFailure hooks (every terminal failure a caller could see,
        # never a concealed one): bounded by each hook's timeout and the caller's deadline, and
        # during a shutdown by the drain's margin too.
        await _observe_failure(call, rt, err)
    finally:
        # The terminal event, last: it records the hooks' calls and whether the approval was
        # given back. Cancelled while still recording, it follows once the recording ends.
        if recording.done():
            _emit_failure(call, rt, err, duration_ms, recording)
        else:
            recording.add_done_callback(
                lambda done: _emit_failure(call, rt, err, duration_ms, done)
            )
    return result


async def _record_failure(
    call: Call, rt: Runtime, err: CapabilityError, result: gateway_pb2.ExecutionResult
) -> bool:
    """The approval given back (or not), then the outcome recorded; whether it was given back.
    Budgets first: a forced spend is credited while this execution still holds the approval,
    never once another Resume could count on it (docs/limits.md)."""
    released = False
    try:
        async with asyncio.timeout(SETTLE_S):  # the settlement's bound, as for the others
            await _collect_unanswered(call, rt)
            if call.limit_spent and call.state == types_pb2.EXECUTION_STATE_NOT_STARTED:
                await _guarded("limits", call, give_back_limits(call, rt))
            released = await _give_back_approval(call, rt, err)
            await give_back_grant(call, rt, err)
            await _record_outcome(call, rt, result)
    except TimeoutError:
        log.warning("recording the outcome of %s timed out", call.execution_id)
        metrics.outcome_record_failures.add(("settle_timeout",))
    return released


# Approval requests the store refused before writing anything: no record to withdraw.
_REFUSED_BEFORE_STORING = frozenset({Code.UNAUTHENTICATED, Code.APPROVAL_LIMIT_EXCEEDED})


async def _collect_unanswered(call: Call, rt: Runtime) -> None:
    """A cancel that landed while the claim, a limit spend or an approval request was in
    Redis: the request ran on, shielded; its answer says what it took, and a call that never
    ran keeps none of it (issue 25): the spend is given back with the rest, the unannounced
    approval withdrawn. An approval request whose reply was lost (a timeout, a dropped
    connection) may have been stored: it is withdrawn too (a no-op when it was not)."""
    if call.claiming is not None:
        # The claim's answer first: a release must not reach Redis before a claim it undoes.
        claiming, call.claiming = call.claiming, None
        with contextlib.suppress(Exception):
            await claiming
    if call.limits_unanswered is not None:
        (charges, checking), call.limits_unanswered = call.limits_unanswered, None
        try:
            verdicts = await checking
        except Exception:
            call.limits_lost = charges  # no answer at all: its receipt tells
        else:
            if all(v.passed for v in verdicts):
                call.limit_spent = rt.limiter.spent(charges, verdicts)
    if call.limits_lost is not None and call.state == types_pb2.EXECUTION_STATE_NOT_STARTED:
        # In the background, kept by the drain: with Redis unreachable the undo would wait for
        # its own timeout, and the caller's answer does not depend on it.
        charges, call.limits_lost = call.limits_lost, None
        undo = rt.limiter.give_back_receipt(charges, call.execution_id)
        rt.drain.keep(asyncio.ensure_future(_guarded("limits", call, undo)))
    if call.approval_creating is not None:
        (asked, creating), call.approval_creating = call.approval_creating, None
        try:
            record = await creating
        except CapabilityError as exc:
            if exc.code in _REFUSED_BEFORE_STORING:
                return  # refused before anything was stored: nothing to withdraw
            record = asked  # a lost reply (timeout, dropped connection): it may be stored
        except Exception:
            record = asked
        if record is asked:  # the reply was lost: undone in the background, as above
            withdraw = rt.approvals.withdraw(record)
            rt.drain.keep(asyncio.ensure_future(_guarded("approval", call, withdraw)))
        else:  # the record is there: withdrawn before the answer says nothing was asked
            await _guarded("approval", call, rt.approvals.withdraw(record))


# At most this long for PostFailure hooks once a shutdown began (or from their start, when
# they start during one): the drain cancels calls MARGIN_S before the end of its grace, and
# the envelope must still be sent after the hooks, before grpc.aio aborts the RPC.
SHUTDOWN_HOOKS_S = MARGIN_S / 2


async def _observe_failure(call: Call, rt: Runtime, err: CapabilityError) -> None:
    """The PostFailure hooks; observe only, so this never raises. A shutdown cuts them short
    (the trail marks the call): they may not keep the caller from its envelope."""
    hooks = asyncio.ensure_future(run_failure_hooks(call, rt, err))
    try:
        with contextlib.suppress(Exception):  # the hooks' own error: logged below
            if not rt.drain.closing:
                await rt.drain.or_closing(asyncio.shield(hooks))  # until they end or shutdown
            if not hooks.done():
                await asyncio.wait({hooks}, timeout=SHUTDOWN_HOOKS_S)
    finally:
        if not hooks.done():
            hooks.cancel()
            await asyncio.wait({hooks}, timeout=SHUTDOWN_HOOKS_S)  # the call's trail record
            for record in call.hook_calls:  # the hook call cut short: marked in the trail
                if record["call"] == "post_failure" and "decision" not in record:
                    record.setdefault("error", "cut short by the shutdown")
        else:
            _hooks_failed(call, hooks)


def _hooks_failed(call: Call, hooks: asyncio.Future[None]) -> None:
    exc = None if hooks.cancelled() else hooks.exception()
    if exc is not None:  # observe only: an unexpected error changes nothing either
        log.warning("post-failure hooks of %s failed (%s)", call.execution_id, type(exc).__name__)


def _emit_failure(
    call: Call,
    rt: Runtime,
    err: CapabilityError,
    duration_ms: float,
    recording: asyncio.Future[bool],
) -> None:
    if not call.execution_id:
        return
    fields = failure_fields(call, err, duration_ms)
    if not recording.cancelled() and recording.exception() is None and recording.result():
        fields["approval_released"] = True
    rt.audit.emit(build(err.spec.event, call, rt.wall(), **fields))


async def _give_back_approval(call: Call, rt: Runtime, err: CapabilityError | None) -> bool:
    """A resumed call that consumed its approval and then failed before any request reached
    the upstream (NOT_STARTED), for a reason other than governance (the error table's
    `capability.denied` codes: a stage-9 deny stays consumed and denied), gives the approval
    back: `approved` again, atomically and only by this execution, so the requester can Resume
    once more (docs/approvals.md). Emitted before the terminal event, which stays the last.

    So does one whose consume was sent but never answered (`call.consume_attempted` while
    `call.approval` is still the approved record: the reply was lost to a timeout, a cancel or
    a dropped connection, and the script may have run): the release acts only on a record this
    execution consumed, so a consume that never ran leaves nothing to give back."""
    record = call.approval
    unanswered = call.consume_attempted and record is not None and record.status != "consumed"
    if (
        record is None
        or rt.approvals is None
        or not (record.status == "consumed" or unanswered)
        or call.state != types_pb2.EXECUTION_STATE_NOT_STARTED
        or (err is not None and err.spec.event is Event.DENIED)
    ):
        return False
    try:
        released = await rt.approvals.release(record.id, resumed_execution_id=call.execution_id)
    except CapabilityError as exc:
        if unanswered and exc.code is Code.APPROVAL_CONSUMED:
            return False  # the consume never ran (or ran for nobody): the record is as it was
        _release_failed(call, record.id, exc)
        return False
    except Exception as exc:  # recording never escapes the runner: the record stays consumed
        _release_failed(call, record.id, exc)
        return False
    call.approval = released
    call.approval_released = True
    if unanswered:  # the release proves the consume ran for this execution: audit both
        rt.audit.emit(build(Event.APPROVAL_CONSUMED, call, rt.wall(), approval_id=record.id))
    code = {} if err is None else {"code": err.code.value}  # a replay has no error code
    rt.audit.emit(build(Event.APPROVAL_RELEASED, call, rt.wall(), approval_id=record.id, **code))
    return True


def _release_failed(call: Call, approval_id: str, exc: Exception) -> None:
    """A give-back that failed: the record stays consumed (logged without payloads, counted)."""
    log.warning(
        "could not give back approval %s of %s (%s)",
        approval_id,
        call.execution_id,
        type(exc).__name__,
    )
    metrics.outcome_record_failures.add(("approval_release",))


async def _record_outcome(call: Call, rt: Runtime, result: gateway_pb2.ExecutionResult) -> None:
    """Store the envelope where a repeat must find it: the idempotency journal, the approval.
    Never raises: a failure here (Redis refusing a write, however it refuses) is logged
    without payloads and counted, never a second terminal event.
    A call whose upstream was never called gives back what it spent from budgets."""
    if call.limit_spent and call.state == types_pb2.EXECUTION_STATE_NOT_STARTED:
        await _guarded("limits", call, give_back_limits(call, rt))
    if call.idempotency_scope is not None and rt.idempotency is not None:
        # Only while this execution still holds the key: once its TTL ended another execution
        # may have claimed it, and that claim is neither deleted nor overwritten.
        scope, holder = call.idempotency_scope, call.execution_id
        if call.state == types_pb2.EXECUTION_STATE_NOT_STARTED:
            released = rt.idempotency.release(scope, execution_id=holder)
            await _guarded("idempotency", call, released)
        else:
            envelope_bytes = result.SerializeToString()
            stored = rt.idempotency.complete(scope, envelope_bytes, execution_id=holder)
            await _guarded("idempotency", call, stored)
    record = call.approval
    if record is not None and rt.approvals is not None and record.status == "consumed":
        code = result.failed.code or result.cancelled.code
        finished = rt.approvals.finish(
            record.id,
            envelope=result.SerializeToString(),
            outcome_code=types_pb2.ErrorCode.Name(code) if code else None,
            resumed_execution_id=call.execution_id,
        )
        await _guarded("approval", call, finished)


async def _guarded(what: str, call: Call, pending: Awaitable[object]) -> None:
    """One recording step of `_record_outcome`: any failure is logged (the step, the execution
    id and the exception's type: never a payload or a Redis reply) and counted."""
    try:
        await pending
    except Exception as exc:
        log.warning(
            "could not record the %s outcome of execution %s (%s)",
            what,
            call.execution_id,
            type(exc).__name__,
        )
        metrics.outcome_record_failures.add((what,))
