"""Governance hooks around seed 001's stages (seed 002, docs/hooks.md, ADR 0027).

- `run_pre_hooks` — between stage 6 (actor check) and stage 7 (invocation policies): first
  the invocation policies that cannot read `hooks` decide deny or hide (so a hidden capability
  never reaches a hook, SI-8, and a denied call calls nothing); then each PreInvoke in order,
  with the validated input. A hook's context becomes `hooks.<hook>` for the policies; its
  `updated_input` is validated again (the approval binds it, the upstream receives it); its
  deny ends the call (HOOK_DENIED), its ask joins the approval requirement. A hook's allow
  changes nothing: it can never remove a deny, hide or approval requirement.
- `merge_hook_asks` — after stage 7: the asks join the policies' approval requirement.
- `run_post_hooks` — between stages 12 and 13: PostInvoke with the validated output; its
  `updated_output` is validated against the output schema again, then stage 13 redacts it.
- `run_failure_hooks` — the runner's failure path: PostFailure observes (code, stage,
  execution state; no payloads) and changes nothing.

A hook that fails (an error, a missed deadline, an answer breaking the contract) fails the call
with HOOK_FAILED when its failure mode is `closed` (the default); `open` records and ignores it.
An invalid `updated_input` or `updated_output` is never ignored.
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from capgate.v1 import hook_pb2, types_pb2
from gateway.config.hookspec import BoundHook
from gateway.errors import CapabilityError, Code, not_found
from gateway.pipeline.bindings import View, evaluate, forget
from gateway.pipeline.call import Call, Runtime
from gateway.pipeline.hookcalls import HookFault, call_hook, fault_in, hook_context
from gateway.values.canonical import input_hash
from gateway.values.jsonvalue import dumps, parse_json, scan
from policy import ApprovalRequirement, Decision, Phase
from policy.approvals import join_ask

# Answers identical to a missing capability or approval never reach a hook (SI-8).
_CONCEALED = frozenset({Code.CAPABILITY_NOT_FOUND, Code.APPROVAL_NOT_FOUND})
MAX_CONTEXT_BYTES = 64 * 1024  # a hook's context_json; attributes are small facts
MAX_ATTRIBUTE_CHARS = 1024
_DECISIONS = {
    hook_pb2.HOOK_DECISION_UNSPECIFIED: "none",
    hook_pb2.HOOK_DECISION_ALLOW: "allow",
    hook_pb2.HOOK_DECISION_ASK: "ask",
    hook_pb2.HOOK_DECISION_DENY: "deny",
}
_CHECKS = {
    "string": lambda v: isinstance(v, str) and len(v) <= MAX_ATTRIBUTE_CHARS,
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v),
    "boolean": lambda v: isinstance(v, bool),
}


def _pre_decision(answer: hook_pb2.PreInvokeResponse) -> str:
    decision = _DECISIONS.get(answer.decision, "invalid")
    return f"{decision}+updated_input" if answer.HasField("updated_input_json") else decision


def _post_decision(answer: hook_pb2.PostInvokeResponse) -> str:
    return "updated_output" if answer.HasField("updated_output_json") else "none"


def _failed(hook: BoundHook, fault: HookFault, *, executed: bool = False) -> CapabilityError:
    return CapabilityError(
        Code.HOOK_FAILED,
        reason=str(fault),
        executed=executed,
        retryable=False if executed else None,
    )


def _conceal_first(call: Call, rt: Runtime) -> None:
    """The invocation policies that never read `hooks` decide deny and hide before any hook
    is called: a hidden capability never reaches a hook (SI-8), a denied call calls nothing.
    Stage 7 then evaluates every policy, with the hooks' context."""
    assert call.prepared is not None
    prepared = call.prepared
    phases = prepared.policy_phases
    if phases is not None and Phase.INVOCATION not in phases:
        return
    ev = evaluate(call, rt, View.INVOCATION, without_hooks=True)
    if ev.decision is Decision.HIDE:
        call.evaluation = ev
        raise not_found("hidden")
    if ev.decision is Decision.DENY:
        call.evaluation = ev
        code = Code.POLICY_FAILED if ev.failed else Code.POLICY_DENIED
        raise CapabilityError(
            code,
            message=None if ev.failed else ev.message,
            reason="policy-error" if ev.failed else "denied",
        )
    if _blind_to_hooks(call):
        call.early_evaluation = (call.input, ev)


def _blind_to_hooks(call: Call) -> bool:
    """Whether the evaluation without `hooks` was the whole invocation phase: no applicable
    policy reads `hooks` in a rule, and none has a `match.expr` (which may read them). Then
    stage 7 takes it as its own for the same input, rather than evaluating every policy again
    on an activation that differs only in what no policy reads."""
    assert call.prepared is not None
    prepared = call.prepared
    applicable = call.snapshot.policies.applicable(
        Phase.INVOCATION, prepared.policy_value, prepared.capability.policies
    )
    return not any(p.reads_hooks or p.match is not None for p in applicable)


def _context(hook: BoundHook, answer: hook_pb2.PreInvokeResponse) -> dict[str, Any]:
    """The answer's context attributes: each declared for the hook and of its declared type."""
    text = answer.context_json
    if not text:
        return {}
    if len(text) > MAX_CONTEXT_BYTES:
        raise HookFault(hook.spec.name, "context_json over 64 KiB")
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise HookFault(hook.spec.name, "context_json is not JSON") from None
    if not isinstance(value, dict):
        raise HookFault(hook.spec.name, "context_json is not a JSON object")
    declared = hook.spec.context
    for name, attribute in value.items():
        kind = declared.get(name)
        if kind is None:  # the name is the hook's text: never in the trail or a span
            raise HookFault(hook.spec.name, "context_json has an undeclared attribute")
        if not _CHECKS[kind](attribute):
            raise HookFault(hook.spec.name, f"context attribute {name!r} is not a {kind}")
    return value


def _updated_input(call: Call, hook: BoundHook, text: str) -> Any:
    """The replacement input, strictly parsed within the capability's limits and validated
    against its input schema, as stage 5 does; a hook's invalid change is a HOOK_FAILED."""
    assert call.prepared is not None
    prepared = call.prepared
    try:
        value = parse_json(text.encode(), prepared.capability.limits)
    except CapabilityError:
        raise HookFault(hook.spec.name, "updated_input is not valid JSON within limits") from None
    if not isinstance(value, dict):
        raise HookFault(hook.spec.name, "updated_input is not a JSON object")
    validated, issues = prepared.input_validator.validate(value)
    if issues:
        raise HookFault(hook.spec.name, f"updated_input fails the input schema ({len(issues)})")
    return validated


async def _pre(call: Call, rt: Runtime, hook: BoundHook) -> hook_pb2.PreInvokeResponse | None:
    request = hook_pb2.PreInvokeRequest(
        context=hook_context(call, hook.spec, dry_run=call.dry_run),
        input_json=dumps(call.input).decode(),
    )
    try:
        answer: hook_pb2.PreInvokeResponse = await call_hook(
            call, rt, hook, "pre_invoke", request, describe=_pre_decision
        )
    except HookFault as fault:
        if hook.spec.failure == "open":
            return None
        raise _failed(hook, fault) from None
    return answer


async def run_pre_hooks(call: Call, rt: Runtime) -> None:
    assert call.prepared is not None
    hooks = call.prepared.hooks.pre
    if not hooks:
        return
    _conceal_first(call, rt)
    before = call.input
    changed_by: list[str] = []
    for hook in hooks:
        answer = await _pre(call, rt, hook)
        if answer is None:
            continue  # failure mode open: recorded, ignored
        try:
            if answer.decision not in _DECISIONS:
                raise HookFault(hook.spec.name, "unknown decision")
            context = _context(hook, answer)
            updated = (
                _updated_input(call, hook, answer.updated_input_json)
                if answer.HasField("updated_input_json")
                else None
            )
        except HookFault as fault:
            fault_in(call, fault)
            # An invalid change or context is never ignored, whatever the failure mode: the
            # hook meant something the gateway cannot apply.
            raise _failed(hook, fault) from None
        if context:
            call.hook_context[hook.spec.name] = context
            forget(call)  # `hooks` changed: the call's CEL variables are built again
        if answer.decision == hook_pb2.HOOK_DECISION_DENY:
            # Deny is the strongest decision: no policy or later hook can change the answer.
            raise CapabilityError(
                Code.HOOK_DENIED,
                message=answer.message[:512] or None,
                reason=f"denied by hook {hook.spec.name}",
            )
        if answer.decision == hook_pb2.HOOK_DECISION_ASK:
            call.hook_asks.append(answer.message[:512] or f"The {hook.spec.name} check asks.")
        if updated is not None:
            call.input = updated
            forget(call)
            changed_by.append(hook.spec.name)
    if changed_by:
        _record_update(call, before, changed_by)


def _record_update(call: Call, before: Any, changed_by: list[str]) -> None:
    """Both hashes in the trail; on Resume the approval's hash must still hold (SI-5)."""
    after = input_hash(call.input)  # APPROVAL_UNSERIALIZABLE_INPUT if it has no canonical form
    call.input_update = {"hooks": changed_by, "before": input_hash(before), "after": after}
    record = call.approval
    if record is not None and after != record.input_hash:
        # The approver approved one input; a re-run hook that changes it is refused, never run.
        raise CapabilityError(
            Code.APPROVAL_INPUT_MISMATCH,
            reason=f"hook {changed_by[-1]} changed the approved input on resume",
        )
    if record is not None:
        call.input_hash = after


async def merge_hook_asks(call: Call, rt: Runtime) -> None:
    """After stage 7: the hooks' asks join the policies' approval requirement (roles, expiry,
    quorum and escalation from the policies and the capability; the reasons of both). A hook's
    ask is about this call: a standing grant never stands in for it (not grantable)."""
    if not call.hook_asks:
        return
    req = call.requirement
    if req is None:
        call.requirement = ApprovalRequirement(
            reasons=tuple(call.hook_asks),
            roles=frozenset(),
            expires_in=None,
            policies=(),
            grantable=False,
        )
        return
    role = call.snapshot.settings.approvals.default_approver_role
    call.requirement = join_ask(req, call.hook_asks, role)


async def run_post_hooks(call: Call, rt: Runtime) -> None:
    assert call.prepared is not None
    prepared = call.prepared
    for hook in prepared.hooks.post:
        request = hook_pb2.PostInvokeRequest(
            context=hook_context(call, hook.spec), output_json=dumps(call.output).decode()
        )
        try:
            answer: hook_pb2.PostInvokeResponse = await call_hook(
                call, rt, hook, "post_invoke", request, describe=_post_decision
            )
        except HookFault as fault:
            if hook.spec.failure == "open":
                continue
            raise _failed(hook, fault, executed=True) from None
        if answer.HasField("updated_output_json"):
            call.output = _updated_output(call, hook, answer.updated_output_json)


def _updated_output(call: Call, hook: BoundHook, text: str) -> Any:
    """Stage 12 again on the replacement: limits, then the output schema; withheld as
    OUTPUT_INVALID (executed before failure) when it breaks them."""
    assert call.prepared is not None
    prepared = call.prepared
    try:
        value = parse_json(
            text.encode(), prepared.capability.limits, what="output", allow_nul=True
        )  # outputs may hold U+0000, as upstream outputs (docs/upstreams.md)
        scan(value, prepared.capability.limits)
    except CapabilityError:
        fault_in(call, HookFault(hook.spec.name, "updated_output is not valid JSON"))
        raise CapabilityError(
            Code.OUTPUT_INVALID, executed=True, reason=f"hook {hook.spec.name}: output json"
        ) from None
    validator = prepared.output_validator
    if validator is None:
        return value
    validated, issues = validator.validate(value)
    if issues:
        fault_in(call, HookFault(hook.spec.name, "updated_output fails the output schema"))
        raise CapabilityError(
            Code.OUTPUT_INVALID,
            executed=True,
            reason=f"hook {hook.spec.name}: output schema: {len(issues)} issue(s)",
        )
    return validated


async def run_failure_hooks(call: Call, rt: Runtime, err: CapabilityError) -> None:
    """PostFailure on a terminal failure of a capability the caller could see; observe only:
    never on a concealed answer (SI-8), and its errors change nothing."""
    if err.concealed or err.code in _CONCEALED:
        return
    prepared = call.prepared
    if prepared is None and call.approval_id:
        # Resume refused before stage 3 (rejected, expired, consumed...): the requester's own
        # record names the capability; its hooks observe if the surface still exposes it.
        found = call.snapshot.capabilities.get(call.capability_id)
        if found is not None and found.capability.exposed_on(call.surface):
            prepared = found
    if prepared is None or not prepared.hooks.failure:
        return
    for hook in prepared.hooks.failure:
        request = hook_pb2.PostFailureRequest(
            context=hook_context(call, hook.spec, dry_run=call.dry_run, prepared=prepared),
            code=types_pb2.ErrorCode.Value(f"ERROR_CODE_{err.code.value}"),
            stage=err.spec.stage,
            execution_state=call.state,
            attempts=call.attempts,
        )
        try:
            await call_hook(call, rt, hook, "post_failure", request, describe=lambda _: "observed")
        except HookFault:
            continue  # observe only: recorded in the trail
