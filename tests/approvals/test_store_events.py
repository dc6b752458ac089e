"""The event stream: resumable watch, gaps answered as such, the requester's long-poll."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from approvalkit import ALICE, BOB, FakeClock, new_record

from gateway.state.approvals import ApprovalEventRecord, RedisApprovalStore, Status, WatchGap
from gateway.state.approvals.events import EventLog

pytestmark = pytest.mark.integration


async def _take(stream: AsyncIterator[ApprovalEventRecord], n: int) -> list[ApprovalEventRecord]:
    out: list[ApprovalEventRecord] = []
    async with asyncio.timeout(10):
        async for event in stream:
            out.append(event)
            if len(out) == n:
                break
    return out


async def _decide(store: RedisApprovalStore, approval_id: str, input_hash: str) -> None:
    await store.decide(
        approval_id, approve=True, approver=BOB, via=None, note="", input_hash=input_hash
    )


async def test_a_watch_resumed_from_an_event_id_loses_no_event(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    stream = store.watch()
    first_task = asyncio.create_task(_take(stream, 2))
    await asyncio.sleep(0.05)  # let the watch take its starting position
    a = await store.create(new_record(clock))
    await _decide(store, a.id, a.input_hash)
    first = await first_task
    await stream.aclose()  # the client disconnects
    assert [(e.type, e.approval_id) for e in first] == [("requested", a.id), ("approved", a.id)]
    assert first[1].record is not None
    assert first[1].record.status is Status.APPROVED

    # Events that happen while nobody watches...
    b = await store.create(new_record(clock))
    await store.consume(a.id, requester=ALICE, surface="agent", execution_id="e1")
    await _decide(store, b.id, b.input_hash)
    # ...are all delivered after reconnecting from the last id seen, in order.
    resumed = await _take(store.watch(first[-1].event_id), 3)
    assert [(e.type, e.approval_id) for e in resumed] == [
        ("requested", b.id),
        ("consumed", a.id),
        ("approved", b.id),
    ]
    ids = [e.event_id for e in first + resumed]
    assert ids == sorted(ids, key=lambda i: tuple(map(int, i.split("-"))))


async def test_watching_from_a_trimmed_id_is_a_gap(
    store: RedisApprovalStore, clock: FakeClock, redis_client: aioredis.Redis
) -> None:
    records = [await store.create(new_record(clock)) for _ in range(4)]
    rows = await redis_client.xrange(store.keys.events)
    oldest = rows[0][0].decode()
    await redis_client.xtrim(store.keys.events, maxlen=2, approximate=False)
    with pytest.raises(WatchGap):
        await _take(store.watch(oldest), 1)
    # From an id still held, the rest arrives.
    held = rows[2][0].decode()
    rest = await _take(store.watch(held), 1)
    assert [e.approval_id for e in rest] == [records[3].id]


async def test_an_id_the_stream_never_issued_is_a_gap(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    await store.create(new_record(clock))
    future = f"{int(time.time() * 1000) + 3_600_000}-0"
    with pytest.raises(WatchGap):
        await _take(store.watch(future), 1)


async def test_an_id_on_a_stream_that_does_not_exist_is_a_gap(store: RedisApprovalStore) -> None:
    with pytest.raises(WatchGap):
        await _take(store.watch("1700000000000-0"), 1)


async def test_a_malformed_event_id_is_refused(store: RedisApprovalStore) -> None:
    with pytest.raises(ValueError):
        await _take(store.watch("yesterday"), 1)


async def test_wait_returns_as_soon_as_the_approval_is_decided(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    record = await store.create(new_record(clock))
    waiter = asyncio.create_task(store.wait(record.id, timeout_s=20))
    await asyncio.sleep(0.05)
    assert not waiter.done()
    await store.create(new_record(clock))  # another approval's event does not end the wait
    await asyncio.sleep(0.05)
    assert not waiter.done()
    started = time.monotonic()
    await _decide(store, record.id, record.input_hash)
    decided = await asyncio.wait_for(waiter, 5)
    assert decided is not None
    assert decided.status is Status.APPROVED
    assert time.monotonic() - started < 1.0


async def test_wait_ends_at_its_timeout_with_the_pending_record(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    record = await store.create(new_record(clock))
    started = time.monotonic()
    still = await store.wait(record.id, timeout_s=0.2)
    assert still is not None
    assert still.status is Status.PENDING
    assert 0.15 < time.monotonic() - started < 1.5


async def test_wait_on_an_unknown_approval_answers_none(store: RedisApprovalStore) -> None:
    assert await store.wait("unknown", timeout_s=5) is None


async def test_a_watch_from_the_start_is_a_gap_only_once_xadd_trimmed(
    redis_client: aioredis.Redis,
) -> None:
    # Redis 6.2 has no `entries-added`: there the trim is inferred from the length (issue 15).
    short = EventLog(redis_client, "t:{short}", maxlen=1000)
    trimmed = EventLog(redis_client, "t:{trimmed}", maxlen=3)
    pipe = redis_client.pipeline(transaction=False)
    for i in range(5):
        short.queue(pipe, "requested", f"a{i}")
    for i in range(300):  # more than one stream node (100 entries): MAXLEN ~ trims whole nodes
        trimmed.queue(pipe, "requested", f"b{i}")
    await pipe.execute()
    await short.check("0")  # never trimmed: every event since the start is there
    assert len(await short.read("0", block_ms=0, checked=True)) == 5
    assert 3 <= await redis_client.xlen("t:{trimmed}") < 300
    with pytest.raises(WatchGap):
        await trimmed.check("0")
    with pytest.raises(WatchGap):
        await trimmed.read("0", block_ms=0, checked=True)
    await trimmed.check(await trimmed.tail())  # an id still held is no gap


async def test_a_cursor_from_a_stream_that_expired_and_was_recreated_is_a_gap(
    redis_client: aioredis.Redis,
) -> None:
    # The stream expires one retention after its newest event (here 100 ms); the next event
    # creates it anew, and its count of entries added starts again at 1 (review, issue P3).
    log = EventLog(redis_client, "t:{expiring}", maxlen=1000, ttl_ms=100)
    pipe = redis_client.pipeline(transaction=False)
    log.queue(pipe, "requested", "a1")
    await pipe.execute()
    cursor = await log.tail()  # the reader has seen `requested a1`
    pipe = redis_client.pipeline(transaction=False)
    log.queue(pipe, "approved", "a1")  # the reader never sees this one...
    await pipe.execute()
    for _ in range(200):  # expired within 10 s
        if not await redis_client.exists("t:{expiring}"):
            break
        await asyncio.sleep(0.05)
    assert not await redis_client.exists("t:{expiring}")
    pipe = redis_client.pipeline(transaction=False)
    log.queue(pipe, "requested", "a2")  # ...and the stream starts again
    await pipe.execute()
    with pytest.raises(WatchGap):
        await log.check(cursor)
    with pytest.raises(WatchGap):
        await log.read(cursor, block_ms=0, checked=True)
    # The new stream's own ids and a watch from the start are no gap.
    await log.check(await log.tail())
    await log.check("0")
