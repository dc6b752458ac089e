"""Global approval indexes: idempotent updates after transitions, sweeping and reconciliation.

The indexes live outside the records' slots, so they are updated after a transition rather than
inside its script (DESIGN §12). Every update is idempotent (ZADD/ZREM of the same member), so a
crash between a transition and its index update leaves an index that is merely stale — List
reads the records themselves and skips what no longer matches — and `reconcile()` makes the
indexes exact again from a SCAN of the records.

Bounds (issue 14): an entry leaves the pending, actor and escalation indexes when its record
leaves pending (decided, expired — the sweep expires due ones; the escalation index also once
the record is escalated), and the all-ids and capability indexes when its
record's retention ends: `retire` schedules each record's end (expiry + retention, the record's
own TTL) and the sweep drops what is due. Every index key's TTL is extended to its longest-lived
record's on each write, so an index outlives no record it lists by more than one retention.
"""

from __future__ import annotations

import asyncio
import math
from collections import defaultdict
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any, Final

from gateway.state.approvals.keys import Keys
from gateway.state.approvals.records import ApprovalRecord, Status
from gateway.state.connections import RedisClient, RedisPipeline

_SWEEP_BATCH: Final = 500
_SCAN_COUNT: Final = 500
_LOAD_BATCH: Final = 200
_NO_KEY: Final = -2  # PTTL of a missing key
_RECHECK_MS: Final = 1000  # a record without TTL (never written so) is looked at again after 1 s

Loader = Callable[[Collection[str]], Awaitable[dict[str, ApprovalRecord]]]
Script = Callable[..., Awaitable[Any]]  # a registered Lua script: (keys=[...], args=[...])


@dataclass(frozen=True, slots=True)
class ReconcileReport:
    records: int  # records found by the scan
    added: int  # index entries added or re-scored
    removed: int  # index entries removed


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def retire_member(record: ApprovalRecord) -> str:
    """The `retire` entry of a record: its id (no spaces, `keys.valid_id`) and capability."""
    return f"{record.id} {record.capability_id}"


def record_end(record: ApprovalRecord, retention_s: float) -> float:
    """When the record leaves Redis: its TTL is expiry + retention from creation."""
    return record.expires_at + retention_s


def queue_created(
    pipe: RedisPipeline, keys: Keys, record: ApprovalRecord, *, retention_s: float
) -> list[str]:
    """Index a new record (pending, all, its capability, retire); the keys written, whose TTLs
    the caller then extends to the record's (`extend_ttls`)."""
    capability = keys.capability(record.capability_id)
    pipe.zadd(keys.pending, {record.id: record.expires_at})
    pipe.zadd(keys.all, {record.id: record.created_at})
    pipe.zadd(capability, {record.id: record.created_at})
    pipe.zadd(keys.retire, {retire_member(record): record_end(record, retention_s)})
    written = [keys.pending, keys.all, capability, keys.retire]
    if record.escalate_at is not None and record.escalate_at < record.expires_at:
        pipe.zadd(keys.escalate, {record.id: record.escalate_at})
        written.append(keys.escalate)
    return written


async def extend_ttls(extend: Script, indexes: Collection[str], ttl_ms: int) -> None:
    """Extend each index key's TTL to at least `ttl_ms` (one-key scripts, run concurrently)."""
    await asyncio.gather(*(extend(keys=[index], args=[ttl_ms]) for index in indexes))


def queue_left_pending(pipe: RedisPipeline, keys: Keys, record: ApprovalRecord) -> None:
    pipe.zrem(keys.pending, record.id)
    pipe.zrem(keys.actor(record.requester.identity), record.id)
    pipe.zrem(keys.escalate, record.id)


async def drop_from_pending(redis: RedisClient, keys: Keys, approval_id: str) -> None:
    await redis.zrem(keys.pending, approval_id)


async def drop_from_escalation(redis: RedisClient, keys: Keys, approval_id: str) -> None:
    await redis.zrem(keys.escalate, approval_id)


async def due_escalations(redis: RedisClient, keys: Keys, now: float) -> list[str]:
    """Pending ids whose `escalate_at` has come (bounded per call)."""
    rows = await redis.zrangebyscore(keys.escalate, "-inf", now, start=0, num=_SWEEP_BATCH)
    return [_text(member) for member in rows]


async def due_pending(redis: RedisClient, keys: Keys, now: float) -> list[str]:
    rows = await redis.zrangebyscore(keys.pending, "-inf", f"({now!r}", start=0, num=_SWEEP_BATCH)
    return [_text(member) for member in rows]


async def retire_due(redis: RedisClient, keys: Keys, now: float) -> int:
    """Drop records whose end has come from the all-ids and capability indexes (bounded per
    call); returns how many. A record Redis still holds (its TTL runs on Redis's clock, which
    may lag the gateway's) is looked at again when its TTL says it ends."""
    rows = await redis.zrangebyscore(keys.retire, "-inf", f"({now!r}", start=0, num=_SWEEP_BATCH)
    members = [_text(m) for m in rows]
    if not members:
        return 0
    pipe = redis.pipeline(transaction=False)
    for member in members:
        pipe.pttl(keys.record(member.split(" ", 1)[0]))
    ttls = await pipe.execute()
    pipe = redis.pipeline(transaction=False)
    retired = 0
    for member, ttl_ms in zip(members, ttls, strict=True):
        approval_id, _, capability_id = member.partition(" ")
        if int(ttl_ms) == _NO_KEY:
            pipe.zrem(keys.all, approval_id)
            pipe.zrem(keys.capability(capability_id), approval_id)
            pipe.zrem(keys.pending, approval_id)
            pipe.zrem(keys.escalate, approval_id)
            pipe.zrem(keys.retire, member)
            retired += 1
        else:
            later = now + max(int(ttl_ms), _RECHECK_MS) / 1000
            pipe.zadd(keys.retire, {member: later})
    await pipe.execute()
    return retired


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


def _stale(
    seen: dict[str, ApprovalRecord],
    pending_only: bool,
    id_of: Callable[[str], str],
    examined: Collection[str],
) -> Callable[[str], bool]:
    def wrong(member: str) -> bool:
        if id_of(member) not in examined:
            return False  # indexed after the records were loaded: a create in flight, kept
        record = seen.get(id_of(member))
        return record is None or (pending_only and record.status != Status.PENDING)

    return wrong


def _escalation_due_later(record: ApprovalRecord) -> bool:
    """A pending record the escalation sweep has still to look at."""
    return (
        record.escalate_at is not None
        and record.escalated_at is None
        and record.escalate_at < record.expires_at
    )


def _bare(member: str) -> str:
    return member


def _retired_id(member: str) -> str:
    return member.partition(" ")[0]


@dataclass(slots=True)
class _Target:
    desired: dict[str, float]
    pending_only: bool = False
    id_of: Callable[[str], str] = _bare
    end: float = 0.0  # the latest end of a record the index lists: its TTL runs to it


async def reconcile(
    redis: RedisClient,
    keys: Keys,
    load: Loader,
    *,
    extend: Script,
    retention_s: float,
    now: float,
) -> ReconcileReport:
    """Make every index equal to what the records say, with a TTL that outlives its records."""
    records = await _records(redis, keys, load)
    targets: defaultdict[str, _Target] = defaultdict(lambda: _Target({}))
    targets[keys.pending] = _Target({}, pending_only=True)
    targets[keys.all] = _Target({})
    targets[keys.retire] = _Target({}, id_of=_retired_id)
    targets[keys.escalate] = _Target({}, pending_only=True)
    for key in await _scan(redis, keys.actor_pattern):
        targets[key] = _Target({}, pending_only=True)
    for key in await _scan(redis, keys.capability_pattern):
        targets[key] = _Target({})
    for record in records:
        end = record_end(record, retention_s)
        entries = [
            (keys.all, record.id, record.created_at),
            (keys.capability(record.capability_id), record.id, record.created_at),
            (keys.retire, retire_member(record), end),
        ]
        if record.status == Status.PENDING:
            entries.append((keys.pending, record.id, record.expires_at))
            actor = keys.actor(record.requester.identity)
            if actor not in targets:
                targets[actor] = _Target({}, pending_only=True)
            entries.append((actor, record.id, record.expires_at))
            if _escalation_due_later(record):
                assert record.escalate_at is not None
                entries.append((keys.escalate, record.id, record.escalate_at))
        for index, member, score in entries:
            target = targets[index]
            target.desired[member] = score
            target.end = max(target.end, end)
    added = removed = 0
    for index, target in targets.items():
        rows = await redis.zrange(index, 0, -1)
        ids = [target.id_of(_text(m)) for m in rows if _text(m) not in target.desired]
        now_seen = await load(ids) if ids else {}
        stale = _stale(now_seen, target.pending_only, target.id_of, frozenset(ids))
        a, r = await _sync(redis, index, target.desired, stale)
        added += a
        removed += r
        if target.end > now:
            await extend(keys=[index], args=[math.ceil((target.end - now) * 1000)])
    return ReconcileReport(records=len(records), added=added, removed=removed)
