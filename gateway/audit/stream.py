"""Reading the audit stream in Redis (the `redis` sink): filtered range queries and tails.

Entries hold one field, `e`, with the event as JSON (`RedisStreamSink`). Stream ids are the
milliseconds at which the entry was written, a little after the event's own `time` (events
are written in background batches), so a time range is first narrowed by id — with
`WRITE_SLACK_MS` of margin at the upper end — and then checked exactly against `time`.

Tailing with a consumer group (`XREADGROUP`) delivers each entry to one consumer of the
group and re-delivers a consumer's unacknowledged entries when it comes back (at least once).
Entries are acknowledged once printed, and also when a filter skipped them: the filter is
this consumer's view, the group has still consumed them.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import orjson
from redis.exceptions import ResponseError

PAGE: Final = 500
BLOCK_MS: Final = 1000  # below the 2 s operation timeout of gateway.state.connections
WRITE_SLACK_MS: Final = 60_000


@dataclass(frozen=True, slots=True)
class Filter:
    """Which events to show; empty fields match everything. Times are epoch seconds."""

    execution_id: str = ""
    capability: str = ""
    actor: str = ""  # actor_id or requester_id
    approval_id: str = ""
    event: str = ""
    since: float | None = None
    until: float | None = None

    def matches(self, event: dict[str, Any]) -> bool:
        if self.execution_id and event.get("execution_id") != self.execution_id:
            return False
        if self.capability and event.get("capability_id") != self.capability:
            return False
        if self.actor and self.actor not in (event.get("actor_id"), event.get("requester_id")):
            return False
        if self.approval_id and event.get("approval_id") != self.approval_id:
            return False
        if self.event and event.get("event") != self.event:
            return False
        if self.since is not None or self.until is not None:
            at = event_time(event)
            if at is None:
                return False
            if self.since is not None and at < self.since:
                return False
            if self.until is not None and at > self.until:
                return False
        return True


def event_time(event: dict[str, Any]) -> float | None:
    raw = event.get("time")
    if not isinstance(raw, str):
        return None
    try:
        return datetime.fromisoformat(raw).timestamp()
    except ValueError:
        return None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def decode(fields: Any) -> dict[str, Any] | None:
    raw = fields.get(b"e", fields.get("e")) if isinstance(fields, dict) else None
    if raw is None:
        return None
    try:
        event = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return event if isinstance(event, dict) else None


async def query(redis: Any, stream: str, flt: Filter) -> AsyncGenerator[dict[str, Any], None]:
    """Matching events, oldest first."""
    low = "-" if flt.since is None else str(int(flt.since * 1000))
    high = "+" if flt.until is None else str(int(flt.until * 1000) + WRITE_SLACK_MS)
    while True:
        rows = await redis.xrange(stream, min=low, max=high, count=PAGE)
        for _entry_id, fields in rows:
            event = decode(fields)
            if event is not None and flt.matches(event):
                yield event
        if len(rows) < PAGE:
            return
        low = "(" + _text(rows[-1][0])


async def ensure_group(redis: Any, stream: str, group: str, start: str) -> None:
    """Create the consumer group at `start` ("$": new entries only) unless it exists."""
    try:
        await redis.xgroup_create(stream, group, id=start, mkstream=True)
    except ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


async def tail(
    redis: Any,
    stream: str,
    flt: Filter,
    *,
    group: str = "",
    consumer: str = "",
    idle_timeout_s: float | None = None,
) -> AsyncGenerator[dict[str, Any], None]:
    """Matching events as they are written, forever or until `idle_timeout_s` passes with
    nothing new. Without a group it starts at the end of the stream, or at `flt.since`."""
    start = "$" if flt.since is None else str(int(flt.since * 1000))
    if group:
        await ensure_group(redis, stream, group, start)
    cursor = start if not group else "0"  # a group consumer first re-reads its pending entries
    last_seen = time.monotonic()
    while True:
        if group:
            reply = await redis.xreadgroup(
                group,
                consumer,
                {stream: cursor},
                count=PAGE,
                block=None if cursor == "0" else BLOCK_MS,
            )
        else:
            reply = await redis.xread({stream: cursor}, count=PAGE, block=BLOCK_MS)
        rows = [row for _key, entries in reply or () for row in entries]
        if not rows:
            if group and cursor == "0":
                cursor = ">"  # pending entries done: new ones from here
                continue
            if idle_timeout_s is not None and time.monotonic() - last_seen >= idle_timeout_s:
                return
            continue
        last_seen = time.monotonic()
        for entry_id, fields in rows:
            event = decode(fields) if fields else None
            try:
                if event is not None and flt.matches(event):
                    yield event
            finally:
                if group:  # also when the reader stops right after this entry
                    await redis.xack(stream, group, entry_id)
        if not group or cursor != ">":
            cursor = _text(rows[-1][0])
