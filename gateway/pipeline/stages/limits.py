"""Rate limits and budgets (docs/limits.md, ADR 0022): after the invocation policies (7),
before the approval gate (8).

Every limit that selects the capability is evaluated in ONE Redis script (one round trip):
its key (CEL over actor, capability, request) names the counter, a budget's amount (CEL over
the validated input) is what the call spends. All or nothing: either every limit passes and
each is spent, or none is spent and the call answers RATE_LIMITED with `retry_after`.

A budget with `on_exceed: require-approval` that only it refuses turns the call into an
approval request (nothing spent); the resumed (or inline-approved) call is checked again and
let past that budget once, counted once per approval. Redis unavailable: each limit fails
open or closed (`on_redis_down`; UPSTREAM_UNAVAILABLE when closed), counted by the metric
`capgate.limits.unavailable`.
"""

from __future__ import annotations

import asyncio
import logging
import math
from typing import Any

from cel_expr_python import cel
from opentelemetry.trace import Span

from gateway.errors import CapabilityError, Code, InputIssue
from gateway.pipeline.bindings import View, activation, variables
from gateway.pipeline.call import Call, Runtime
from gateway.pipeline.limits import CompiledLimit, backend
from gateway.pipeline.stages import Replayed
from gateway.pipeline.stages.controls import journal_first
from gateway.state.connections import RedisUnavailable
from gateway.state.limits.store import Charge, Verdict
from gateway.telemetry import child_span, metrics
from policy import ApprovalRequirement
from policy.approvals import join_ask

log = logging.getLogger("capgate.limits")


def budget_reason(name: str) -> str:
    """The approval reason of an over-budget call; a Resume whose approval carries it is let
    past that budget once."""
    return f"Budget {name} would be exceeded by this call."


async def enforce_limits(call: Call, rt: Runtime) -> Replayed | None:
    """The limits row before stage 8, on Invoke and Resume. A keyed call a limit would refuse
    or send for approval reads its key again first (ADR 0034): a repeat racing its own first
    call answers as the journal says."""
    prepared = call.prepared
    assert prepared is not None
    if not prepared.limits:
        return None  # most capabilities have no limit: no bindings, no Redis
    try:
        await _check(call, rt, prepared.limits)
    except CapabilityError as err:
        if err.code is Code.RATE_LIMITED and (replay := await journal_first(call, rt)):
            return replay
        raise
    if call.limits_deferred:
        return await journal_first(call, rt)
    return None


async def spend_after_inline_approval(call: Call, rt: Runtime) -> None:
    """After stage 8: an inline approver approved an over-budget call in the same execution;
    nothing was spent yet, so spend now, past the approved budget once."""
    if call.limits_deferred and call.approval is not None:
        assert call.prepared is not None
        call.limits_deferred = False
        call.limits_inline = True  # an approval of this execution only: it holds the spend
        await _check(call, rt, call.prepared.limits)


async def _check(call: Call, rt: Runtime, limits: tuple[CompiledLimit, ...]) -> None:
    # A span only for calls that have limits (the row itself has none: most calls skip it).
    with child_span("agent.limits", attributes={"capgate.limits.count": len(limits)}) as span:
        await _check_in(call, rt, limits, span)


async def _check_in(call: Call, rt: Runtime, limits: tuple[CompiledLimit, ...], span: Span) -> None:
    charges = _charges(call, rt, limits)
    try:
        if rt.limiter is None:
            raise RedisUnavailable("no limit store")
        # Shielded: a caller's cancel while the script runs lets its answer arrive anyway, so
        # the runner gives back what it spent for a call that never ran (issue 25).
        # The receipt lets it give back what the script spent even when the reply is lost
        # to a timeout or a dropped connection: it lives as long as the call may (its timeout
        # and the settlement's bound).
        checking = asyncio.ensure_future(
            rt.limiter.check(
                charges, now=rt.wall(), receipt=call.execution_id, receipt_ttl_s=_receipt_ttl(call)
            )
        )
        call.limits_unanswered = (charges, checking)
        verdicts = await asyncio.shield(checking)
        call.limits_unanswered = None
    except RedisUnavailable as exc:
        if call.limits_unanswered is not None:  # sent, and no answer: the script may have run
            call.limits_lost = charges
        call.limits_unanswered = None
        _unavailable(charges, str(exc))
        return
    pairs = list(zip(charges, verdicts, strict=True))
    if all(v.passed for v in verdicts):
        call.limit_spent = rt.limiter.spent(charges, verdicts)
    call.limit_state = {c.spec.name: {"remaining": v.remaining, "max": _max(c)} for c, v in pairs}
    refused = [(c, v) for c, v in pairs if not v.passed]
    if span.is_recording():
        span.set_attribute("capgate.limits.refused", len(refused))
    if not refused:
        return
    for charge, _ in refused:
        metrics.limits_refused.add((charge.spec.name,))
    if call.approval is None and all(_approvable(c) for c, _ in refused):
        call.limits_deferred = True
        reasons = tuple(budget_reason(c.spec.name) for c, _ in refused)
        call.requirement = _with_reasons(
            call.requirement, reasons, call.snapshot.settings.approvals.default_approver_role
        )
        return
    waits = [v.retry_after_s for _, v in refused]
    never = any(w is None for w in waits)
    raise CapabilityError(
        Code.RATE_LIMITED,
        reason="limit " + ",".join(c.spec.name for c, _ in refused),
        retryable=False if never else None,
        retry_after_s=None if never else max(w for w in waits if w is not None),
    )


async def give_back(call: Call, rt: Runtime) -> None:
    """The runner, when a call ends without its upstream called (NOT_STARTED: refused by an
    execution-phase policy, an idempotent repeat, no upstream reachable, ...): what it spent
    from budgets is credited back. Best effort: the runner logs and counts a failure
    (`capgate.outcome.record_failures{what="limits"}`) and the amount stays spent.

    A budget an approval let past is given back only by the execution that consumed that
    approval (before it is released, so no other Resume runs on the count meanwhile), or by
    the execution an inline approver approved (that approval is never stored): a
    Resume that lost the consume to a concurrent one, or never reached it, leaves the amount
    counted for whichever execution holds the approval."""
    spent, call.limit_spent = call.limit_spent, ()
    record = call.approval
    holder = call.limits_inline or (record is not None and record.status == "consumed")
    spent = tuple(s for s in spent if holder or not s.marker)
    if spent and rt.limiter is not None:
        await rt.limiter.give_back(spent)


# Past the call's own timeout: the settlement's bound and then some.
RECEIPT_MARGIN_S = 30.0


def _receipt_ttl(call: Call) -> float:
    assert call.prepared is not None
    timeout = call.prepared.capability.timeout_s or call.snapshot.settings.defaults.timeout_s
    return timeout + RECEIPT_MARGIN_S


def _activation(call: Call, rt: Runtime) -> Any:
    """The call's invocation activation, the policies' own when they run on the same backend
    as limit expressions (DESIGN §11: built once per request)."""
    if call.snapshot.policies.backend == backend().name:
        return activation(call, rt, View.INVOCATION)
    own = dict(variables(call, rt, View.INVOCATION))
    own["request"] = dict(own["request"])  # the activation converts its `now` in place
    return backend().activation(own)


def _charges(call: Call, rt: Runtime, limits: tuple[CompiledLimit, ...]) -> list[Charge]:
    approved = frozenset(call.approval.reasons) if call.approval is not None else frozenset()
    bound: list[Any] = []  # the activation, built (or found) on first need

    def evaluate(program: Any) -> Any:
        if not bound:
            bound.append(_activation(call, rt))
        return _eval(program, bound[0])

    out = []
    for limit in limits:
        spec = limit.spec
        value = _actor_field(call, limit.key_path)
        key = _key(limit, value if value is not None else evaluate(limit.key))
        amount = 1.0
        forced = ""
        if spec.budget is not None:
            literal = limit.amount_value
            amount = literal if literal is not None else _amount(limit, evaluate(limit.amount))
            if spec.budget.on_exceed == "require-approval" and budget_reason(spec.name) in approved:
                forced = call.approval.id
        out.append(Charge(spec, key, amount, forced))
    return out


def _actor_field(call: Call, path: tuple[str, ...] | None) -> str | None:
    """A key that only reads a string field of the actor, read without CEL (the value CEL
    would give); None when CEL must evaluate it (another expression, a missing attribute, a
    value that is not a string)."""
    if path is None or call.actor is None:
        return None
    if path[0] != "attributes":
        value = getattr(call.actor, path[0])
    else:
        value = call.actor.attributes.get(path[1])
    return value if type(value) is str else None


class _Error:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _eval(program: Any, activation: Any) -> Any:
    try:
        result = program.eval(activation)
    except RuntimeError as exc:
        return _Error(str(exc))
    if result.type() == cel.Type.ERROR:
        return _Error(str(result.value()))
    return result.value()


def _key(limit: CompiledLimit, value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    why = value.text if isinstance(value, _Error) else f"not a string but {type(value).__name__}"
    log.warning("limit %s: key failed: %s", limit.name, why[:200])
    raise CapabilityError(Code.POLICY_FAILED, reason=f"limit {limit.name} key: evaluation failed")


def _amount(limit: CompiledLimit, value: Any) -> float:
    number = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    if number is None or not math.isfinite(number) or number < 0:
        what = "could not be computed" if isinstance(value, _Error) else "is not a number >= 0"
        message = f"the amount of budget {limit.name} {what}"
        raise CapabilityError(
            Code.INPUT_INVALID,
            reason=f"limit {limit.name} amount refused",
            issues=(InputIssue("", message),),
        )
    return number


def _approvable(charge: Charge) -> bool:
    budget = charge.spec.budget
    return budget is not None and budget.on_exceed == "require-approval"


def _max(charge: Charge) -> float:
    spec = charge.spec
    if spec.rate is not None:
        return float(spec.rate.burst)
    assert spec.budget is not None
    return spec.budget.max


def _with_reasons(
    requirement: ApprovalRequirement | None, reasons: tuple[str, ...], role: str
) -> ApprovalRequirement:
    """The budget's ask joins the requirement; a standing grant never lifts a budget (ADR 0038),
    so the merged requirement is not grantable; escalating, it needs `role` too (`join_ask`)."""
    if requirement is None:
        return ApprovalRequirement(
            reasons=reasons, roles=frozenset(), expires_in=None, policies=(), grantable=False
        )
    return join_ask(requirement, reasons, role)


def _unavailable(charges: list[Charge], cause: str) -> None:
    """Redis could not answer: each limit fails open or closed; any closed one refuses."""
    closed = []
    for charge in charges:
        mode = "open" if charge.spec.fails_open else "closed"
        metrics.limits_unavailable.add((charge.spec.name, mode))
        if mode == "closed":
            closed.append(charge.spec.name)
    log.warning("limit store unavailable (%s): %d limit(s) failed closed", cause, len(closed))
    if closed:
        raise CapabilityError(
            Code.UPSTREAM_UNAVAILABLE,
            message="Limits cannot be checked right now; try again later.",
            reason="limit store unavailable: " + ",".join(closed),
        )


# -- Check's peek (ADR 0035): separate from the spend path above, which it never calls ---------


async def peek_limits(call: Call, rt: Runtime) -> None:
    """`Check`: the limits row as Invoke would run it now, spending nothing (the read-only
    twin of the limit script). The same answers as `enforce_limits`: RATE_LIMITED with
    `retry_after`, an over-budget call that only `require-approval` budgets refuse turned into
    an approval requirement, `on_redis_down` when Redis cannot answer; and `limit_state` for
    the execution-phase policies. Counts no refusal (nothing was refused: Check only asks)."""
    prepared = call.prepared
    assert prepared is not None
    if not prepared.limits:
        return
    charges = _charges(call, rt, prepared.limits)
    try:
        if rt.limiter is None:
            raise RedisUnavailable("no limit store")
        verdicts = await rt.limiter.peek(charges, now=rt.wall())
    except RedisUnavailable as exc:
        _unavailable(charges, str(exc))  # a closed limit refuses the Check as it would Invoke
        return
    pairs = list(zip(charges, verdicts, strict=True))
    call.limit_state = {c.spec.name: {"remaining": v.remaining, "max": _max(c)} for c, v in pairs}
    refused = [(c, v) for c, v in pairs if not v.passed]
    if not refused:
        return
    if call.approval is None and all(_approvable(c) for c, _ in refused):
        reasons = tuple(budget_reason(c.spec.name) for c, _ in refused)
        call.requirement = _with_reasons(
            call.requirement, reasons, call.snapshot.settings.approvals.default_approver_role
        )
        return
    raise _over_limit(refused)


def _over_limit(refused: list[tuple[Charge, Verdict]]) -> CapabilityError:
    """RATE_LIMITED for the limits that refused: the longest wait among them, or not
    retryable without `retry_after` when waiting never helps (the same rule as `_check_in`)."""
    waits = [v.retry_after_s for _, v in refused]
    never = any(w is None for w in waits)
    return CapabilityError(
        Code.RATE_LIMITED,
        reason="limit " + ",".join(c.spec.name for c, _ in refused),
        retryable=False if never else None,
        retry_after_s=None if never else max(w for w in waits if w is not None),
    )
