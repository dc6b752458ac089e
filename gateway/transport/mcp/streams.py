"""Open `GET /mcp` notification streams of this process, bounded (docs/mcp.md).

Each stream holds a connection and polls Redis until it ends, so a client opening them in a
loop could exhaust the process. A session may hold `PER_SESSION` at once (a reconnect may
overlap the stream it replaces) and an actor `PER_ACTOR` over all its sessions; past that the
listener answers 409 (session) or 429 (actor) — the MCP transport lets a server decline a
GET stream. The counts are per process: each replica bounds its own connections.
"""

from __future__ import annotations

from collections import Counter
from typing import Final, Literal, TypeVar

PER_SESSION: Final = 2
PER_ACTOR: Final = 8

Refusal = Literal["session", "actor"]
_K = TypeVar("_K")


class StreamSlots:
    """Counts of open streams by session and by actor; `take` before, `give` after each."""

    __slots__ = ("_actors", "_per_actor", "_per_session", "_sessions")

    def __init__(self, *, per_session: int = PER_SESSION, per_actor: int = PER_ACTOR) -> None:
        self._per_session = per_session
        self._per_actor = per_actor
        self._sessions: Counter[str] = Counter()
        self._actors: Counter[tuple[str, str]] = Counter()

    def take(self, session_id: str, actor: tuple[str, str]) -> Refusal | None:
        """Hold one slot, or say which bound refuses it (nothing is held then)."""
        if self._sessions[session_id] >= self._per_session:
            return "session"
        if self._actors[actor] >= self._per_actor:
            return "actor"
        self._sessions[session_id] += 1
        self._actors[actor] += 1
        return None

    def give(self, session_id: str, actor: tuple[str, str]) -> None:
        _release(self._sessions, session_id)
        _release(self._actors, actor)

    def open(self) -> int:
        return sum(self._sessions.values())


def _release(counts: Counter[_K], key: _K) -> None:
    counts[key] -= 1
    if counts[key] <= 0:
        del counts[key]  # bounded: only keys with open streams are kept
