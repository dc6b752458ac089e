"""Global approval indexes: idempotent updates after transitions, sweeping and reconciliation.

The indexes live outside the records' slots, so they are updated after a transition rather than
inside its script (DESIGN §12). Every update is idempotent (ZADD/ZREM of the same member), so a
crash between a transition and its index update leaves an index that is merely stale — List
reads the records themselves and skips what no longer matches — and `reconcile()` makes the
indexes exact again from a SCAN of the records.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any, Final

from gateway.approvals.keys import Keys
from gateway.approvals.records import ApprovalRecord, Status
from gateway.redisconn import RedisClient, RedisPipeline

_SWEEP_BATCH: Final = 500
_SCAN_COUNT: Final = 500
_LOAD_BATCH: Final = 200

Loader = Callable[[Collection[str]], Awaitable[dict[str, ApprovalRecord]]]


@dataclass(frozen=True, slots=True)
class ReconcileReport:
    records: int  # records found by the scan
    added: int  # index entries added or re-scored
    removed: int  # index entries removed


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def queue_created(pipe: RedisPipeline, keys: Keys, record: ApprovalRecord) -> None:
    pipe.zadd(keys.pending, {record.id: record.expires_at})
    pipe.zadd(keys.all, {record.id: record.created_at})
    pipe.zadd(keys.capability(record.capability_id), {record.id: record.created_at})


def queue_left_pending(pipe: RedisPipeline, keys: Keys, record: ApprovalRecord) -> None:
    pipe.zrem(keys.pending, record.id)
    pipe.zrem(keys.actor(record.requester.identity), record.id)


async def drop_from_pending(redis: RedisClient, keys: Keys, approval_id: str) -> None:
    await redis.zrem(keys.pending, approval_id)


async def due_pending(redis: RedisClient, keys: Keys, now: float) -> list[str]:
    rows = await redis.zrangebyscore(keys.pending, "-inf", f"({now!r}", start=0, num=_SWEEP_BATCH)
    return [_text(member) for member in rows]


async def prune_all(redis: RedisClient, keys: Keys, created_before: float) -> int:
    """Drop ids of records whose retention passed from the all-ids index (bounded per call)."""
    rows = await redis.zrangebyscore(
        keys.all, "-inf", f"({created_before!r}", start=0, num=_SWEEP_BATCH
    )
    ids = [_text(m) for m in rows]
    if not ids:
        return 0
    pipe = redis.pipeline(transaction=False)
    for approval_id in ids:
        pipe.exists(keys.record(approval_id))
    gone = [i for i, present in zip(ids, await pipe.execute(), strict=True) if not present]
    if gone:
        await redis.zrem(keys.all, *gone)
    return len(gone)


async def _scan(redis: RedisClient, pattern: str) -> list[str]:
    return [_text(key) async for key in redis.scan_iter(match=pattern, count=_SCAN_COUNT)]


async def _records(redis: RedisClient, keys: Keys, load: Loader) -> list[ApprovalRecord]:
    ids = [keys.id_of(key) for key in await _scan(redis, keys.record_pattern)]
    out: list[ApprovalRecord] = []
    for i in range(0, len(ids), _LOAD_BATCH):
        out.extend((await load(ids[i : i + _LOAD_BATCH])).values())
    return out


async def _sync(
    redis: RedisClient, index: str, desired: dict[str, float], still_wrong: Callable[[str], bool]
) -> tuple[int, int]:
    rows: Any = await redis.zrange(index, 0, -1, withscores=True)
    current = {_text(m): float(s) for m, s in rows}
    add = {m: s for m, s in desired.items() if current.get(m) != s}
    # Re-checked against the records loaded after the scan started: an entry written by a
    # concurrent create is not removed just because the scan had passed its record already.
    remove = [m for m in current if m not in desired and still_wrong(m)]
    pipe = redis.pipeline(transaction=False)
    if add:
        pipe.zadd(index, add)
    if remove:
        pipe.zrem(index, *remove)
    if add or remove:
        await pipe.execute()
    return len(add), len(remove)


def _stale(seen: dict[str, ApprovalRecord], pending_only: bool) -> Callable[[str], bool]:
    def wrong(member: str) -> bool:
        record = seen.get(member)
        return record is None or (pending_only and record.status != Status.PENDING)

    return wrong


async def reconcile(redis: RedisClient, keys: Keys, load: Loader) -> ReconcileReport:
    """Make every index equal to what the records say."""
    records = await _records(redis, keys, load)
    pending: dict[str, float] = {}
    every: dict[str, float] = {}
    by_cap: defaultdict[str, dict[str, float]] = defaultdict(dict)
    by_actor: defaultdict[str, dict[str, float]] = defaultdict(dict)
    for record in records:
        every[record.id] = record.created_at
        by_cap[keys.capability(record.capability_id)][record.id] = record.created_at
        if record.status == Status.PENDING:
            pending[record.id] = record.expires_at
            by_actor[keys.actor(record.requester.identity)][record.id] = record.expires_at
    extra = set(await _scan(redis, keys.capability_pattern))
    extra |= set(await _scan(redis, keys.actor_pattern))
    targets: dict[str, tuple[dict[str, float], bool]] = {
        keys.pending: (pending, True),
        keys.all: (every, False),
    }
    for key in extra | set(by_cap) | set(by_actor):
        is_actor = key.startswith(keys.actor_pattern[:-1])
        targets[key] = (by_actor.get(key, {}) if is_actor else by_cap.get(key, {}), is_actor)
    added = removed = 0
    for index, (desired, pending_only) in targets.items():
        ids = [_text(m) for m in await redis.zrange(index, 0, -1) if _text(m) not in desired]
        now_seen = await load(ids) if ids else {}

        a, r = await _sync(redis, index, desired, _stale(now_seen, pending_only))
        added += a
        removed += r
    return ReconcileReport(records=len(records), added=added, removed=removed)
