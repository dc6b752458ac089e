"""Standing grants at stage 8 (ADR 0038, docs/approvals.md "Grants").

When the approval gate would ask for an approval on Invoke, a live grant may stand in for it:
`cover` looks for one and takes a use of it atomically in Redis; the call then goes on to stage 9
as its own actor, with `call.grant_id` set (the envelope, every event of the call, the upstream's
actor token). `give_back` returns the use of a call that never reached the upstream (a stage-9
deny too, as budgets give back), exactly once, by the take's receipt. `covering` is Check's
read-only look: which grant would cover the call, nothing taken.

A grant never lifts anything but the approval: deny, hide, validation, pre-hooks and limits ran
before stage 8 as always, and stage 9 onwards runs as for any call. It stands in only for a
requirement that is grantable (no `grantable: false` anywhere, no hook's ask, no budget's
overrun, no inline approver) with a quorum of one and no distinct roles, and only when its
creator held every role the requirement names.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from capgate.v1 import types_pb2
from gateway.errors import CapabilityError, Event
from gateway.pipeline.call import Call, Runtime
from gateway.pipeline.events import build
from gateway.pipeline.grantexpr import GrantExprError, GrantExprs, compile_grant_exprs
from gateway.pipeline.stages.limits import RECEIPT_MARGIN_S
from gateway.telemetry import metrics

if TYPE_CHECKING:
    from gateway.pipeline.stages.approval import GateRequirement
    from gateway.state.approvals.grants import GrantSpec, Taken

log = logging.getLogger("capgate.grants")

# Compiled expressions per (grant id, snapshot revision): a grant matched on every call is
# compiled once per snapshot. None: its expressions do not compile against this capability's
# input any more (the config changed since its creation): it covers nothing.
_COMPILED_MAX: Final = 1024
_compiled: OrderedDict[tuple[str, str, str], GrantExprs | None] = OrderedDict()


def _exprs(call: Call, grant: GrantSpec) -> GrantExprs | None:
    assert call.prepared is not None
    capability = call.prepared.capability.id
    key = (grant.id, call.snapshot.revision, capability)
    if key in _compiled:
        return _compiled[key]
    try:
        found: GrantExprs | None = compile_grant_exprs(
            call.snapshot, (capability,), grant.constraint, grant.amount
        )
    except GrantExprError:
        found = None
    _compiled[key] = found
    if len(_compiled) > _COMPILED_MAX:
        _compiled.popitem(last=False)
    return found


def grantable(need: GateRequirement) -> bool:
    """Whether a grant may stand in for this requirement at all."""
    return need.grantable and need.quorum <= 1 and not need.distinct_roles


def _grantable_call(call: Call, need: GateRequirement) -> bool:
    """`grantable`, and the capability has no inline approver: its Approver decides each call
    (a per-call risk engine), which no standing grant stands in for."""
    assert call.prepared is not None
    return call.prepared.inline_approver is None and grantable(need)


def _matches(call: Call, grant: GrantSpec, roles: Sequence[str]) -> tuple[bool, float | None]:
    """(covered, amount) of one candidate for this call: its creator held the requirement's
    roles and is not the caller (with `approvals.reject_self_approval`), its constraint holds
    on the call's input, and its amount (when it has a total) is a finite number >= 0.
    Nothing here reads Redis."""
    assert call.actor is not None
    if not set(roles) <= set(grant.approver_roles):
        return False, None
    if (
        call.snapshot.settings.approvals.reject_self_approval
        and grant.creator == call.actor.identity
    ):
        return False, None  # SI-4: a role grant never covers its own creator's calls
    exprs = _exprs(call, grant)
    if exprs is None or not exprs.covers(call.input, call.actor.as_policy_value()):
        return False, None
    if not grant.amount:
        return True, None
    try:
        return True, exprs.amount(call.input)
    except CapabilityError:
        return False, None


async def _candidates(call: Call, rt: Runtime) -> list[GrantSpec]:
    assert call.prepared is not None and call.actor is not None
    capability = call.prepared.capability
    found: list[GrantSpec] = await rt.grants.candidates(call.actor, capability.id, capability.tags)
    return found


def _receipt_ttl(call: Call) -> float:
    assert call.prepared is not None
    timeout = call.prepared.capability.timeout_s or call.snapshot.settings.defaults.timeout_s
    return timeout + RECEIPT_MARGIN_S


async def cover(call: Call, rt: Runtime, need: GateRequirement) -> bool:
    """Stage 8 on Invoke: take a use of the first live grant that covers the call (earliest
    expiry first, then id). True when one did: the call goes on without an approval."""
    assert call.actor is not None
    if rt.grants is None or call.approval is not None or call.actor.anonymous:
        return False
    if not _grantable_call(call, need):
        return False
    for grant in await _candidates(call, rt):
        covered, amount = _matches(call, grant, need.roles)
        if not covered:
            continue
        call.grant_taking = grant.id  # from here a failure gives back what the take may hold
        taken = await rt.grants.take(
            grant.id,
            execution_id=call.execution_id,
            amount=amount,
            receipt_ttl_s=_receipt_ttl(call),
        )
        if taken is None:
            continue  # revoked, expired or exhausted meanwhile: the next one
        _covered(call, rt, grant, taken)
        return True
    call.grant_taking = ""
    return False


def _covered(call: Call, rt: Runtime, grant: GrantSpec, taken: Taken) -> None:
    call.grant_id = grant.id
    call.grant = grant
    metrics.grants_uses.add(("taken",))
    now = rt.wall()
    rt.audit.emit(build(Event.GRANT_USED, call, now, uses=taken.uses, **_what(grant)))
    if taken.exhausted:
        rt.audit.emit(build(Event.GRANT_EXHAUSTED, call, now, uses=taken.uses, **_what(grant)))


def _what(grant: GrantSpec) -> dict[str, Any]:
    return {"capability_id": grant.capability_id} if grant.capability_id else {"tag": grant.tag}


async def covering(call: Call, rt: Runtime, need: GateRequirement) -> str:
    """Check: the id of the grant that would cover this call now, "" for none; nothing taken.
    A grant counts when it has room for this call (uses and total), as its take would see."""
    assert call.actor is not None
    if rt.grants is None or call.actor.anonymous or not _grantable_call(call, need):
        return ""
    for grant in await _candidates(call, rt):
        covered, amount = _matches(call, grant, need.roles)
        if not covered:
            continue
        room = await rt.grants.room(grant.id)
        if room is None or room[0] != "active":
            continue
        _, uses, total = room
        if grant.max_uses and uses >= grant.max_uses:
            continue
        if grant.max_total and total + (amount or 0.0) > grant.max_total:
            continue
        return grant.id
    return ""


async def give_back(call: Call, rt: Runtime, err: CapabilityError | None) -> bool:
    """A covered call that never reached the upstream (NOT_STARTED, whatever the reason: a
    stage-9 deny too, as budgets give back) returns its use: once, by its receipt; a take whose
    reply was lost is voided. True when a use came back (the terminal event then carries
    `grant_released: true`)."""
    grant_id = call.grant_taking
    if not grant_id or rt.grants is None or call.state != types_pb2.EXECUTION_STATE_NOT_STARTED:
        return False
    call.grant_taking = ""
    try:
        returned: bool = await rt.grants.give_back(grant_id, execution_id=call.execution_id)
    except Exception as exc:  # recording never escapes the runner: the use stays taken
        log.warning(
            "could not give back the grant use of %s (%s)", call.execution_id, type(exc).__name__
        )
        metrics.outcome_record_failures.add(("grant_give_back",))
        return False
    if returned:
        call.grant_released = True
        metrics.grants_uses.add(("given_back",))
    return returned
