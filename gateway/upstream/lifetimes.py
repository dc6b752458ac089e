"""How long a pooled upstream resource lives (ADR 0004 §11): a gRPC channel, or an HTTP
client with its MCP session, kept per upstream name while the upstream's settings stay the same.

A reload that changes an upstream's settings *retires* its resource: new calls get a new one,
and the old one is closed as soon as no snapshot in use holds it any more. A snapshot is in use
while anything references it: the snapshot holder (the current one) and every call in flight
(`Call.snapshot`, from the call's arrival to its last recording, including the tasks that
record its outcome and run its post-failure hooks). `hold` watches a snapshot with a weak
reference; when the last reference goes, the resources it held are released, and a retired
one that no other snapshot holds is closed at once, with its own bound (a channel's grace, an
MCP session's DELETE). A resource no snapshot ever held (a reload that failed after opening it)
is closed as soon as it is retired.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from gateway.upstream.spec import Upstream

__all__ = ["Lifetimes"]

T = TypeVar("T")
log = logging.getLogger("capgate.upstream")


@dataclass(eq=False, slots=True)
class _Entry(Generic[T]):
    upstream: Upstream
    resource: T
    holders: int = 0  # snapshots in use that hold it
    retired: bool = False  # replaced by a resource for newer settings of the same upstream


class Lifetimes(Generic[T]):
    """Resources by upstream name: `get` opens one per settings, `hold` ties those of a
    snapshot to its lifetime, a retired resource nobody holds is closed by `close_retired`.

    Use it inside the event loop that uses the resources (retirements close in tasks of it)."""

    def __init__(
        self, open_: Callable[[Upstream], T], close_retired: Callable[[T], Awaitable[None]]
    ) -> None:
        self._open = open_
        self._close_retired = close_retired
        self._current: dict[str, _Entry[T]] = {}
        self._held: set[_Entry[T]] = set()  # retired, still held by some snapshot
        self._closing: set[asyncio.Task[None]] = set()

    def get(self, upstream: Upstream) -> T:
        """The resource for `upstream` (opened now if new or its settings changed)."""
        known = self._current.get(upstream.name)
        if known is not None and known.upstream == upstream:
            return known.resource
        entry = _Entry(upstream, self._open(upstream))
        self._current[upstream.name] = entry
        if known is not None:
            self._retire(known)
        return entry.resource

    def hold(self, upstreams: Mapping[str, Upstream]) -> list[_Entry[T]]:
        """Count one more holder for each current resource opened for exactly these settings
        (a snapshot built from them); give the list back to `release`."""
        held = [
            entry
            for name, upstream in upstreams.items()
            if (entry := self._current.get(name)) is not None and entry.upstream == upstream
        ]
        for entry in held:
            entry.holders += 1
        return held

    def release(self, entries: Iterable[_Entry[T]]) -> None:
        """A holder is gone: close what is retired and held by nobody else."""
        for entry in entries:
            entry.holders -= 1
            if entry.retired and entry.holders == 0 and entry in self._held:
                self._held.discard(entry)
                self._close_soon(entry.resource)

    def _retire(self, entry: _Entry[T]) -> None:
        entry.retired = True
        if entry.holders > 0:
            self._held.add(entry)  # a snapshot in use still calls through it
        else:
            self._close_soon(entry.resource)

    def _close_soon(self, resource: T) -> None:
        task = asyncio.get_running_loop().create_task(
            self._close_quietly(resource), name="close-retired-upstream"
        )
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _close_quietly(self, resource: T) -> None:
        try:
            await self._close_retired(resource)
        except Exception as exc:  # best effort: the new resource serves either way
            log.warning("closing a retired upstream resource failed: %s", type(exc).__name__)

    def __len__(self) -> int:
        return len(self._current)

    @property
    def retired_open(self) -> int:
        """Retired resources not closed yet (held by a snapshot in use, or closing now)."""
        return len(self._held) + len(self._closing)

    async def settled(self) -> None:
        """Wait until the releases already scheduled ran and the closes they started ended."""
        await asyncio.sleep(0)  # the finalizers' releases are callbacks of the loop
        while self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    async def take_all(self) -> list[T]:
        """Shutdown: wait for the closes under way, then hand every resource still open
        (current, and retired but held) to the caller to close; nothing is tracked after."""
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
        resources = [e.resource for e in self._current.values()] + [e.resource for e in self._held]
        self._current, self._held = {}, set()
        return resources


def watch(
    snapshot: object, loop: asyncio.AbstractEventLoop, release: Callable[[], None]
) -> weakref.finalize[[], object]:
    """Call `release` in `loop` once `snapshot` is gone. The finalizer may run wherever the
    last reference is dropped (inside any code, or a garbage collection), so it only schedules;
    a loop already closed means the process is ending and nothing is left to release."""

    def gone() -> None:
        try:
            loop.call_soon_threadsafe(release)
        except RuntimeError:  # the loop is closed
            return

    finalizer = weakref.finalize(snapshot, gone)
    finalizer.atexit = False  # at interpreter exit the pool's close has run, or never will
    return finalizer
