"""Audit sinks. Best effort by default: events go into a bounded buffer drained in the
background in batches (no I/O on the request path), with a drop counter when it overflows.
Strict mode awaits the write of `capability.started` and fails the call when it cannot be
written (AUDIT_UNAVAILABLE)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Sequence
from typing import IO, Any, Protocol

import orjson

log = logging.getLogger("capgate.audit")


class Sink(Protocol):
    name: str

    async def write(self, events: Sequence[dict[str, Any]]) -> None: ...


class StreamSink:
    """JSON lines to a text stream (stdout by default) or a file."""

    def __init__(self, stream: IO[bytes] | None = None, *, name: str = "stdout"):
        self.name = name
        self._stream = stream if stream is not None else sys.stdout.buffer

    async def write(self, events: Sequence[dict[str, Any]]) -> None:
        self._stream.write(b"".join(orjson.dumps(e) + b"\n" for e in events))
        self._stream.flush()


class RedisStreamSink:
    """XADD to a capped Redis stream (consumer groups can read it), pipelined per batch."""

    name = "redis"

    def __init__(self, redis: Any, stream: str, maxlen: int):
        self._redis = redis
        self._stream = stream
        self._maxlen = maxlen

    async def write(self, events: Sequence[dict[str, Any]]) -> None:
        pipe = self._redis.pipeline(transaction=False)
        for e in events:
            pipe.xadd(self._stream, {"e": orjson.dumps(e)}, maxlen=self._maxlen, approximate=True)
        await pipe.execute()


class MemorySink:
    """Keeps events in memory: for tests and the demo's summary."""

    name = "memory"

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def write(self, events: Sequence[dict[str, Any]]) -> None:
        self.events.extend(events)


class AuditUnavailable(Exception):
    """A strict write failed."""


class AuditLog:
    """Fan-out to sinks through one bounded buffer drained by a background task."""

    def __init__(self, sinks: Sequence[Sink], *, buffer: int = 10_000, batch: int = 256):
        self.sinks = list(sinks)
        self.dropped = 0
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=buffer)
        self._batch = batch
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._drain(), name="audit-drain")

    def emit(self, event: dict[str, Any]) -> None:
        if not self.sinks:
            return
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1
        if self._task is None:
            with contextlib.suppress(RuntimeError):
                self.start()

    async def emit_strict(self, event: dict[str, Any]) -> None:
        """Write now to every sink; raises AuditUnavailable when any sink fails."""
        for sink in self.sinks:
            try:
                await sink.write([event])
            except Exception as exc:  # noqa: BLE001 - any sink failure means "not recorded"
                log.warning("strict audit write to %s failed: %s", sink.name, type(exc).__name__)
                raise AuditUnavailable(sink.name) from None

    async def _drain(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while len(batch) < self._batch and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            await self._write(batch)

    async def _write(self, batch: list[dict[str, Any]]) -> None:
        for sink in self.sinks:
            try:
                await sink.write(batch)
            except Exception as exc:  # noqa: BLE001 - best effort: count, log the type only
                self.dropped += len(batch)
                log.warning("audit sink %s dropped %d events: %s", sink.name, len(batch), type(exc).__name__)

    async def flush(self) -> None:
        batch: list[dict[str, Any]] = []
        while not self._queue.empty():
            batch.append(self._queue.get_nowait())
        if batch:
            await self._write(batch)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.flush()
