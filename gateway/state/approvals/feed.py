"""Readers of the approval event stream: Watch (admin) and the requester's WaitApproval.

Both block on the stream (XREAD BLOCK in chunks below the operation timeout), never poll the
records: a watcher gets each event with the record as it is now; a waiter re-reads its record
only when an event names it, or when the wait ends.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Collection

from gateway.state.approvals.events import BLOCK_CHUNK_MS, ApprovalEventRecord, EventLog, parse_id
from gateway.state.approvals.failures import available
from gateway.state.approvals.records import ApprovalRecord, Status

Loader = Callable[[Collection[str]], Awaitable[dict[str, ApprovalRecord]]]
Getter = Callable[[str], Awaitable[ApprovalRecord | None]]


async def watch(
    log: EventLog, after_event_id: str | None, load: Loader
) -> AsyncIterator[ApprovalEventRecord]:
    if after_event_id:
        parse_id(after_event_id)
        cursor = after_event_id
        with available():
            await log.check(cursor)  # answer a gap at once, not after a blocking read
    else:
        with available():
            cursor = await log.tail()
    while True:
        with available():
            raws = await log.read(cursor, block_ms=BLOCK_CHUNK_MS, checked=True)
        if not raws:
            continue
        records = await load({raw.approval_id for raw in raws})
        for raw in raws:
            yield ApprovalEventRecord(
                raw.event_id, raw.type, raw.approval_id, records.get(raw.approval_id)
            )
        cursor = raws[-1].event_id


async def wait(
    log: EventLog, approval_id: str, timeout_s: float, get: Getter, clock: Callable[[], float]
) -> ApprovalRecord | None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0.0, timeout_s)
    with available():
        cursor = await log.tail()  # taken before the read below: no decision slips between
    record = await get(approval_id)
    while record is not None and record.status == Status.PENDING:
        remaining = min(deadline - loop.time(), record.expires_at - clock())
        if remaining <= 0:
            return await get(approval_id)  # at its expiry this reads as expired
        block_ms = max(1, min(BLOCK_CHUNK_MS, math.ceil(remaining * 1000)))
        with available():
            raws = await log.read(cursor, block_ms=block_ms, checked=False)
        if raws:
            cursor = raws[-1].event_id
        if any(raw.approval_id == approval_id for raw in raws):
            record = await get(approval_id)
    return record
