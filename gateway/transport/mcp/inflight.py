"""Requests in flight on one MCP listener, so that a caller can cancel them (ADR 0039).

Two signals cancel a request, both the caller's:
- its HTTP request ends: the client closed the connection carrying it (the 2026-07-28
  revision's only cancellation signal on Streamable HTTP: "the server MUST treat a client
  disconnect as cancellation of that request");
- in the handshake era, `notifications/cancelled` naming its `requestId`, POSTed on the same
  session (the session is bound to the actor, so nobody cancels another's request). Requests are
  held per process: a notification that reaches another replica than the request finds nothing
  and is ignored, as the spec allows ("the referenced request is unknown").
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Hashable
from typing import TypeVar

from starlette.types import Receive

T = TypeVar("T")


class InFlight:
    """Tasks of requests in flight, by (session id, request id)."""

    def __init__(self) -> None:
        self._tasks: dict[Hashable, set[asyncio.Task[object]]] = {}

    def cancel(self, key: Hashable) -> int:
        """Cancel every request in flight under `key`; how many there were."""
        tasks = self._tasks.get(key, set())
        for task in tasks:
            task.cancel()
        return len(tasks)

    async def run(self, key: Hashable | None, work: Awaitable[T], receive: Receive) -> T | None:
        """`work`'s value, run in a task of its own that `cancel(key)` or a disconnect of the
        request `receive` belongs to cancels. None when the client went away (nobody reads the
        answer; `work` has ended, however it ended). A CancelledError of `work` that it did not
        turn into an answer propagates."""
        task: asyncio.Task[T] = asyncio.ensure_future(work)
        gone = asyncio.ensure_future(_disconnect(receive))
        if key is not None:
            self._tasks.setdefault(key, set()).add(task)
        try:
            await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not task.done():  # the client went away: a disconnect is a cancellation
                task.cancel()
                await asyncio.wait({task})
                return None
            return task.result()
        finally:
            gone.cancel()
            if key is not None:
                self._forget(key, task)
            if not task.done():  # this request was cancelled itself (a server stop)
                task.cancel()

    def _forget(self, key: Hashable, task: asyncio.Task[object]) -> None:
        tasks = self._tasks.get(key)
        if tasks is not None:
            tasks.discard(task)
            if not tasks:
                del self._tasks[key]


async def _disconnect(receive: Receive) -> None:
    """Returns once the client has closed the request's connection (the body was read)."""
    while (await receive())["type"] != "http.disconnect":
        continue
