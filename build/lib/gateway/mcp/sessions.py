"""MCP sessions (`Mcp-Session-Id`, 2025-06-18 and 2025-11-25): the negotiated protocol version
and the actor that opened the session.

A session belongs to the (issuer, id) that initialized it (SI-3): another actor presenting the
id gets the same 404 as an unknown id, so ids cannot be probed. Sessions live in this process,
bounded in number (least recently used first out) and expired after an idle time.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

Identity = tuple[str, str]


@dataclass(slots=True)
class Session:
    id: str
    identity: Identity
    protocol_version: str
    last_seen: float


class SessionStore:
    def __init__(
        self,
        *,
        idle_timeout_s: float,
        max_sessions: int,
        clock: Callable[[], float] = time.monotonic,
        new_id: Callable[[], str] = lambda: secrets.token_urlsafe(24),
    ) -> None:
        if idle_timeout_s <= 0 or max_sessions < 1:
            raise ValueError("sessions need a positive idle timeout and room for one session")
        self._idle = idle_timeout_s
        self._max = max_sessions
        self._clock = clock
        self._new_id = new_id
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def open(self, identity: Identity, protocol_version: str) -> Session:
        session = Session(self._new_id(), identity, protocol_version, self._clock())
        self._sessions[session.id] = session
        while len(self._sessions) > self._max:
            self._sessions.popitem(last=False)
        return session

    def get(self, session_id: str, identity: Identity) -> Session | None:
        """The live session with this id opened by `identity`, else None (and no hint why)."""
        session = self._sessions.get(session_id)
        if session is None:
            return None
        now = self._clock()
        if now - session.last_seen > self._idle:
            del self._sessions[session_id]
            return None
        if session.identity != identity:
            return None
        session.last_seen = now
        self._sessions.move_to_end(session_id)
        return session

    def close(self, session_id: str, identity: Identity) -> bool:
        if self.get(session_id, identity) is None:
            return False
        del self._sessions[session_id]
        return True

    def __len__(self) -> int:
        return len(self._sessions)
