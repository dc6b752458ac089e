"""Server-to-client notifications of a handshake-era session, on `GET /mcp` (an SSE stream
that can be resumed with `Last-Event-ID`), kept in Redis so any replica serves the stream.

What is notified: an approval that a call on this session asked for and that has since been
decided (`notifications/capgate/approval_decided`, params `{approval_id, status}`). A
`tools/call` answered "approval required" adds the approval to the session's watch set
(`…:{<actor>}:w:<session id>`, at most `MAX_WATCHED`); whichever GET stream finds it decided
(polling the caller's own approvals, SI-8) moves it from the set to the session's event stream
(`…:{<actor>}:e:<session id>`, a Redis stream of at most `MAX_EVENTS` entries) in one script, so
two streams never announce it twice. Event ids are the stream's entry ids: unique within the
session, ordered, and what `Last-Event-ID` resumes after. Every key expires with the session's
idle timeout. A stream opens with a priming event (an id, `retry`, no data) and ends after
`STREAM_S` seconds or when the session is gone; the client reconnects with `Last-Event-ID`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

import orjson

from gateway.state.connections import RedisUnavailable, mapped_errors
from gateway.state.mcp_sessions import Identity, RedisSessions, SessionsUnavailable

MAX_WATCHED: Final = 32
MAX_EVENTS: Final = 64
STREAM_S: Final = 30.0
POLL_S: Final = 1.0
RETRY_MS: Final = 2000
METHOD: Final = "notifications/capgate/approval_decided"
_EVENT_ID: Final = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")

# KEYS: watch set, event stream. ARGV: approval id, message, max events, idle ms.
_ANNOUNCE: Final = """
if redis.call('SREM', KEYS[1], ARGV[1]) == 0 then return false end
local id = redis.call('XADD', KEYS[2], 'MAXLEN', ARGV[3], '*', 'm', ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return id
"""
# KEYS: watch set. ARGV: approval id, max watched, idle ms.
_WATCH: Final = """
if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""


def event_id(value: str | None) -> str | None:
    """A `Last-Event-ID` this gateway could have sent, else None (then the stream starts at
    its current end, as for a first connection)."""
    return value if value is not None and _EVENT_ID.fullmatch(value) else None


def _sse(event_id: str, data: bytes | None = None) -> bytes:
    if data is None:
        return f"id: {event_id}\nretry: {RETRY_MS}\ndata: \n\n".encode()
    return f"id: {event_id}\nevent: message\n".encode() + b"data: " + data + b"\n\n"


class SessionEvents:
    def __init__(
        self,
        redis: Any,
        sessions: RedisSessions,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        poll_s: float = POLL_S,
        stream_s: float = STREAM_S,
    ) -> None:
        self._redis = redis
        self._sessions = sessions
        self._sleep = sleep
        self._poll_s = poll_s
        self._stream_s = stream_s
        self._announce = redis.register_script(_ANNOUNCE)
        self._watch = redis.register_script(_WATCH)

    def _key(self, session_id: str, identity: Identity, kind: str) -> str:
        return self._sessions.session_key(session_id, identity, kind)

    async def watch(self, session_id: str, identity: Identity, approval_id: str) -> None:
        """Announce on this session when `approval_id` is decided (best effort: a full watch
        set or an unreachable Redis only means no notification)."""
        try:
            with mapped_errors():
                await self._watch(
                    keys=[self._key(session_id, identity, "w")],
                    args=[approval_id, MAX_WATCHED, self._sessions.idle_ms],
                )
        except RedisUnavailable:
            return

    async def stream(
        self,
        session_id: str,
        identity: Identity,
        last_event_id: str | None,
        decided: Callable[[str], Awaitable[str | None]],
    ) -> AsyncIterator[bytes]:
        """The SSE bytes of one GET: the priming event, the events after `last_event_id` (or
        none before now), then new ones as they come, until `stream_s` has passed or the
        session is gone. `decided(approval_id)`: the approval's status once it is no longer
        pending (for its requester only), else None."""
        events = self._key(session_id, identity, "e")
        watched = self._key(session_id, identity, "w")
        try:
            with mapped_errors():
                if last_event_id is None:
                    newest = await self._redis.xrevrange(events, count=1)
                    last_event_id = newest[0][0].decode() if newest else "0-0"
            yield _sse(last_event_id)
            waited = 0.0
            while True:
                with mapped_errors():
                    for raw in await self._redis.smembers(watched):
                        approval_id = raw.decode()
                        status = await decided(approval_id)
                        if status is not None:
                            note = {
                                "jsonrpc": "2.0",
                                "method": METHOD,
                                "params": {"approval_id": approval_id, "status": status},
                            }
                            await self._announce(
                                keys=[watched, events],
                                args=[
                                    approval_id,
                                    orjson.dumps(note),
                                    MAX_EVENTS,
                                    self._sessions.idle_ms,
                                ],
                            )
                    entries = await self._redis.xrange(events, min=f"({last_event_id}", max="+")
                for entry_id, fields in entries:
                    last_event_id = entry_id.decode()
                    yield _sse(last_event_id, fields[b"m"])
                if waited >= self._stream_s:
                    return
                if await self._sessions.get(session_id, identity) is None:
                    return
                await self._sleep(self._poll_s)
                waited += self._poll_s
        except (RedisUnavailable, SessionsUnavailable):
            return  # the client reconnects with Last-Event-ID
