"""Paged listing of approvals over the global indexes (ListApprovals).

The index is chosen by the filters: one capability's zset, the pending zset (expiry order), or
the all-ids zset (creation order). Pages walk the index by (score, id) after an opaque cursor,
load records in one pipeline, and drop index entries whose record is gone (retention passed).
Each call examines a bounded number of ids, so a selective filter yields a short page and a
token rather than an unbounded scan.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any, Final

import orjson

from gateway.state.approvals.keys import Keys
from gateway.state.approvals.records import ApprovalRecord, Status
from gateway.state.connections import RedisClient

DEFAULT_PAGE: Final = 50
MAX_PAGE: Final = 500
_EXAMINE_FACTOR: Final = 10
_BATCH: Final = 100

Loader = Callable[[Collection[str]], Awaitable[dict[str, ApprovalRecord]]]


@dataclass(frozen=True, slots=True)
class Query:
    statuses: frozenset[Status]
    capability_id: str = ""
    requester_id: str = ""
    page_size: int = DEFAULT_PAGE
    page_token: str = ""

    def matches(self, record: ApprovalRecord) -> bool:
        return (
            record.status in self.statuses
            and (not self.capability_id or record.capability_id == self.capability_id)
            and (not self.requester_id or record.requester.id == self.requester_id)
        )


def _index(keys: Keys, query: Query) -> tuple[str, str]:
    if query.capability_id:
        return "cap", keys.capability(query.capability_id)
    if query.statuses == {Status.PENDING}:
        return "pending", keys.pending
    return "all", keys.all


def _encode(kind: str, score: float, member: str) -> str:
    return base64.urlsafe_b64encode(orjson.dumps([kind, score, member])).decode().rstrip("=")


def _decode(token: str, kind: str) -> tuple[float, str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        token_kind, score, member = orjson.loads(raw)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise ValueError("malformed page token") from exc
    if token_kind != kind or not isinstance(member, str) or not isinstance(score, int | float):
        raise ValueError("the page token belongs to other filters")
    return float(score), member


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def _anchor(redis: RedisClient, index: str, after: tuple[float, str] | None) -> int:
    """Index position just after the cursor, found again on every batch so that entries added
    or removed meanwhile (by this listing's own clean-up too) never shift what comes next."""
    if after is None:
        return 0
    score, member = after
    rank = await redis.zrank(index, member)
    if rank is not None and await redis.zscore(index, member) == score:
        return int(rank) + 1  # type: ignore[arg-type]  # WITHSCORE not asked: an int
    # The cursor's id left the index: start at its score; ties are filtered by (score, id).
    before: int = await redis.zcount(index, "-inf", f"({score!r}")
    return before


async def page(
    redis: RedisClient,
    keys: Keys,
    query: Query,
    load: Loader,
    visible: Callable[[ApprovalRecord], bool] | None,
) -> tuple[list[ApprovalRecord], str]:
    """One page of matching, visible records and the next token ("" when the index ends)."""
    kind, index = _index(keys, query)
    size = min(query.page_size, MAX_PAGE) if query.page_size > 0 else DEFAULT_PAGE
    after = _decode(query.page_token, kind) if query.page_token else None
    budget = size * _EXAMINE_FACTOR
    out: list[ApprovalRecord] = []
    examined = 0
    start = await _anchor(redis, index, after)
    while True:
        rows: Any = await redis.zrange(index, start, start + _BATCH - 1, withscores=True)
        if not rows:
            return out, ""
        batch = [(float(s), _text(m)) for m, s in rows]
        batch = [row for row in batch if after is None or row > after]
        if not batch:
            start += len(rows)  # only ties before a cursor that left the index
            continue
        records = await load([member for _, member in batch])
        gone = [member for _, member in batch if member not in records]
        if gone:
            await redis.zrem(index, *gone)  # retention passed: the record expired in Redis
        for row in batch:
            examined += 1
            after = row
            record = records.get(row[1])
            if (
                record is not None
                and query.matches(record)
                and (visible is None or visible(record))
            ):
                out.append(record)
            if len(out) >= size or examined >= budget:
                return out, _encode(kind, *row)
        start = await _anchor(redis, index, after)
