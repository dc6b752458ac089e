"""Audit sinks and the log that feeds them.

Best effort by default: `emit` puts the event into a bounded buffer (no I/O on the request
path) that one background task drains in batches to every sink, lingering `linger_s` (5 ms) so
that the events of many calls share one write (one Redis round trip); when the buffer is full
or a sink fails, the events are counted as dropped (`AuditLog.dropped`, metric
`capgate.audit.dropped{sink, reason}`) and the call goes on.

Strict mode (`audit.strict: true`, seed 001 stage 10): `emit_strict` puts the event into the
same buffer with a future and waits until the batch holding it reached every sink. Going
through the buffer keeps the order of an execution's events (`capability.requested` before
`capability.started`) and lets concurrent strict writes share one round trip (group commit).
A full buffer, a failing sink or no answer within `strict_timeout_s` raises
`AuditUnavailable`, which stage 10 turns into AUDIT_UNAVAILABLE before any upstream call.

Observers (the webhook notifier) get every batch after the sinks but keep no record: they react
to a few event names and drop the rest, `capability.started` included. A strict write never
counts them, so a log with observers and no sink refuses every strict write ("no audit record,
no execution"); the config loader refuses `audit.strict: true` with no sink before that.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Sequence
from typing import IO, Any, Protocol

import orjson

from gateway.state.connections import hot_script, raise_if_cancelling
from gateway.telemetry import metrics

log = logging.getLogger("capgate.audit")

_Item = tuple[dict[str, Any], "asyncio.Future[None] | None"]


class Sink(Protocol):
    name: str

    async def write(self, events: Sequence[dict[str, Any]]) -> None: ...


class StreamSink:
    """JSON lines to a binary stream (stdout by default) or a file opened for appending."""

    def __init__(
        self, stream: IO[bytes] | None = None, *, name: str = "stdout", owned: bool = False
    ):
        self.name = name
        self._stream = stream if stream is not None else sys.stdout.buffer
        self._owned = owned

    @classmethod
    def to_file(cls, path: str) -> StreamSink:
        """Append JSON lines to `path` (the `file` sink); `close()` closes the file."""
        return cls(open(path, "ab"), name="file", owned=True)  # closed in close()

    async def write(self, events: Sequence[dict[str, Any]]) -> None:
        self._stream.write(b"".join(orjson.dumps(e) + b"\n" for e in events))
        self._stream.flush()

    def close(self) -> None:
        if self._owned:
            self._stream.close()


# One script call per batch: a round trip costs far more client CPU than an event (redis-py
# ~200 µs per round trip and ~27 µs per pipelined XADD, a script with every event as an argument
# ~5 µs per event; measured in bench/), and the batch goes through the lane on a standalone
# Redis (ADR 0042). It touches one key, so it is Redis-Cluster safe.
_XADD_BATCH = """
for i = 2, #ARGV do
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'e', ARGV[i])
end
return #ARGV - 1
"""


class RedisStreamSink:
    """XADD to a capped Redis stream (`MAXLEN ~`), one script call per batch. Each entry has one
    field, `e`, holding the event as JSON; consumer groups read it (`capgate audit tail
    --group`) and stream ids order it in time (`capgate audit query --since`)."""

    name = "redis"

    def __init__(self, redis: Any, stream: str, maxlen: int):
        self._redis = redis
        self._stream = stream
        self._maxlen = maxlen
        self._script = hot_script(redis, _XADD_BATCH)  # the lane where there is one

    async def write(self, events: Sequence[dict[str, Any]]) -> None:
        await self._script(
            keys=[self._stream], args=[self._maxlen, *(orjson.dumps(e) for e in events)]
        )


class MemorySink:
    """Keeps events in memory: for tests and the demo's summary."""

    name = "memory"

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def write(self, events: Sequence[dict[str, Any]]) -> None:
        self.events.extend(events)


class AuditUnavailable(Exception):
    """A strict write could not be recorded (its message names the sink or the cause)."""


def _expire(done: asyncio.Future[None]) -> None:
    """A strict write's wait ran out: its caller gets AuditUnavailable."""
    if not done.done():
        done.set_exception(AuditUnavailable("timeout"))


class AuditLog:
    """Fan-out to sinks through one bounded buffer drained by a background task."""

    def __init__(
        self,
        sinks: Sequence[Sink],
        *,
        observers: Sequence[Sink] = (),
        buffer: int = 10_000,
        batch: int = 256,
        strict_timeout_s: float = 5.0,
        linger_s: float = 0.005,
    ):
        self.sinks = list(sinks)
        self.observers = list(observers)
        self.dropped = 0
        self.strict_timeout_s = strict_timeout_s
        self._queue: asyncio.Queue[_Item] = asyncio.Queue(maxsize=buffer)
        self._batch = batch
        self._linger_s = linger_s
        self._now = asyncio.Event()  # set: write without lingering (strict write, flush)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._drain(), name="audit-drain")

    def _ensure_started(self) -> None:
        if self._task is None:
            with contextlib.suppress(RuntimeError):  # no running loop: drained on flush/close
                self.start()

    def _drop(self, sink: str, reason: str, count: int) -> None:
        self.dropped += count
        metrics.audit_dropped.add((sink, reason), count)

    def emit(self, event: dict[str, Any]) -> None:
        """Best effort: never blocks, never raises; a full buffer drops (and counts) it."""
        if not self.sinks and not self.observers:
            return
        try:
            self._queue.put_nowait((event, None))
        except asyncio.QueueFull:
            self._drop("buffer", "overflow", 1)
        self._ensure_started()

    async def emit_strict(self, event: dict[str, Any]) -> None:
        """Wait until every sink holds the event; raises AuditUnavailable otherwise, also when
        there is no sink at all (observers keep no record)."""
        if not self.sinks:
            raise AuditUnavailable("no audit sink")
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        try:
            self._queue.put_nowait((event, done))
        except asyncio.QueueFull:
            self._drop("buffer", "overflow", 1)
            raise AuditUnavailable("buffer full") from None
        self._ensure_started()
        self._now.set()
        # The future itself is awaited, with a timer that fails it: not `wait_for(shield())`
        # (two more futures and their callbacks per call). The drain skips a future that is
        # done already: timed out, or cancelled with its caller.
        timer = loop.call_later(self.strict_timeout_s, _expire, done)
        try:
            await done
        finally:
            timer.cancel()

    async def _drain(self) -> None:
        queue = self._queue
        while True:
            batch = [await queue.get()]
            if self._linger_s and not self._now.is_set() and queue.qsize() < self._batch:
                # Best effort: let a few milliseconds of events share one write (one Redis
                # round trip for many calls); a strict write or a flush cuts this short.
                # A timer that sets the event, not `wait_for` (a task and a timeout per batch).
                timer = asyncio.get_running_loop().call_later(self._linger_s, self._now.set)
                await self._now.wait()
                timer.cancel()
            self._now.clear()
            while len(batch) < self._batch and not queue.empty():
                batch.append(queue.get_nowait())
            try:
                await self._write(batch)
            finally:
                for _ in batch:
                    queue.task_done()
            raise_if_cancelling()  # a sink error may have been a cancellation in disguise

    async def _write(self, batch: list[_Item]) -> None:
        events = [event for event, _ in batch]
        failed = ""
        for sink in self.sinks:
            try:
                await sink.write(events)
            except Exception as exc:  # any sink failure: count it, log the type only
                failed = sink.name
                self._drop(sink.name, "sink_error", len(events))
                log.warning(
                    "audit sink %s dropped %d events: %s",
                    sink.name,
                    len(events),
                    type(exc).__name__,
                )
            else:
                metrics.audit_written.add((sink.name,), len(events))
        for observer in self.observers:
            try:
                await observer.write(events)
            except Exception as exc:  # an observer's failure is its own: never a strict failure
                log.warning("audit observer %s failed: %s", observer.name, type(exc).__name__)
        for _, done in batch:
            if done is None or done.done():
                continue
            if failed:
                done.set_exception(AuditUnavailable(failed))
                done.exception()  # retrieved here: a timed-out waiter may never look at it
            else:
                done.set_result(None)

    async def flush(self) -> None:
        """Wait until everything emitted so far went through the sinks."""
        if self._task is None:
            try:
                self.start()
            except RuntimeError:
                return
        self._now.set()
        await self._queue.join()

    async def close(self, timeout_s: float = 5.0) -> None:
        """Drain what is buffered (bounded by `timeout_s`), stop, close file sinks."""
        if self._task is not None:
            self._now.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._queue.join(), timeout_s)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        while not self._queue.empty():
            _, done = self._queue.get_nowait()
            self._queue.task_done()
            self._drop("buffer", "shutdown", 1)
            if done is not None and not done.done():
                done.set_exception(AuditUnavailable("shutting down"))
                done.exception()
        for sink in (*self.sinks, *self.observers):
            closer = getattr(sink, "close", None)
            if callable(closer):
                result = closer()
                if asyncio.iscoroutine(result):
                    await result
