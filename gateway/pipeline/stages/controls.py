"""Stage 10 — controls: the deadline, the idempotency claim (§12: after stage 9, before stage
10's event) leased until that deadline plus a margin, and `capability.started` (awaited in
strict audit mode: AUDIT_UNAVAILABLE)."""

from __future__ import annotations

import asyncio

from capgate.v1 import gateway_pb2, types_pb2
from gateway.audit.sinks import AuditUnavailable
from gateway.errors import CapabilityError, Code, Event, not_found
from gateway.pipeline.bindings import View, evaluate
from gateway.pipeline.call import Call, Runtime
from gateway.pipeline.events import build, stances
from gateway.pipeline.stages import Replayed
from gateway.state.idempotency import LEASE_MARGIN_S, Claim, outcome_unknown_error
from gateway.values.canonical import input_hash
from policy import Decision, Phase

_HELD_BY_ANOTHER = frozenset({Code.IDEMPOTENCY_IN_PROGRESS, Code.IDEMPOTENCY_CONFLICT})


def compute_deadline(call: Call, rt: Runtime) -> float:
    """min(caller deadline - margin, capability timeout, else the default); a declared
    capability timeout is not capped by the default (§12)."""
    assert call.prepared is not None
    defaults = call.snapshot.settings.defaults
    timeout = call.prepared.capability.timeout_s or defaults.timeout_s
    now = rt.monotonic()
    deadline = now + timeout
    if call.caller_remaining_s is not None:
        caller = call.started + call.caller_remaining_s - defaults.deadline_margin_s
        deadline = min(deadline, caller)
    return deadline


def _scope(call: Call) -> tuple[str, str, str, str, str]:
    assert call.prepared is not None and call.actor is not None
    actor = call.actor
    return (actor.issuer, actor.id, call.surface, call.prepared.capability.id, call.idempotency_key)


def _answer(call: Call, claim: Claim) -> Replayed | None:
    """A claim (or early read) that found the key taken: replay a finished call's envelope,
    or say its outcome is unknown. None when this execution holds the key."""
    if claim.outcome_unknown:
        call.state = types_pb2.EXECUTION_STATE_UNKNOWN  # the holder may have run it
        raise outcome_unknown_error()
    if claim.replay is not None:
        # Same key, same input, finished: hand back the recorded (redacted) envelope.
        return Replayed(gateway_pb2.ExecutionResult.FromString(claim.replay), "idempotency")
    return None


async def replay_finished(call: Call, rt: Runtime) -> Replayed | None:
    """The journal read early (ADR 0034), right after stage 6 on Invoke and after the input
    checks on Resume: a repeat of a keyed call that finished answers its recorded envelope
    before anything that governs a new execution (pre-hooks, policies, limits, the approval
    gate) could turn it into another answer, and spends nothing; a repeat of one still
    running, or with another input, answers as the claim would. Only resolution, exposure,
    concealment and validation ran before it: a capability removed, hidden or no longer
    exposed answers as missing (SI-8), never with the recording. A free key goes on; stage
    10's claim still decides (a call that finished meanwhile is replayed there)."""
    store = rt.idempotency
    if not call.idempotency_key or store is None:
        return None
    # On Resume, the hash the requester's Invoke read with (the approval record keeps it).
    call.request_hash = call.request_hash or call.input_hash or input_hash(call.input)
    try:
        claim = await store.peek(_scope(call), call.request_hash)
    except CapabilityError:
        _conceal(call, rt)  # a store that cannot answer says nothing of a hidden capability
        raise
    if claim is None:
        return None  # a new key: stage 7 and the claim decide as for any call
    _conceal(call, rt)
    return _answer(call, claim)


async def journal_first(call: Call, rt: Runtime) -> Replayed | None:
    """Before a stage refuses or suspends a keyed call (a limit, the approval gate): the key
    read again (ADR 0034). A repeat that read the key free while its first call was on its way
    to the claim (a client's retry racing its own call) answers as the claim would — the
    recording, IDEMPOTENCY_IN_PROGRESS — not RATE_LIMITED or a second approval request for a
    call that runs. Concealment has decided by then (stage 7). A journal that cannot answer
    leaves the stage's own answer standing. Costs a read only on those answers."""
    store = rt.idempotency
    if not call.idempotency_key or store is None or call.approval is not None:
        return None
    try:
        claim = await store.peek(_scope(call), call.request_hash or input_hash(call.input))
    except CapabilityError as err:
        if err.code is Code.UPSTREAM_UNAVAILABLE:
            return None
        raise
    return None if claim is None else _answer(call, claim)


def _conceal(call: Call, rt: Runtime) -> None:
    """Before the journal answers anything about a key (SI-8, ADR 0034): the invocation
    policies that do not read `hooks` decide concealment, as they do before a hook is called.
    When they combine to hide (as stage 7 combines them), the capability answers as a missing
    one, whatever the journal holds. A deny, or a policy that fails, does not stop a replay:
    stage 7 would show the capability exists too, and nothing runs. Costs an evaluation only
    when the key is taken."""
    prepared = call.prepared
    assert prepared is not None
    if prepared.policy_phases is not None and Phase.INVOCATION not in prepared.policy_phases:
        return
    ev = evaluate(call, rt, View.INVOCATION, without_hooks=True)
    if ev.decision is Decision.HIDE:
        call.evaluation = ev
        raise not_found("hidden")


async def attach_controls(call: Call, rt: Runtime) -> Replayed | None:
    assert call.prepared is not None and call.actor is not None
    store = rt.idempotency
    call.deadline = compute_deadline(call, rt)
    if call.idempotency_key and store is not None:
        scope = _scope(call)
        digest = call.input_hash or input_hash(call.input)
        # The claim's lease ends with this execution's deadline, plus the time to record its
        # outcome: a claim its holder never finished (a crash) answers "unknown", not "retry".
        lease_s = call.deadline - rt.monotonic() + LEASE_MARGIN_S
        # Held from before the claim is sent: a claim that ran in Redis but whose reply was
        # lost (a cancel, a timeout, a drain) is released by the runner when nothing ran. The
        # release only deletes a running claim of this execution id, so a claim that never
        # ran, or that another execution holds, is left as it is.
        call.idempotency_scope = scope
        # Shielded, like the limits' spend: a cancel lets the answer arrive, and the runner
        # waits for it before it releases the key (pipeline/runner.py _collect_unanswered).
        call.claiming = asyncio.ensure_future(
            store.claim(
                scope, digest, call.execution_id, lease_s=lease_s, request_hash=call.request_hash
            )
        )
        try:
            claim = await asyncio.shield(call.claiming)
            call.claiming = None
        except CapabilityError as err:
            call.claiming = None
            if err.code in _HELD_BY_ANOTHER:
                call.idempotency_scope = None  # answered: this execution holds nothing
            raise
        if not claim.claimed:
            call.idempotency_scope = None
            return _answer(call, claim)
    if call.deadline <= rt.monotonic():
        raise CapabilityError(Code.TIMEOUT, reason="no time left before the upstream call")
    event = build(Event.STARTED, call, rt.wall(), stances=stances(call))  # each policy's stance
    if call.snapshot.settings.audit.strict:
        try:
            await rt.audit.emit_strict(event)
        except AuditUnavailable:
            raise CapabilityError(
                Code.AUDIT_UNAVAILABLE, reason="strict audit write failed"
            ) from None
    else:
        rt.audit.emit(event)
    return None
