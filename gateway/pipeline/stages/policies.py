"""Stages 7 and 9 — invocation- and execution-phase policies (SI-7, SI-8) — and, at stage 4,
the input-free hide policies (ADR 0016).

All applicable policies are evaluated (no short circuit) by `policy.PolicySet.evaluate_all`;
deny > hide > require-approval > allow; an error or timeout fails closed as POLICY_FAILED.
"""

from __future__ import annotations

from opentelemetry import trace

from gateway.errors import CapabilityError, Code, not_found
from gateway.pipeline.bindings import View, eval_request, evaluate
from gateway.pipeline.call import Call, Runtime
from gateway.telemetry import metrics
from policy import Decision, Evaluation, Phase

__all__ = [
    "eval_request",  # discovery's Check builds its own (gateway/pipeline/bindings.py)
    "evaluate_execution_policies",
    "evaluate_invocation_policies",
    "hide_before_validation",
    "reevaluate_invocation_policies",
]


def _evaluate(call: Call, rt: Runtime, view: View) -> Evaluation:
    """All policies of the view's phase, against the call's activation of it, with their
    latency and failures measured (metrics, span)."""
    return _measured(evaluate(call, rt, view), view)


def _measured(ev: Evaluation, view: View) -> Evaluation:
    phase = Phase.EXECUTION if view is View.EXECUTION else Phase.INVOCATION
    label = (phase.value,)
    metrics.policy_duration.observe(ev.duration_s, label)
    if ev.failed:
        metrics.policy_failures.add(label)
    span = trace.get_current_span()  # agent.policy_evaluation when sampled
    if span.is_recording():
        span.set_attributes(
            {
                "capgate.policy.phase": phase.value,
                "capgate.policy.decision": ev.decision.name.lower(),
                "capgate.policy.count": len(ev.stances),
                "capgate.policy.failed": ev.failed,
            }
        )
    return ev


def _enforce(call: Call, rt: Runtime, ev: Evaluation, *, allow_approval: bool) -> None:
    if ev.decision is Decision.DENY:
        code = Code.POLICY_FAILED if ev.failed else Code.POLICY_DENIED
        message = None if ev.failed else ev.message
        raise CapabilityError(
            code, message=message, reason="policy-error" if ev.failed else "denied"
        )
    if ev.decision is Decision.HIDE:
        raise not_found("hidden")
    if ev.decision is Decision.REQUIRE_APPROVAL and allow_approval:
        call.requirement = ev.approval


def _applies(call: Call, phase: Phase) -> bool:
    """Whether any policy can take a stance in `phase` (precomputed per snapshot)."""
    prepared = call.prepared
    assert prepared is not None
    if prepared.policy_phases is not None:
        return phase in prepared.policy_phases
    return call.snapshot.policies.applies(
        phase, prepared.policy_value, prepared.capability.policies
    )


async def hide_before_validation(call: Call, rt: Runtime) -> None:
    """Stage 4, after exposure (ADR 0016): when an input-free invocation policy with a `hide`
    rule applies, the input-free invocation policies are evaluated before input validation and
    a `hide` among them conceals the capability now — bad input then gets the not-found answer
    of a missing capability, not INPUT_INVALID with schema paths (SI-8). Any other outcome
    decides nothing here: stage 7 evaluates every policy as before."""
    prepared = call.prepared
    assert prepared is not None
    policies = call.snapshot.policies
    if not _applies(call, Phase.INVOCATION) or not policies.hides_without_input(
        prepared.policy_value, prepared.capability.policies
    ):
        return
    ev = evaluate(call, rt, View.INPUT_FREE, input_free=True)
    metrics.policy_duration.observe(ev.duration_s, (Phase.INVOCATION.value,))
    if ev.decision is Decision.HIDE:
        call.evaluation = ev  # the stances that decided, for the denied event
        raise not_found("hidden")


async def evaluate_invocation_policies(call: Call, rt: Runtime) -> None:
    if not _applies(call, Phase.INVOCATION):
        return  # nothing applies: the decision is allow, exposure being the default gate (SI-1)
    early = call.early_evaluation
    if early is not None and early[0] is call.input:
        # The pre-hooks' evaluation was the whole phase for this input (stages/hooks.py).
        ev = _measured(early[1], View.INVOCATION)
    else:
        ev = _evaluate(call, rt, View.INVOCATION)
    call.evaluation = ev
    _enforce(call, rt, ev, allow_approval=True)


async def reevaluate_invocation_policies(call: Call, rt: Runtime) -> None:
    """Resume: deny and hide are re-evaluated; a new require-approval is already satisfied by
    the approval being resumed (ADR 0007)."""
    ev = _evaluate(call, rt, View.INVOCATION)
    call.evaluation = ev
    _enforce(call, rt, ev, allow_approval=False)


async def evaluate_execution_policies(call: Call, rt: Runtime) -> None:
    if not _applies(call, Phase.EXECUTION):
        return  # most capabilities have no execution-phase policy: skip building the request
    # `approval` and `limits` bound (the limit script ran before stage 8: no extra trip).
    ev = _evaluate(call, rt, View.EXECUTION)
    # Kept beside, never over, the invocation phase's: the trail carries both (audit/events.py).
    call.execution_evaluation = ev
    _enforce(call, rt, ev, allow_approval=False)
