"""Server-side sign-in sessions of the inbox, in Redis.

The cookie holds only a random session id (256 bits); Redis holds the record under the id's
SHA-256, so neither a Redis dump nor a log of keys reveals a live cookie. A record names the
human — (issuer, id) and kind — where its roles come from, when it was created and last seen,
when it ends (the earlier of the absolute lifetime and the signing-in credential's `exp`) and
its CSRF token. It ends at once on sign-out, after `idle_s` without a request, at its end time,
or when the human's newer sign-ins push it out (at most `max_per_actor` sessions per human).

Roles are never frozen into a session: each request reads them from the human's *actor
record*, which holds the roles of the newest credential that human signed in with. Signing in
again with a credential carrying fewer roles takes them away from every open session of that
human on its next request. Expiry is judged with the injected clock; the Redis TTLs only bound
storage (each key expires no later than the record it serves).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import orjson
from redis.exceptions import RedisError

from gateway.model import Actor
from gateway.state.connections import RedisClient

MAX_SID_CHARS: Final = 100
ROLES_SOURCE: Final = "sign-in token"  # where a session's roles come from (the actor record)


class SessionsUnavailable(Exception):
    """Redis did not answer: nobody can be signed in by cookie until it does."""


@dataclass(frozen=True, slots=True)
class Session:
    sid: str
    actor: Actor  # with the roles of the human's newest credential
    csrf: str
    created: float
    last_seen: float
    expires_at: float


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class SessionStore:
    def __init__(
        self,
        redis: RedisClient,
        *,
        prefix: str,
        idle_s: float,
        lifetime_s: float,
        max_per_actor: int,
        clock: Callable[[], float] = time.time,
        token: Callable[[], str] = lambda: secrets.token_urlsafe(32),
    ) -> None:
        self._redis = redis
        self._prefix = f"{prefix}:inbox"
        self._idle_s = idle_s
        self._lifetime_s = lifetime_s
        self._max = max_per_actor
        self._clock = clock
        self._token = token

    # -- keys ------------------------------------------------------------------------------

    def _session_key(self, sid: str) -> str:
        return f"{self._prefix}:session:{_digest(sid)}"

    def _actor_key(self, issuer: str, actor_id: str) -> str:
        return f"{self._prefix}:actor:{_digest(issuer + chr(0) + actor_id)}"

    def _sessions_key(self, issuer: str, actor_id: str) -> str:
        return f"{self._prefix}:actor-sessions:{_digest(issuer + chr(0) + actor_id)}"

    # -- the operations --------------------------------------------------------------------

    async def create(self, actor: Actor, *, not_after: float) -> Session:
        """A new session for `actor` (just verified), ending by `not_after` at the latest;
        `actor.roles` become the roles of every open session of this human."""
        now = self._clock()
        expires = min(not_after, now + self._lifetime_s)
        sid, csrf = self._token(), self._token()
        record = {
            "iss": actor.issuer,
            "sub": actor.id,
            "kind": actor.kind,
            "roles_source": ROLES_SOURCE,
            "created": now,
            "last_seen": now,
            "expires": expires,
            "csrf": csrf,
        }
        key = self._session_key(sid)
        actor_key = self._actor_key(actor.issuer, actor.id)
        sessions_key = self._sessions_key(actor.issuer, actor.id)
        # The actor record and index live as long as the longest session they could serve.
        keep = _ttl(self._lifetime_s)
        try:
            await self._redis.set(
                key, orjson.dumps(record), ex=_ttl(min(self._idle_s, expires - now))
            )
            await self._redis.set(
                actor_key,
                orjson.dumps({"roles": list(actor.roles), "updated": now}),
                ex=keep,
            )
            await self._redis.zadd(sessions_key, {key: now})
            await self._redis.expire(sessions_key, keep)
            await self._redis.zremrangebyscore(sessions_key, "-inf", now - self._lifetime_s)
            count = int(await self._redis.zcard(sessions_key))
            if count > self._max:
                found = await self._redis.zrange(sessions_key, 0, count - self._max - 1)
                oldest = [k.decode() if isinstance(k, bytes) else str(k) for k in found]
                for old in oldest:
                    await self._redis.delete(old)
                await self._redis.zrem(sessions_key, *oldest)
        except RedisError as exc:
            raise SessionsUnavailable(str(type(exc).__name__)) from None
        return Session(sid, actor, csrf, now, now, expires)

    async def read(self, sid: str, *, touch: bool = True) -> Session | None:
        """The open session of a cookie value (its last-seen time renewed unless `touch` is
        false), or None when there is none: signed out, pushed out, idle too long, past its
        end, or never issued."""
        if not sid or len(sid) > MAX_SID_CHARS:
            return None
        key = self._session_key(sid)
        now = self._clock()
        try:
            raw = await self._redis.get(key)
            if raw is None:
                return None
            record: dict[str, Any] = orjson.loads(raw)
            if now >= record["expires"] or now - record["last_seen"] >= self._idle_s:
                await self._drop(key, record)
                return None
            roles_raw = await self._redis.get(self._actor_key(record["iss"], record["sub"]))
            if roles_raw is None:  # the human's role record ended: sign in again
                await self._drop(key, record)
                return None
            roles = tuple(orjson.loads(roles_raw)["roles"])
            if touch:
                record["last_seen"] = now
                ttl = _ttl(min(self._idle_s, record["expires"] - now))
                await self._redis.set(key, orjson.dumps(record), ex=ttl, xx=True)
        except RedisError as exc:
            raise SessionsUnavailable(str(type(exc).__name__)) from None
        actor = Actor(
            id=record["sub"],
            kind=record["kind"],
            issuer=record["iss"],
            roles=roles,
            attributes=types.MappingProxyType({}),
        )
        return Session(
            sid, actor, record["csrf"], record["created"], record["last_seen"], record["expires"]
        )

    async def delete(self, sid: str) -> None:
        """Sign-out: the session ends now (unknown ids are ignored)."""
        if not sid or len(sid) > MAX_SID_CHARS:
            return
        key = self._session_key(sid)
        try:
            raw = await self._redis.get(key)
            if raw is not None:
                await self._drop(key, orjson.loads(raw))
        except RedisError as exc:
            raise SessionsUnavailable(str(type(exc).__name__)) from None

    async def _drop(self, key: str, record: dict[str, Any]) -> None:
        await self._redis.delete(key)
        await self._redis.zrem(self._sessions_key(record["iss"], record["sub"]), key)


def csrf_matches(session: Session, token: str) -> bool:
    """The form's token is this session's (constant-time)."""
    return bool(token) and hmac.compare_digest(token.encode(), session.csrf.encode())


def _ttl(seconds: float) -> int:
    return max(1, math.ceil(seconds))
