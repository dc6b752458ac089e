"""The limit state in Redis: one script call checks and spends every limit of a call (or, for
`Check`, peeks at them without spending).

Key layout (docs/limits.md; ADR 0022):

    <prefix>:{lim}:<limit>:<shape>:<sha256(key value)[:32]>           the state (TAT or spent)
    <prefix>:{lim}:<limit>:<shape>:<sha256(key value)[:32]>:apr:<id>  an approval counted
    <prefix>:{lim}:rcpt:<sha256(execution id)[:32]>                    what one call spent

`<shape>` is the kind and a digest of the parameters the state means something under
(`shape()`): a reload that turns a budget into a rate, or changes a window, starts fresh keys.

Every key shares the `{lim}` hash tag: the limits of one call are different keys (a per-actor
rate, a per-tenant budget, ...) that must be read and written in ONE atomic script, and the
same key is reached from calls of any capability and actor, so no narrower tag can put all
the keys of every call in one slot. The cost: limit state lives on one Cluster shard. Key
values are hashed, so actor ids and tenants never appear in key names.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError

from gateway.config.limitspec import LimitSpec
from gateway.config.settings import RedisSettings
from gateway.state.connections import RedisClient, RedisUnavailable, hot_script, mapped_errors
from gateway.state.limits.connection import LimitsRedis, open_limits_redis
from gateway.state.limits.script import CHECK_AND_SPEND, GIVE_BACK, GIVE_BACK_RECEIPT, PEEK

TAG = "{lim}"
_HEADS = 1024  # key heads kept (`RedisLimiter._head`): far more than a config's limits
log = logging.getLogger("capgate.limits")


@dataclass(frozen=True, slots=True)
class Charge:
    """One limit to check for a call: its spec, the key value, the amount (budgets), and
    whether an approval lets it past (budgets with `on_exceed: require-approval`)."""

    spec: LimitSpec
    key: str
    amount: float = 1.0
    approval_id: str = ""  # forced past the budget once for this approval


@dataclass(frozen=True, slots=True)
class Verdict:
    passed: bool
    remaining: float
    retry_after_s: float | None  # None: waiting never helps (amount above the budget's max)
    window: bytes = b"0"  # a budget spent from: its window's end, as stored (for give_back)


@dataclass(frozen=True, slots=True)
class Spent:
    """What a call spent from one budget, so a call that never ran can give it back."""

    key: str
    amount: float
    window: bytes
    marker: str = ""  # a forced spend (an approval let it past): its approval marker key


class RedisLimiter:
    """Checks and spends limits in Redis. `now` is the caller's (the runtime's injected wall
    clock), passed to the script: never Redis `TIME`, so every replica and test agrees."""

    def __init__(
        self, redis: RedisClient, *, prefix: str, connection: LimitsRedis | None = None
    ) -> None:
        if "{" in prefix or "}" in prefix:
            raise ValueError("redis key prefix must not contain braces")
        self._prefix = prefix
        self.redis = redis  # the cache keeps its entries here too (ADR 0043)
        self._connection = connection  # limits' own Redis (ADR 0037), closed with the limiter
        self._script = hot_script(redis, CHECK_AND_SPEND)
        self._give_back = hot_script(redis, GIVE_BACK)
        self._give_back_receipt = hot_script(redis, GIVE_BACK_RECEIPT)
        self._peek = hot_script(redis, PEEK)
        self._heads: dict[int, tuple[LimitSpec, str]] = {}

    @classmethod
    def open(cls, settings: RedisSettings, shared: RedisClient) -> RedisLimiter:
        """A limiter on the Redis `settings` give limits (ADR 0037; `shared`: redis.url's)."""
        connection = open_limits_redis(settings, shared)
        return cls(connection.client, prefix=settings.key_prefix, connection=connection)

    async def close(self) -> None:
        """Close limits' own Redis client, and stop its embedded server, if they have one."""
        if self._connection is not None:
            await self._connection.close()

    def key(self, spec: LimitSpec, value: str) -> str:
        digest = hashlib.sha256(value.encode()).hexdigest()[:32]
        return f"{self._head(spec)}:{digest}"

    def _head(self, spec: LimitSpec) -> str:
        """`<prefix>:{lim}:<limit>:<shape>` of `spec`, computed once per spec (a snapshot's
        specs live as long as it; a reload's new ones replace them, at most `_HEADS` kept)."""
        found = self._heads.get(id(spec))
        if found is not None and found[0] is spec:
            return found[1]
        if len(self._heads) >= _HEADS:
            self._heads.clear()
        head = f"{self._prefix}:{TAG}:{spec.name}:{shape(spec)}"
        self._heads[id(spec)] = (spec, head)
        return head

    async def check(
        self,
        charges: Sequence[Charge],
        *,
        now: float,
        receipt: str = "",
        receipt_ttl_s: float = 0.0,
    ) -> list[Verdict]:
        """One verdict per charge; every charge was spent when every verdict passed, none
        otherwise. Raises `RedisUnavailable` when Redis cannot answer. With `receipt` (the
        execution id), the script also leaves a receipt of the budgets it spent, for
        `receipt_ttl_s`: `give_back_receipt` credits them even when this reply is lost."""
        extra = (
            (self.receipt_key(receipt), max(1, math.ceil(receipt_ttl_s * 1000)))
            if receipt
            else None
        )
        return await self._decide(self._script, charges, now, extra)

    def receipt_key(self, execution_id: str) -> str:
        digest = hashlib.sha256(execution_id.encode()).hexdigest()[:32]
        return f"{self._prefix}:{TAG}:rcpt:{digest}"

    async def give_back_receipt(
        self, charges: Sequence[Charge], execution_id: str, *, ttl_s: float = 60.0
    ) -> bool:
        """Credit what the check of `execution_id` spent from budgets, as its receipt says,
        when the check's reply was lost (a timeout, a dropped connection): nothing when the
        check never ran or this was done already; a check that arrives later (queued behind a
        slow script, retransmitted) then spends nothing: the receipt is marked void for
        `ttl_s`. One round trip; raises `RedisUnavailable`."""
        keys: list[str] = []
        for charge in charges:
            state = self.key(charge.spec, charge.key)
            keys += [state, _marker(state, charge.approval_id)]
        keys.append(self.receipt_key(execution_id))
        args = [repr(charge.amount) for charge in charges]
        args.append(str(max(1, math.ceil(ttl_s * 1000))))  # a 'void' mark lives as long
        with _refusals_unavailable(), mapped_errors():
            done = await self._give_back_receipt(keys=keys, args=args)
        return bool(done)

    async def peek(self, charges: Sequence[Charge], *, now: float) -> list[Verdict]:
        """The verdicts `check` would give now, spending nothing and writing nothing (`Check`,
        ADR 0035). Raises `RedisUnavailable` when Redis cannot answer, as `check` does."""
        return await self._decide(self._peek, charges, now)

    async def _decide(
        self,
        script: Any,
        charges: Sequence[Charge],
        now: float,
        receipt: tuple[str, int] | None = None,
    ) -> list[Verdict]:
        keys: list[str] = []
        args: list[Any] = [repr(math.floor(now * 1000.0))]
        for charge in charges:
            state = self.key(charge.spec, charge.key)
            keys += [state, _marker(state, charge.approval_id)]
            args += _args(charge)
        if receipt is not None:
            keys.append(receipt[0])
            args.append(str(receipt[1]))
        with _refusals_unavailable(), mapped_errors():
            reply: list[Any] = await script(keys=keys, args=args)
        verdicts = []
        for i in range(len(charges)):
            passed, remaining, wait = (float(bytes(x)) for x in reply[4 * i : 4 * i + 3])
            retry = None if wait < 0 else wait / 1000.0
            window = bytes(reply[4 * i + 3])
            verdicts.append(Verdict(passed == 1.0, max(0.0, remaining), retry, window))
        return verdicts

    def spent(self, charges: Sequence[Charge], verdicts: Sequence[Verdict]) -> tuple[Spent, ...]:
        """The budget amounts a passed check spent (rates count attempts: never given back).
        A forced charge is reported whether this check spent it or found its approval's amount
        counted already (the marker): the give-back of either credits it at most once."""
        out = []
        for c, v in zip(charges, verdicts, strict=True):
            if c.spec.budget is None or v.window == b"0" or c.amount <= 0:
                continue
            state = self.key(c.spec, c.key)
            marker = _marker(state, c.approval_id) if c.approval_id else ""
            out.append(Spent(state, c.amount, v.window, marker))
        return tuple(out)

    async def give_back(self, spent: Sequence[Spent]) -> None:
        """Credit budgets a call spent from when its upstream was never called (one round
        trip; only the window it was spent in; a forced spend only while its approval marker
        is there, deleting it). Raises `RedisUnavailable`."""
        keys: list[str] = []
        args: list[Any] = []
        for item in spent:
            keys += [item.key, item.marker or _marker(item.key, "")]
            args += [repr(item.amount), item.window, "1" if item.marker else "0"]
        with _refusals_unavailable(), mapped_errors():
            await self._give_back(keys=keys, args=args)


def shape(spec: LimitSpec) -> str:
    """What the state under a key means: the kind and the parameters its value depends on
    (a rate's emission interval and burst; a budget's window). A reload that changes them
    starts new keys instead of reading a state of another shape (a budget's hash as a rate's
    TAT would be WRONGTYPE). A budget's `max` is not part of it: a raised or lowered max
    keeps what was spent in the window."""
    if spec.rate is not None:
        text = f"r:{spec.rate.interval_ms!r}:{spec.rate.burst}"
    else:
        assert spec.budget is not None
        text = f"b:{spec.budget.window_s!r}"
    return text[0] + hashlib.sha256(text.encode()).hexdigest()[:8]


@contextlib.contextmanager
def _refusals_unavailable() -> Iterator[None]:
    """A Redis error reply (WRONGTYPE, NOPERM, BUSY, a script error) counts as Redis
    unavailable for the limits: each limit's `on_redis_down` decides, never a failed call."""
    try:
        yield
    except RedisError as exc:  # connectivity errors are RedisUnavailable already (inside)
        log.warning("limit script refused by Redis (%s)", type(exc).__name__)
        raise RedisUnavailable(type(exc).__name__) from exc


def _marker(state: str, approval_id: str) -> str:
    return f"{state}:apr:{approval_id or '-'}"


def _args(charge: Charge) -> list[str]:
    spec = charge.spec
    force = "1" if charge.approval_id else "0"
    if spec.rate is not None:
        return ["r", repr(spec.rate.interval_ms), str(spec.rate.burst), "0", force]
    assert spec.budget is not None
    window_ms = repr(spec.budget.window_s * 1000.0)
    return ["b", repr(charge.amount), repr(spec.budget.max), window_ms, force]
