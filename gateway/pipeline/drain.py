"""Calls in flight during a shutdown: each gets an envelope before the grace period ends.

grpc.aio aborts the RPCs still running when `server.stop(grace)` runs out; their callers see
UNAVAILABLE, which gRPC clients treat as safe to retry although the upstream may have run.
`Drain` keeps the tasks running a pipeline (Invoke, Resume, over gRPC and MCP). At the end of
the grace period less a margin it cancels those still running; the pipeline runner recognises
the cancellation as a drain (`claimed`) and answers with a cancelled envelope that says whether
the upstream may have started, with the terminal audit event (seed 001: invoke never throws).

Long polls and streams that only wait (WaitApproval, WatchApprovals) end as soon as a shutdown
begins (`closing`): a WaitApproval answers the approval's current state, a watch stream ends
with status OK. Neither is left for grpc.aio to abort with UNAVAILABLE at the end of the grace
(ADR 0019); their clients wait or watch again, on another replica.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from types import TracebackType
from typing import Any, TypeVar

_T = TypeVar("_T")

# Time kept at the end of the grace period to build, record and send the cancelled envelopes:
# at most this much, and at most half the grace period.
MARGIN_S = 1.0


def answer_at(grace_s: float) -> float:
    """Seconds into the grace period at which calls still running are cancelled."""
    return max(grace_s - min(MARGIN_S, grace_s / 2), 0.0)


class Drain:
    """The pipeline tasks of one gateway, and which of them a shutdown cancelled."""

    def __init__(self) -> None:
        self._running: set[asyncio.Task[Any]] = set()
        self._settling: set[asyncio.Future[Any]] = set()
        self._cancelled: set[asyncio.Task[Any]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._closing = asyncio.Event()

    @property
    def running(self) -> int:
        return len(self._running)

    def track(self) -> _Tracked:
        """`with drain.track():` the current task runs stages inside; a drain may cancel it
        there. A class, not a generator context manager: it is entered on every call."""
        return _Tracked(self)

    def keep(self, task: asyncio.Future[_T]) -> asyncio.Future[_T]:
        """A task that records a finished call's outcome (the runner's settlement, the stages
        after the upstream answered): a shutdown waits for it (`settled`) before it closes the
        audit log and Redis, so no terminal event or record is dropped."""
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)
        return task

    async def settled(self, timeout_s: float) -> int:
        """Wait, at most `timeout_s`, for every kept task; how many were still running."""
        pending = {task for task in self._settling if not task.done()}
        if not pending:
            return 0
        _, left = await asyncio.wait(pending, timeout=timeout_s)
        return len(left)

    def claimed(self) -> bool:
        """True once, in the task a drain cancelled: its cancellation is answered, not raised.
        The task's cancel request is withdrawn, so what it awaits next (recording the outcome)
        runs normally."""
        task = asyncio.current_task()
        if task is None or task not in self._cancelled:
            return False
        self._cancelled.discard(task)
        task.uncancel()
        return True

    @property
    def closing(self) -> bool:
        """Whether a shutdown began: long polls and watch streams end."""
        return self._closing.is_set()

    def close(self) -> None:
        """A shutdown begins: every `or_closing` wait returns None, every `until_closing`
        stream ends."""
        self._closing.set()

    async def or_closing(self, waiting: Awaitable[_T]) -> _T | None:
        """`waiting`'s result, or None (it is cancelled) once a shutdown begins."""
        task = asyncio.ensure_future(waiting)
        if self._closing.is_set():
            task.cancel()
        else:
            closing = asyncio.ensure_future(self._closing.wait())
            try:
                await asyncio.wait({task, closing}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                closing.cancel()
                if not task.done():
                    task.cancel()
        if task.cancelled() or not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await task
            return None
        return task.result()

    async def until_closing(self, source: AsyncIterator[_T]) -> AsyncIterator[_T]:
        """`source`'s items until it ends or a shutdown begins, then the stream ends (an RPC
        ends with status OK). Errors of `source` pass through."""
        try:
            while not self._closing.is_set():
                item = await self.or_closing(_next(source))
                if item is None:
                    return
                yield item[0]
        finally:
            aclose = getattr(source, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()

    async def answer(self, grace_s: float) -> int:
        """End the long polls and watch streams (`close`), wait for the calls in flight until
        `answer_at(grace_s)`, then cancel those still running and wait (bounded by the margin)
        until they answered. Returns how many were cancelled."""
        self.close()
        loop = asyncio.get_running_loop()
        start = loop.time()  # the grace period is real time: grpc.aio's stop counts it so
        wait_s = answer_at(grace_s)
        while self._running:
            left = start + wait_s - loop.time()
            if left <= 0:
                break
            # Timeout as a context, not wait_for: nothing here may absorb a cancellation.
            try:
                async with asyncio.timeout(left):
                    await self._idle.wait()
            except TimeoutError:
                break
        victims = self.cancel_running()
        if victims:
            await asyncio.wait(victims, timeout=max(grace_s - wait_s, 0.05))
        return len(victims)

    def cancel_running(self) -> list[asyncio.Task[Any]]:
        """Cancel every call running stages now; each answers with a cancelled envelope."""
        victims = [task for task in self._running if not task.done()]
        for task in victims:
            self._cancelled.add(task)
            task.cancel()
        return victims


async def _next(source: AsyncIterator[_T]) -> tuple[_T] | None:
    """The next item in a 1-tuple (so that any value, None too, is told from the end)."""
    try:
        return (await anext(source),)
    except StopAsyncIteration:
        return None


class _Tracked:
    __slots__ = ("_drain", "_task")

    def __init__(self, drain: Drain) -> None:
        self._drain = drain
        self._task: asyncio.Task[Any] | None = None

    def __enter__(self) -> None:
        task = asyncio.current_task()
        if task is None:  # pragma: no cover - pipelines always run in a task
            return
        self._task = task
        self._drain._running.add(task)
        self._drain._idle.clear()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        task, drain = self._task, self._drain
        if task is None:  # pragma: no cover
            return
        drain._running.discard(task)
        if not drain._running:
            drain._idle.set()
        if task not in drain._cancelled or isinstance(exc, asyncio.CancelledError):
            return  # not the drain's, or its cancellation as such: the runner claims it
        if exc is None:  # finished although cancelled: its own answer stands
            drain._cancelled.discard(task)
            task.uncancel()
            return
        if isinstance(exc, Exception):
            # A library absorbed the drain's cancellation (redis-py turns one inside a command
            # into a connection error): it is still the drain's, answered as such.
            raise asyncio.CancelledError from exc
