"""The result cache's rows (docs/cache.md, ADR 0024): a lookup after stage 10 and a store
after stage 12; stages 11-12 are no-ops on a hit (`unless_cached`).

Stages 1-10 always ran before the lookup (exposure, validation, policies, the approval gate,
execution-phase policies, the idempotency claim and `capability.started`), so a hit never
skips governance; redaction (13) runs per request on the cached validated output. Only
Invoke reads or writes the cache: a Resume runs the approved execution upstream (its row
returns at once when the call resumes an approval). Failures are never stored: the store row
runs only after stage 12 accepted the output. Redis down or slow is a miss, never an error.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Awaitable, Callable

import orjson

from capgate.v1 import types_pb2
from gateway.errors import CapabilityError
from gateway.pipeline.bindings import View, variables
from gateway.pipeline.call import Call, Runtime
from gateway.pipeline.stages import Outcome
from gateway.telemetry import metrics
from gateway.values.jsonvalue import dumps

log = logging.getLogger("capgate.cache")

StageFn = Callable[[Call, Runtime], Awaitable[Outcome | None]]


async def cache_lookup(call: Call, rt: Runtime) -> None:
    assert call.prepared is not None and call.actor is not None
    prepared = call.prepared
    spec = prepared.capability.cache
    if spec is None or prepared.cache_scope is None or rt.cache is None:
        return
    if call.approval is not None:
        return  # Resume: the approved execution runs upstream (docs/cache.md)
    cap_id = prepared.capability.id
    scope = prepared.cache_scope
    bindings = None
    if scope.needs_bindings:
        bindings = variables(call, rt, View.INPUT_FREE)
    scope_value = scope.value(call.actor, bindings)
    if scope_value is None:
        log.warning("capability %s: cache scope key failed; the call goes on uncached", cap_id)
        metrics.cache_lookups.add((cap_id, "unscoped"))
        return
    input_key = _input_key(call.input)
    if input_key is None:  # no JSON form orjson writes (not after stage 5's parser)
        log.warning("capability %s: input has no cache key; the call goes on uncached", cap_id)
        metrics.cache_lookups.add((cap_id, "unscoped"))
        return
    parts = (
        cap_id,
        prepared.digest,
        call.snapshot.revision,
        call.surface,  # the upstream is told the surface (x-capgate-surface)
        scope.kind,
        scope_value,
        input_key,
    )
    key = rt.cache.entry_key(cap_id, parts)
    found = await rt.cache.get(cap_id, key)
    metrics.cache_lookups.add((cap_id, found.result))
    if found.value is None:
        call.cache = "miss"
        call.cache_key = key
        return
    call.cache = "hit"
    call.output = orjson.loads(found.value)  # a fresh value: stage 13 redacts it in place
    call.attempts = 0  # nothing was sent upstream by this execution
    call.state = types_pb2.EXECUTION_STATE_COMPLETED


def _input_key(value: object) -> str | None:
    """What an entry answers for of the validated input: the SHA-256 of its JSON with sorted
    keys, as orjson writes it (ADR 0024, amended by issue 29): key order, whitespace, escapes
    and defaults do not matter; numbers count as the upstream receives them (1 and 1.0 are two
    entries). orjson in C, not the canonical JSON of approvals (`values/canonical.py`, pure
    Python): it was a tenth of what a miss added under bench.profile. None: no such form."""
    try:
        return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()
    except TypeError:
        return None


def hit_failure(call: Call, err: CapabilityError) -> CapabilityError:
    """What a failure after a hit says about this execution (docs/cache.md). The stages after
    the lookup (redaction, post-hooks, building the envelope; a shutdown) raise as if the
    upstream had answered this execution: on a hit it did not, nothing was sent, so nothing was
    executed before the failure (`executed_before_failure` false). `execution_state` stays
    COMPLETED: the entry is the answer of an upstream call that completed, for the execution
    that filled it."""
    if call.cache != "hit" or not err.executed:
        return err
    return dataclasses.replace(err, executed=False)


def unless_cached(run: StageFn) -> StageFn:
    """Stage 11 or 12, skipped when the lookup supplied the validated output."""

    async def stage(call: Call, rt: Runtime) -> Outcome | None:
        if call.cache == "hit":
            return None
        return await run(call, rt)

    stage.__name__ = run.__name__
    stage.__qualname__ = run.__qualname__
    return stage


async def cache_store(call: Call, rt: Runtime) -> None:
    """After stage 12 accepted the output: store it (validated, unredacted) for its TTL."""
    if call.cache != "miss" or not call.cache_key or rt.cache is None:
        return
    assert call.prepared is not None
    spec = call.prepared.capability.cache
    assert spec is not None
    cap_id = call.prepared.capability.id
    value = dumps(call.output)
    if len(value) > spec.max_bytes:
        metrics.cache_stores.add((cap_id, "too_large"))
        return
    stored = await rt.cache.put(cap_id, call.cache_key, value, spec.ttl_s)
    metrics.cache_stores.add((cap_id, "stored" if stored else "unavailable"))
