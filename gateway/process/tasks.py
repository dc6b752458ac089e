"""Stopping background tasks without hanging on one that will not stop."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger("capgate")


async def cancel_all(tasks: list[asyncio.Task[Any]], timeout_s: float = 5.0) -> None:
    """Cancel background tasks and wait for them, bounded. A cancel that lands as an awaited
    operation completes can be absorbed (Python 3.11 `wait_for`, library code): cancel again
    until each task is done, so shutdown never hangs on one of them."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    pending = {t for t in tasks if not t.done()}
    while pending:
        for task in pending:
            task.cancel()
        left = deadline - asyncio.get_running_loop().time()
        if left <= 0:
            log.warning("%d background tasks did not stop", len(pending))
            return
        _, pending = await asyncio.wait(pending, timeout=min(left, 0.5))
    for task in tasks:
        if task.done() and not task.cancelled():
            failure = task.exception()  # retrieved here, not reported again at exit
            if failure is not None:
                log.warning("background task %s had failed: %r", task.get_name(), failure)
