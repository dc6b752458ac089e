"""MCP sessions (`Mcp-Session-Id`, the handshake era): the negotiated protocol version and the
actor that opened the session.

A session belongs to the (issuer, id) that initialized it (SI-3): another actor presenting the
id gets the same 404 as an unknown id, so ids cannot be probed. Sessions expire after an idle
time, and each actor holds at most `per_actor` of them: opening one more ends that actor's own
least recently used session, never anyone else's.

Two stores, one interface:

- `RedisSessions` (whenever the gateway has a Redis, the embedded default included): any worker
  or replica serves any session. Keys share the actor's hash tag, so an actor's keys sit on one
  cluster slot, and the session key is derived from the presenting actor's identity: another
  actor's lookup reads a key that does not exist, exactly as for an unknown id.
- `LocalSessions` (no Redis configured at all): the same rules inside this process, plus a total
  bound; when it is full of live sessions a new one is refused, nobody's is evicted.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol

import orjson

from gateway.state.connections import RedisUnavailable, mapped_errors

Identity = tuple[str, str]

MAX_SESSIONS_PER_ACTOR: Final = 64
_ID_SHAPE: Final = re.compile(r"[A-Za-z0-9_-]{16,64}")


class SessionsUnavailable(Exception):
    """The session store cannot answer now (Redis unreachable): retryable, 503."""


class SessionsFull(Exception):
    """No room for one more session (the in-process store only): 503."""


@dataclass(slots=True)
class Session:
    id: str
    identity: Identity
    protocol_version: str
    last_seen: float


class SessionStore(Protocol):
    async def open(self, identity: Identity, protocol_version: str) -> Session: ...

    async def get(self, session_id: str, identity: Identity) -> Session | None: ...

    async def close(self, session_id: str, identity: Identity) -> bool: ...


def _new_id() -> str:
    return secrets.token_urlsafe(24)


def well_formed(session_id: str) -> bool:
    """Only ids of the shape this gateway issues are looked up (keys stay bounded)."""
    return _ID_SHAPE.fullmatch(session_id) is not None


class LocalSessions:
    def __init__(
        self,
        *,
        idle_timeout_s: float,
        max_sessions: int,
        per_actor: int = MAX_SESSIONS_PER_ACTOR,
        clock: Callable[[], float] = time.monotonic,
        new_id: Callable[[], str] = _new_id,
    ) -> None:
        if idle_timeout_s <= 0 or max_sessions < 1 or per_actor < 1:
            raise ValueError("sessions need a positive idle timeout and room for one session")
        self._idle = idle_timeout_s
        self._max = max_sessions
        self._per_actor = min(per_actor, max_sessions)
        self._clock = clock
        self._new_id = new_id
        self._sessions: OrderedDict[str, Session] = OrderedDict()  # least recently used first
        self._by_actor: dict[Identity, OrderedDict[str, None]] = {}

    def _drop(self, session_id: str) -> None:
        session = self._sessions.pop(session_id)
        own = self._by_actor[session.identity]
        del own[session_id]
        if not own:
            del self._by_actor[session.identity]

    def _expire(self, now: float) -> None:
        while self._sessions:
            oldest = next(iter(self._sessions.values()))
            if now - oldest.last_seen <= self._idle:
                return
            self._drop(oldest.id)

    async def open(self, identity: Identity, protocol_version: str) -> Session:
        now = self._clock()
        self._expire(now)
        own = self._by_actor.get(identity, OrderedDict())
        while len(own) >= self._per_actor:
            self._drop(next(iter(own)))  # this actor's own least recently used
            own = self._by_actor.get(identity, OrderedDict())
        if len(self._sessions) >= self._max:
            raise SessionsFull
        session = Session(self._new_id(), identity, protocol_version, now)
        self._sessions[session.id] = session
        self._by_actor.setdefault(identity, OrderedDict())[session.id] = None
        return session

    async def get(self, session_id: str, identity: Identity) -> Session | None:
        """The live session with this id opened by `identity`, else None (and no hint why)."""
        session = self._sessions.get(session_id)
        if session is None:
            return None
        now = self._clock()
        if now - session.last_seen > self._idle:
            self._drop(session_id)
            return None
        if session.identity != identity:
            return None
        session.last_seen = now
        self._sessions.move_to_end(session_id)
        self._by_actor[identity].move_to_end(session_id)
        return session

    async def close(self, session_id: str, identity: Identity) -> bool:
        if await self.get(session_id, identity) is None:
            return False
        self._drop(session_id)
        return True

    def __len__(self) -> int:
        return len(self._sessions)


# KEYS: session, actor index. ARGV: now ms, idle ms, per-actor cap, value, id, session key
# prefix (the actor's, ending with ':'). Expired index entries go first, then the actor's own
# least recently used sessions until there is room; returns how many were ended.
_OPEN: Final = """
local now, idle, cap = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - idle)
local ended = 0
while redis.call('ZCARD', KEYS[2]) >= cap do
  local oldest = redis.call('ZPOPMIN', KEYS[2])
  redis.call('DEL', ARGV[6] .. oldest[1])
  ended = ended + 1
end
redis.call('SET', KEYS[1], ARGV[4], 'PX', idle)
redis.call('ZADD', KEYS[2], now, ARGV[5])
redis.call('PEXPIRE', KEYS[2], idle)
return ended
"""

# KEYS: session, actor index. ARGV: now ms, idle ms, id. The value, its idle time restarted.
_GET: Final = """
local value = redis.call('GET', KEYS[1])
if not value then
  redis.call('ZREM', KEYS[2], ARGV[3])
  return false
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], 'XX', ARGV[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return value
"""

# KEYS: session, actor index. ARGV: id.
_CLOSE: Final = """
redis.call('ZREM', KEYS[2], ARGV[1])
return redis.call('DEL', KEYS[1])
"""


class RedisSessions:
    """Sessions in Redis: `<prefix>:mcp:<listener>:{<actor hash>}:s:<id>` holds the session
    (`{"iss", "sub", "v"}`, expiring after the idle time, restarted on each use) and
    `<prefix>:mcp:<listener>:{<actor hash>}:a` the actor's sessions by last use."""

    def __init__(
        self,
        redis: Any,
        *,
        prefix: str,
        listener: str,
        idle_timeout_s: float,
        per_actor: int = MAX_SESSIONS_PER_ACTOR,
        clock: Callable[[], float] = time.time,
        new_id: Callable[[], str] = _new_id,
    ) -> None:
        if idle_timeout_s <= 0 or per_actor < 1:
            raise ValueError("sessions need a positive idle timeout and room for one session")
        self._base = f"{prefix}:mcp:{listener}"
        self._idle_ms = max(int(idle_timeout_s * 1000), 1)
        self._per_actor = per_actor
        self._clock = clock
        self._new_id = new_id
        self._open = redis.register_script(_OPEN)
        self._get = redis.register_script(_GET)
        self._close = redis.register_script(_CLOSE)

    def _actor(self, identity: Identity) -> str:
        digest = hashlib.sha256(orjson.dumps(list(identity))).hexdigest()[:32]
        return f"{self._base}:{{{digest}}}"

    def _keys(self, session_id: str, identity: Identity) -> list[str]:
        actor = self._actor(identity)
        return [f"{actor}:s:{session_id}", f"{actor}:a"]

    def session_key(self, session_id: str, identity: Identity, kind: str) -> str:
        """A per-session key next to the session's own, on its slot (`kind`: one letter)."""
        return f"{self._actor(identity)}:{kind}:{session_id}"

    @property
    def idle_ms(self) -> int:
        return self._idle_ms

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    async def open(self, identity: Identity, protocol_version: str) -> Session:
        session_id = self._new_id()
        value = orjson.dumps({"iss": identity[0], "sub": identity[1], "v": protocol_version})
        args = [self._now_ms(), self._idle_ms, self._per_actor, value, session_id]
        try:
            with mapped_errors():
                await self._open(
                    keys=self._keys(session_id, identity),
                    args=[*args, f"{self._actor(identity)}:s:"],
                )
        except RedisUnavailable as exc:
            raise SessionsUnavailable from exc
        return Session(session_id, identity, protocol_version, self._clock())

    async def get(self, session_id: str, identity: Identity) -> Session | None:
        if not well_formed(session_id):
            return None
        try:
            with mapped_errors():
                raw = await self._get(
                    keys=self._keys(session_id, identity),
                    args=[self._now_ms(), self._idle_ms, session_id],
                )
        except RedisUnavailable as exc:
            raise SessionsUnavailable from exc
        if raw is None:
            return None
        stored = orjson.loads(raw)
        if (stored.get("iss"), stored.get("sub")) != identity:  # the key says so already
            return None
        return Session(session_id, identity, str(stored.get("v", "")), self._clock())

    async def close(self, session_id: str, identity: Identity) -> bool:
        if not well_formed(session_id):
            return False
        try:
            with mapped_errors():
                ended = await self._close(keys=self._keys(session_id, identity), args=[session_id])
        except RedisUnavailable as exc:
            raise SessionsUnavailable from exc
        return bool(ended)
