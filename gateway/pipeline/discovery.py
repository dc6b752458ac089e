"""Discovery pipeline (seed 001, `runtime.describe`) and the `Check` dry run of stages 3-9.

Describe: exposure filter (SI-1) → discovery-phase policies with no input (deny, hide or an
error exclude, fail closed; require-approval marks the descriptor) → minimal descriptors →
`capabilities.discovered`. Check answers what Invoke would answer now, short of running
anything (ADR 0035): stages 3-7, the limits peeked without spending, stage 8's refusals
before an approval is requested, and stage 9 for a call that would not suspend. It reveals
only what Invoke would and emits no capability.* events; full stances only for the admin
`Explain`.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from capgate.v1 import gateway_pb2, types_pb2
from gateway.audit.events import discovered_event
from gateway.errors import CapabilityError, Code
from gateway.model import Actor
from gateway.pipeline.call import Call, Runtime
from gateway.pipeline.envelope import error_proto
from gateway.pipeline.snapshot import Snapshot
from gateway.pipeline.stages.actor import check_actor
from gateway.pipeline.stages.approval import gate_refusals, gate_requirement
from gateway.pipeline.stages.exposure import check_exposure
from gateway.pipeline.stages.grants import covering as grant_covering
from gateway.pipeline.stages.hooks import merge_hook_asks, run_pre_hooks
from gateway.pipeline.stages.limits import peek_limits
from gateway.pipeline.stages.policies import (
    eval_request,
    evaluate_execution_policies,
    evaluate_invocation_policies,
    hide_before_validation,
)
from gateway.pipeline.stages.resolve import resolve_capability
from gateway.pipeline.stages.validate import validate_input
from policy import Decision, EvalRequest, Phase, Stance

_DECISIONS = {
    Decision.ALLOW: types_pb2.DECISION_ALLOW,
    Decision.REQUIRE_APPROVAL: types_pb2.DECISION_REQUIRE_APPROVAL,
    Decision.HIDE: types_pb2.DECISION_HIDE,
    Decision.DENY: types_pb2.DECISION_DENY,
}


# Describe's answers per snapshot (issue 29): what the discovery phase decides depends only on
# the snapshot, the surface and the actor fields its policies read, so two Describes that agree
# on those get the same descriptors. Bounded per snapshot; a reload is a new snapshot.
_ENTRIES_PER_SNAPSHOT: Final = 4096
_SNAPSHOTS_KEPT: Final = 8
_MISSING: Final = "\x00missing"  # an absent field, distinct from any JSON value
_ACTOR_FIELDS: Final = frozenset({"id", "kind", "issuer", "roles", "attributes"})


@dataclass(slots=True)
class _SnapshotCache:
    """One snapshot's Describe answers, by (surface, the actor fields its policies read)."""

    snapshot: weakref.ref[Snapshot]
    # The actor paths to key by; None: every answer is computed (a policy reads the time, or
    # what it reads is unknown).
    paths: tuple[tuple[str, ...], ...] | None
    entries: dict[Hashable, gateway_pb2.DescribeResponse] = field(default_factory=dict)


_caches: dict[int, _SnapshotCache] = {}


def _actor_paths(reads: frozenset[tuple[str, ...]] | None) -> tuple[tuple[str, ...], ...] | None:
    """The actor fields a cache key must hold, from what discovery policies read; None when no
    key can stand for the answer. Conservative: the whole actor when a policy reads `actor`
    itself or a field it does not know; never cached when one reads `request` (its `now`)."""
    if reads is None or any(p[0] == "request" for p in reads):
        return None
    fields: set[tuple[str, ...]] = set()
    for path in reads:
        if path[0] != "actor":
            continue  # surface is in the key; capability and constants are the snapshot's
        if len(path) == 1 or path[1] not in _ACTOR_FIELDS:
            return ((),)  # the whole actor
        fields.add(path[:3] if path[1] == "attributes" else path[:2])
    # A whole map read makes its keys redundant; sorted, so the key's order is stable.
    return tuple(
        sorted(p for p in fields if not (len(p) == 3 and ("actor", "attributes") in fields))
    )


def _cache_of(snapshot: Snapshot) -> _SnapshotCache:
    found = _caches.get(id(snapshot))
    if found is not None and found.snapshot() is snapshot:
        return found
    if len(_caches) >= _SNAPSHOTS_KEPT:
        _caches.clear()
    found = _SnapshotCache(weakref.ref(snapshot), _actor_paths(snapshot.policies.discovery_reads))
    _caches[id(snapshot)] = found
    return found


def _lookup(value: dict[str, Any], path: tuple[str, ...]) -> Any:
    current: Any = value
    for part in path[1:]:  # path[0] is "actor"
        if not isinstance(current, dict) or part not in current:
            return _MISSING
        current = current[part]
    return current


def _key(
    paths: tuple[tuple[str, ...], ...], surface: str, actor_value: dict[str, Any]
) -> Hashable | None:
    """The cache key, or None when a value cannot be put in canonical form (not cached)."""
    try:
        if paths == ((),):
            return (surface, json.dumps(actor_value, sort_keys=True, separators=(",", ":")))
        values = [_lookup(actor_value, ("actor", *p[1:])) for p in paths]
        return (surface, json.dumps(values, sort_keys=True, separators=(",", ":")))
    except (TypeError, ValueError):
        return None


def describe(
    snapshot: Snapshot, rt: Runtime, *, surface: str, actor: Actor, ids: list[str]
) -> gateway_pb2.DescribeResponse:
    """The capabilities `actor` may discover on `surface` (all, or those of `ids`). The answer
    is shared between calls (never mutated after it is cached); each call emits its own
    `capabilities.discovered`."""
    actor_value = actor.as_policy_value()
    cache = _cache_of(snapshot)
    key = None if cache.paths is None else _key(cache.paths, surface, actor_value)
    found = cache.entries.get(key) if key is not None else None
    if found is None:
        only = set(ids) if key is None else set()  # uncached: evaluate only what was asked
        found, cacheable = _discover(
            snapshot, rt, surface=surface, actor_value=actor_value, only=only
        )
        if key is not None and cacheable:
            if len(cache.entries) >= _ENTRIES_PER_SNAPSHOT:
                cache.entries.clear()
            cache.entries[key] = found
    out = found
    if ids and key is not None:
        wanted = set(ids)
        out = gateway_pb2.DescribeResponse(revision=snapshot.revision)
        out.capabilities.extend(d for d in found.capabilities if d.id in wanted)
    rt.audit.emit(
        discovered_event(
            rt.new_id(),  # the Describe's execution id, as Invoke draws one at stage 2
            surface=surface,
            actor=actor,
            capability_ids=[d.id for d in out.capabilities],
            revision=snapshot.revision,
            now=rt.wall(),
        )
    )
    return out


def _discover(
    snapshot: Snapshot,
    rt: Runtime,
    *,
    surface: str,
    actor_value: dict[str, Any],
    only: set[str],
) -> tuple[gateway_pb2.DescribeResponse, bool]:
    """Every capability the discovery phase shows, and whether the answer may be cached: not
    when a policy failed (a CPU time limit hit under load must not conceal for ever)."""
    now = datetime.fromtimestamp(rt.wall(), UTC)
    out = gateway_pb2.DescribeResponse(revision=snapshot.revision)
    cacheable = True
    for cap_id, prepared in snapshot.capabilities.items():
        if (only and cap_id not in only) or not prepared.capability.exposed_on(surface):
            continue
        phases = prepared.policy_phases
        decision = Decision.ALLOW  # no discovery policy applies: shown as configured
        if phases is None or Phase.DISCOVERY in phases:
            evaluation = snapshot.policies.evaluate_all(
                Phase.DISCOVERY,
                EvalRequest(
                    actor=actor_value,
                    capability=prepared.policy_value,
                    capability_policies=prepared.capability.policies,
                    surface=surface,
                    input=None,
                    now=now,
                ),
            )
            decision = evaluation.decision
            cacheable = cacheable and not any(s.error for s in evaluation.stances)
        if decision in (Decision.DENY, Decision.HIDE):
            continue  # indistinguishable from nonexistent; errors fail closed the same way
        descriptor = out.capabilities.add()
        descriptor.CopyFrom(prepared.descriptor)
        descriptor.requires_approval = (
            decision is Decision.REQUIRE_APPROVAL or prepared.capability.approval.required
        )
    return out, cacheable


async def check(
    snapshot: Snapshot,
    rt: Runtime,
    *,
    surface: str,
    actor: Actor,
    capability_id: str,
    input_json: bytes,
    metadata: dict[str, str],
    full: bool,
) -> gateway_pb2.CheckResponse:
    """What Invoke would answer now, without side effects (ADR 0035). `full` (admin only)
    adds every invocation policy's stance."""
    call = Call(
        snapshot=snapshot,
        surface=surface,
        actor=actor,
        capability_id=capability_id,
        raw_input=input_json,
        metadata=metadata,
        dry_run=True,  # pre-hooks run, told that nothing will (docs/hooks.md)
    )
    response = gateway_pb2.CheckResponse(revision=snapshot.revision)
    try:
        for stage in (
            resolve_capability,
            check_exposure,
            hide_before_validation,  # as Invoke: bad input to a hidden capability is not found
            validate_input,
            check_actor,
            run_pre_hooks,  # their context reaches the policies, as on Invoke
            evaluate_invocation_policies,
            merge_hook_asks,
            peek_limits,  # read, never spent: a Check loop consumes no limit
            _approval_refusals,
            _execution_policies,
        ):
            await stage(call, rt)
    except CapabilityError as err:
        if err.code in _DENIALS:
            # A concealed answer is the not-found answer exactly (SI-8).
            response.decision = (
                types_pb2.DECISION_HIDE
                if full and err.reason == "hidden"
                else types_pb2.DECISION_DENY
            )
        response.error.CopyFrom(error_proto(err, types_pb2.EXECUTION_STATE_NOT_STARTED))
    else:
        response.decision = (
            types_pb2.DECISION_REQUIRE_APPROVAL
            if _needs_approval(call)
            else types_pb2.DECISION_ALLOW
        )
        if call.requirement is not None:
            response.approval_reasons.extend(call.requirement.reasons)
        if response.decision == types_pb2.DECISION_REQUIRE_APPROVAL:
            response.grant_id = call.grant_id
    if full and call.evaluation is not None:
        _add_stances(response, call.evaluation.stances)
    return response


def _add_stances(response: gateway_pb2.CheckResponse, stances: Sequence[Stance]) -> None:
    for s in stances:
        response.stances.add(
            policy=s.policy,
            mode=s.mode,
            effect=_DECISIONS[s.effect] if s.effect is not None else types_pb2.DECISION_UNSPECIFIED,
            rule=-1 if s.rule is None else s.rule,
            message=s.message or "",
            error=s.error or "",
        )


_DENIALS = frozenset(
    {Code.CAPABILITY_NOT_FOUND, Code.POLICY_DENIED, Code.POLICY_FAILED}
    | {Code.HOOK_DENIED, Code.HOOK_FAILED, Code.RATE_LIMITED}
)


def _needs_approval(call: Call) -> bool:
    assert call.prepared is not None
    return call.requirement is not None or call.prepared.capability.approval.required


async def _approval_refusals(call: Call, rt: Runtime) -> None:
    """Stage 8's refusals of a call that would request an approval, in the gate's order
    (`stages/approval.approval_gate`): no approval store and no inline approver, an anonymous
    actor, an input without a canonical form. Nothing is stored and no inline approver is
    asked: its decision is the approval the answer says is required."""
    assert call.prepared is not None and call.actor is not None
    if _needs_approval(call):
        # As the gate: a call a standing grant covers asks nobody (ADR 0038), so the refusals
        # of a call that would be stored for approval are not its answer.
        call.grant_id = await _grant_covering(call, rt)
        if not call.grant_id:
            gate_refusals(call, rt)


async def _grant_covering(call: Call, rt: Runtime) -> str:
    """The standing grant Invoke would use instead of asking (ADR 0038), read, never taken;
    "" when none would. A grant store that cannot answer fails Check as it fails Invoke's gate
    (ADR 0035: Check answers what Invoke would)."""
    found: str = await grant_covering(call, rt, gate_requirement(call))
    return found


async def _execution_policies(call: Call, rt: Runtime) -> None:
    """Stage 9, for a call Invoke would run now (with what the limits would leave): one that
    suspends for an approval meets the execution phase only on its Resume, with the approval
    bound, which a Check cannot foresee."""
    if not _needs_approval(call):
        await evaluate_execution_policies(call, rt)


async def explain_phase(
    snapshot: Snapshot,
    rt: Runtime,
    *,
    phase: Phase,
    surface: str,
    actor: Actor,
    capability_id: str,
    input_json: bytes,
) -> gateway_pb2.CheckResponse:
    """Admin `Explain` for the discovery or execution phase: every stance of that phase's
    policies (discovery without input, execution with the validated input and no approval)."""
    call = Call(
        snapshot=snapshot,
        surface=surface,
        actor=actor,
        capability_id=capability_id,
        raw_input=input_json,
    )
    response = gateway_pb2.CheckResponse(revision=snapshot.revision)
    try:
        await resolve_capability(call, rt)
        if phase is Phase.EXECUTION:
            await validate_input(call, rt)
    except CapabilityError as err:
        response.error.CopyFrom(error_proto(err, types_pb2.EXECUTION_STATE_NOT_STARTED))
        return response
    ev = snapshot.policies.evaluate_all(
        phase, eval_request(call, rt, with_input=phase is Phase.EXECUTION)
    )
    response.decision = _DECISIONS[ev.decision]
    if ev.approval is not None:
        response.approval_reasons.extend(ev.approval.reasons)
    _add_stances(response, ev.stances)
    return response
