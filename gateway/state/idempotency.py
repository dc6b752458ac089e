"""The idempotency journal (DESIGN §2, §12): one atomic claim per keyed call, then its result.

Scope = (issuer, actor id, surface, capability, key), hashed into one key
`<prefix>:{idem:<sha256>}` (its own Cluster slot). The claim is taken after stage 9 and before
stage 10, in ONE round trip (a Lua script on that key):

- no entry → CLAIMED (state `running`, the input hash and execution id stored)
- same input hash, still running within the claim's lease → IDEMPOTENCY_IN_PROGRESS (retryable)
- same input hash, still running after the lease → `Claim(outcome_unknown=True)`: the holder
  crashed or lost Redis mid-call; the stage answers `outcome_unknown_error()` (EXECUTION_FAILED,
  not retryable, UNKNOWN, ADR 0014) and the key never runs again
- another input hash → IDEMPOTENCY_CONFLICT
- same input hash, done → `Claim(replay=<stored envelope>)`: answer it, execute nothing

When the call ends the runner either stores the (redacted) envelope with `complete` or, only if
the upstream procedure was never called (execution_state NOT_STARTED), gives the key back with
`release` so a retry can run. COMPLETED and UNKNOWN outcomes are stored and replayed: an effect
that may have happened is never re-run by a repeat (§12). Redis unreachable → a retryable
UPSTREAM_UNAVAILABLE; the call never executes unclaimed.

The lease: the pipeline claims with `lease_s` = the time left to the execution's deadline plus
`LEASE_MARGIN_S` (the time to record the outcome after the deadline). A live gateway always
finishes its call by then; a later `complete` still records the outcome, and repeats replay it.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import orjson

from gateway.errors import CapabilityError, Code
from gateway.model import Actor
from gateway.state.connections import RedisClient, RedisUnavailable, hot_script, mapped_errors

# ARGV: now (wall seconds), input hash, execution id, TTL in ms, lease end (wall seconds; ''
# for no lease), the request hash (the validated input before pre-hooks, what a repeat's early
# read compares: ADR 0034; '' when it equals the input hash). A running claim whose lease has
# ended answers LOST: its holder died or lost Redis mid-call, so the effect is unknown and the
# key never runs again (issue 14).
_CLAIM: Final = """
local key = KEYS[1]
local f = redis.call('HMGET', key, 'state', 'input_hash', 'execution_id', 'envelope',
  'lease_until')
if not f[1] then
  redis.call('HSET', key, 'state', 'running', 'input_hash', ARGV[2], 'execution_id', ARGV[3],
    'claimed_at', ARGV[1])
  if ARGV[5] ~= '' then redis.call('HSET', key, 'lease_until', ARGV[5]) end
  if ARGV[6] and ARGV[6] ~= '' then redis.call('HSET', key, 'request_hash', ARGV[6]) end
  redis.call('PEXPIRE', key, ARGV[4])
  return {'CLAIMED', ARGV[3]}
end
if f[2] ~= ARGV[2] then return {'CONFLICT', f[3]} end
if f[1] == 'running' then
  -- The same execution asking again (its first reply was lost) still holds the claim.
  if f[3] == ARGV[3] then return {'CLAIMED', ARGV[3]} end
  if f[5] and tonumber(f[5]) < tonumber(ARGV[1]) then return {'LOST', f[3]} end
  return {'IN_PROGRESS', f[3]}
end
return {'DONE', f[3], f[4]}
"""

# The early read (ADR 0034): what a repeat would hear from the claim, without claiming. Read
# only; ARGV: now (wall seconds), the repeat's request hash.
_PEEK: Final = """
local f = redis.call('HMGET', KEYS[1], 'state', 'input_hash', 'execution_id', 'envelope',
  'lease_until', 'request_hash')
if not f[1] then return {'NONE', ''} end
if f[2] ~= ARGV[2] and f[6] ~= ARGV[2] then return {'CONFLICT', f[3]} end
if f[1] == 'running' then
  if f[5] and tonumber(f[5]) < tonumber(ARGV[1]) then return {'LOST', f[3]} end
  return {'IN_PROGRESS', f[3]}
end
return {'DONE', f[3], f[4]}
"""

_COMPLETE: Final = """
local key = KEYS[1]
local f = redis.call('HMGET', key, 'state', 'execution_id')
if not f[1] then return 'MISSING' end
if f[1] == 'done' then return 'DONE' end
if ARGV[3] ~= '' and f[2] ~= ARGV[3] then return 'OTHER' end
redis.call('HSET', key, 'state', 'done', 'envelope', ARGV[2], 'completed_at', ARGV[1])
redis.call('PEXPIRE', key, ARGV[4])
return 'OK'
"""

_RELEASE: Final = """
local key = KEYS[1]
local f = redis.call('HMGET', key, 'state', 'execution_id')
if f[1] == 'running' and (ARGV[1] == '' or f[2] == ARGV[1]) then
  redis.call('DEL', key)
  return 1
end
return 0
"""


@dataclass(frozen=True, slots=True)
class IdempotencyScope:
    """Whose key this is: the same key from another actor, surface or capability is unrelated."""

    issuer: str
    actor_id: str
    surface: str
    capability_id: str
    key: str

    @classmethod
    def of(cls, actor: Actor, surface: str, capability_id: str, key: str) -> IdempotencyScope:
        return cls(actor.issuer, actor.id, surface, capability_id, key)

    def digest(self) -> str:
        # A JSON array, not a joined string: no choice of separator can make two scopes collide.
        parts = [self.issuer, self.actor_id, self.surface, self.capability_id, self.key]
        return hashlib.sha256(orjson.dumps(parts)).hexdigest()


# The pipeline may pass the scope as a plain (issuer, actor id, surface, capability, key) tuple.
ScopeLike: TypeAlias = IdempotencyScope | tuple[str, str, str, str, str]


def _scope(scope: ScopeLike) -> IdempotencyScope:
    return scope if isinstance(scope, IdempotencyScope) else IdempotencyScope(*scope)


# After the deadline: the attempt's own timeout fires, stages 12-13 run and the outcome is
# written. A margin, not a bound on the upstream: a gateway alive past it still records.
LEASE_MARGIN_S: Final = 10.0
OUTCOME_UNKNOWN_MESSAGE: Final = (
    "The outcome of the earlier call with this idempotency key is unknown; it is not run again."
)


@dataclass(frozen=True, slots=True)
class Claim:
    """The claim's answer: `replay` holds the stored envelope when the call already finished;
    `outcome_unknown` says the holder's lease ran out before it recorded an outcome."""

    execution_id: str  # the execution that holds (or held) the key
    replay: bytes | None = None
    outcome_unknown: bool = False

    @property
    def claimed(self) -> bool:
        return self.replay is None and not self.outcome_unknown


def outcome_unknown_error() -> CapabilityError:
    """The answer for a key whose running claim outlived its lease (ADR 0014): not retryable,
    and the caller is told plainly that the effect may have happened."""
    return CapabilityError(
        Code.EXECUTION_FAILED,
        message=OUTCOME_UNKNOWN_MESSAGE,
        reason="idempotency claim lease ended without an outcome",
        retryable=False,
        expose_to_model=True,
    )


@contextmanager
def _available() -> Iterator[None]:
    try:
        with mapped_errors():
            yield
    except RedisUnavailable as exc:
        # No dedicated code exists; UPSTREAM_UNAVAILABLE is the retryable "try again later",
        # and the call is not executed (never unclaimed, §12).
        raise CapabilityError(
            Code.UPSTREAM_UNAVAILABLE, reason="idempotency store unavailable", retryable=True
        ) from exc


class RedisIdempotencyStore:
    """Claims, results and releases of idempotency keys in Redis."""

    def __init__(
        self,
        redis: RedisClient,
        *,
        prefix: str = "capgate",
        ttl_s: float,
        clock: Callable[[], float],
    ) -> None:
        if "{" in prefix or "}" in prefix:
            raise ValueError("redis key prefix must not contain braces")
        self._prefix = prefix
        self._ttl_ms = max(1, math.ceil(ttl_s * 1000))
        self._clock = clock
        self._claim = hot_script(redis, _CLAIM)
        self._complete = hot_script(redis, _COMPLETE)
        self._release = hot_script(redis, _RELEASE)
        self._peek = hot_script(redis, _PEEK)

    def key(self, scope: ScopeLike) -> str:
        return f"{self._prefix}:{{idem:{_scope(scope).digest()}}}"

    async def claim(
        self,
        scope: ScopeLike,
        input_hash: str,
        execution_id: str,
        *,
        lease_s: float | None = None,
        request_hash: str = "",
    ) -> Claim:
        """Claim the key for `execution_id`, or raise/replay as the module docstring says.
        `lease_s`: how long the claim holds before a repeat hears the outcome is unknown
        (None: until the TTL, as claims written before leases existed). `request_hash`: the
        hash of the input as the caller sent it (validated, before pre-hooks changed it),
        which `peek` also matches."""
        now = self._clock()
        lease = "" if lease_s is None else repr(now + max(lease_s, 0.0))
        extra = "" if request_hash == input_hash else request_hash
        args: list[str | bytes | float] = [
            repr(now),
            input_hash,
            execution_id,
            self._ttl_ms,
            lease,
            extra,
        ]
        with _available():
            reply: list[Any] = await self._claim(keys=[self.key(scope)], args=args)
        return _claim_answer(reply)

    async def peek(self, scope: ScopeLike, request_hash: str) -> Claim | None:
        """What the claim would answer a repeat with this request hash, without claiming
        (ADR 0034): None when the key is free; a `Claim` with `replay` (done) or
        `outcome_unknown`; raises IDEMPOTENCY_IN_PROGRESS or IDEMPOTENCY_CONFLICT. Read only:
        nothing to give back whatever happens to the reply."""
        with _available():
            reply: list[Any] = await self._peek(
                keys=[self.key(scope)], args=[repr(self._clock()), request_hash]
            )
        if bytes(reply[0]) == b"NONE":
            return None
        return _claim_answer(reply)

    async def complete(self, scope: ScopeLike, envelope: bytes, *, execution_id: str = "") -> bool:
        """Store the (redacted) envelope for replays; False when nothing was stored (the key
        is gone, already done, or — with `execution_id` — held by another execution)."""
        args: list[str | bytes | float] = [self._clock(), envelope, execution_id, self._ttl_ms]
        with _available():
            reply = await self._complete(keys=[self.key(scope)], args=args)
        return bytes(reply) == b"OK"

    async def release(self, scope: ScopeLike, *, execution_id: str = "") -> bool:
        """Give a running claim back (only for NOT_STARTED outcomes); a finished key stays."""
        with _available():
            reply = await self._release(keys=[self.key(scope)], args=[execution_id])
        return bool(reply)


def _claim_answer(reply: list[Any]) -> Claim:
    """The claim's (or the early read's) reply as a `Claim`, or the refusal it means."""
    outcome, holder = bytes(reply[0]), bytes(reply[1]).decode()
    if outcome == b"CLAIMED":
        return Claim(execution_id=holder)
    if outcome == b"DONE":
        return Claim(execution_id=holder, replay=bytes(reply[2]))
    if outcome == b"LOST":
        return Claim(execution_id=holder, outcome_unknown=True)
    if outcome == b"IN_PROGRESS":
        raise CapabilityError(Code.IDEMPOTENCY_IN_PROGRESS, reason="key held by a running call")
    raise CapabilityError(Code.IDEMPOTENCY_CONFLICT, reason="key used with another input")
