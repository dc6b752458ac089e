"""The approval event stream: published after each transition, read by Watch and WaitApproval.

A capped Redis stream (`XADD MAXLEN ~`) that expires one retention after its newest event.
Readers resume from an event id; when events after that id may have been trimmed — or the id
is newer than anything the stream holds, as after a failover that lost writes, or the stream
expired — `WatchGap` tells the client to re-list (DESIGN §12: OUT_OF_RANGE).
Blocking reads are chunked below the client's operation timeout so a quiet stream never looks
like a dead Redis.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from redis.exceptions import ResponseError

from gateway.state.approvals.records import ApprovalRecord
from gateway.state.connections import RedisClient, RedisPipeline

BLOCK_CHUNK_MS: Final = 1000  # < the 2 s operation timeout of gateway.state.connections
_BATCH: Final = 100
_STREAM_ID = re.compile(r"(\d{1,20})-(\d{1,20})")

EventId = tuple[int, int]


class WatchGap(Exception):
    """Events after the given id are no longer (or not yet) in the stream: re-list."""


@dataclass(frozen=True, slots=True)
class ApprovalEventRecord:
    """One event; `record` is the record as it is now (None once its retention has passed)."""

    event_id: str
    type: str  # requested, voted, edited, escalated, approved, rejected, expired, consumed,
    # released, executed
    approval_id: str
    record: ApprovalRecord | None


@dataclass(frozen=True, slots=True)
class RawEvent:
    event_id: str
    type: str
    approval_id: str


def parse_id(text: str) -> EventId:
    """`"1700000000000-3"` -> (1700000000000, 3); a bare `"0"` is accepted as `0-0`."""
    if text == "0":
        return (0, 0)
    match = _STREAM_ID.fullmatch(text)
    if match is None:
        raise ValueError("event ids look like <milliseconds>-<sequence>")
    return (int(match.group(1)), int(match.group(2)))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _gap(info: Any, cursor: EventId, maxlen: int) -> bool:
    """True when events after `cursor` may be missing (conservative at the trim edge).

    A cursor other than "0-0" older than the oldest entry is always a gap: either the entries
    after it were trimmed, or the stream expired and a later event created it anew (XINFO's
    `first-entry`, on every supported version). For "0-0", Redis 7.0+ and Valkey count every
    entry ever added (`entries-added`): equal to the length, nothing was ever trimmed. Redis
    6.2 has no such count, so there "0-0" is a gap unless the stream is shorter than `maxlen`:
    `XADD MAXLEN ~ n` never trims a stream below n entries.
    """
    if isinstance(info, ResponseError) or not info:  # no stream at all
        return cursor > (0, 0)
    last = parse_id(_text(info["last-generated-id"]))
    if cursor > last:
        return True  # an id this stream never issued: it lost writes (failover, restore)
    first = info.get("first-entry")
    if cursor > (0, 0) and first and cursor < parse_id(_text(first[0])):
        # Older than anything held: trimmed, or the stream expired and was created anew by a
        # later event (its count of entries added starts again, so it cannot tell).
        return True
    length = int(info["length"])
    added = info.get("entries-added")
    if added is not None and int(added) <= length:
        return False  # nothing was ever trimmed
    if added is None and cursor == (0, 0) and length < maxlen:
        return False  # Redis 6.2: never trimmed by XADD
    if not first:
        return cursor < last
    # Trimming removes the oldest entries. A cursor before the oldest survivor may have missed
    # some; when the cursor is exactly the last trimmed entry this answers a gap that is not
    # one, and the client re-lists — the safe direction.
    return cursor < parse_id(_text(first[0]))


class EventLog:
    """Publish to and read from the approval event stream."""

    __slots__ = ("_key", "_maxlen", "_redis", "_ttl_ms")

    def __init__(self, redis: RedisClient, key: str, maxlen: int, *, ttl_ms: int = 0) -> None:
        self._redis = redis
        self._key = key
        self._maxlen = maxlen
        self._ttl_ms = ttl_ms  # > 0: the stream expires this long after its newest event

    def queue(self, pipe: RedisPipeline, event_type: str, approval_id: str) -> None:
        """Add the event to `pipe` (sent with the index updates of the same transition)."""
        pipe.xadd(
            self._key,
            {"type": event_type, "id": approval_id},
            maxlen=self._maxlen,
            approximate=True,
        )
        if self._ttl_ms > 0:
            pipe.pexpire(self._key, self._ttl_ms)

    async def tail(self) -> str:
        """The newest event id, or "0-0" for an empty stream (the start of "only new events")."""
        rows = await self._redis.xrevrange(self._key, count=1)
        return _text(rows[0][0]) if rows else "0-0"

    async def check(self, after: str) -> None:
        """Raise WatchGap when events after `after` may be missing (before any blocking read)."""
        try:
            info: Any = await self._redis.xinfo_stream(self._key)
        except ResponseError as exc:
            info = exc  # no stream yet
        if _gap(info, parse_id(after), self._maxlen):
            raise WatchGap(after)

    async def read(self, after: str, *, block_ms: int, checked: bool) -> list[RawEvent]:
        """Events after `after`, waiting up to `block_ms`; `checked` raises WatchGap first."""
        if not checked:
            reply = await self._redis.xread({self._key: after}, count=_BATCH, block=block_ms)
            return _rows(reply)
        pipe = self._redis.pipeline(transaction=False)
        pipe.xinfo_stream(self._key)
        pipe.xread({self._key: after}, count=_BATCH, block=block_ms)
        info, reply = await pipe.execute(raise_on_error=False)
        if isinstance(reply, BaseException):
            raise reply
        # The gap check sees the stream just before the read: anything trimmed past the cursor
        # by then is reported; later trims only remove entries older than those being read.
        if _gap(info, parse_id(after), self._maxlen):
            raise WatchGap(after)
        return _rows(reply)


def _rows(reply: Any) -> list[RawEvent]:
    out: list[RawEvent] = []
    for _stream, entries in reply or ():
        for event_id, fields in entries:
            if not fields:
                continue
            out.append(RawEvent(_text(event_id), _text(fields[b"type"]), _text(fields[b"id"])))
    return out
