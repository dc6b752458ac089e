"""Closing the audit log never hangs on its drain task, even when the cancellation lands in a
sink that turns it into an ordinary error, as redis-py does with a command in flight (it
disconnects and raises ConnectionError). Before the fix the drain counted the "failure",
went back to waiting for events, and `close()` awaited it for ever."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from gateway.audit.sinks import AuditLog


class _DisguisingSink:
    """Blocks in `write` until cancelled, then raises ConnectionError instead."""

    name = "disguising"

    def __init__(self) -> None:
        self.entered = asyncio.Event()

    async def write(self, events: Sequence[dict[str, Any]]) -> None:
        self.entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise ConnectionError("connection closed while reading") from None


async def test_close_returns_when_a_sink_absorbs_the_cancellation() -> None:
    sink = _DisguisingSink()
    log = AuditLog([sink], linger_s=0)
    log.start()
    log.emit({"event": "capability.requested"})
    await asyncio.wait_for(sink.entered.wait(), 5)
    drain = log._task
    assert drain is not None
    # The write is in flight; close() gives the queue 0.1 s, then cancels the drain. (A hung
    # close() would swallow wait_for's own cancellation: the bound is checked on the clock.)
    started = time.monotonic()
    await asyncio.wait_for(log.close(timeout_s=0.1), 10)
    assert time.monotonic() - started < 5
    assert drain.done()
    assert log.dropped == 1  # the event in flight is counted as lost, not silently gone
