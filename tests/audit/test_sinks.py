"""The audit log and its sinks: a bounded best-effort buffer with a drop counter, strict writes
that wait for every sink (in order, batched), JSON lines, and a capped Redis stream that
consumer groups can read."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis

from gateway.audit.sinks import AuditLog, AuditUnavailable, MemorySink, RedisStreamSink, StreamSink
from gateway.telemetry import metrics


class GatedSink:
    """Holds every write until `gate` opens; records the batches it received."""

    name = "gated"

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.batches: list[list[dict[str, Any]]] = []

    async def write(self, events: Sequence[dict[str, Any]]) -> None:
        await self.gate.wait()
        self.batches.append(list(events))


class BrokenSink:
    name = "broken"

    async def write(self, events: Sequence[dict[str, Any]]) -> None:
        raise ConnectionError("sink down")


def ev(n: int) -> dict[str, Any]:
    return {"event": "capability.requested", "n": n}


async def test_a_full_buffer_drops_and_counts_instead_of_blocking_the_call() -> None:
    sink = GatedSink()
    log = AuditLog([sink], buffer=2)
    before = metrics.audit_dropped.value(("buffer", "overflow"))
    log.emit(ev(1))
    await asyncio.sleep(0)  # the drain takes event 1 and waits on the sink
    for n in range(2, 6):
        log.emit(ev(n))  # 2 and 3 fill the buffer; 4 and 5 are dropped
    assert log.dropped == 2
    assert metrics.audit_dropped.value(("buffer", "overflow")) == before + 2
    sink.gate.set()
    await log.flush()
    assert [e["n"] for batch in sink.batches for e in batch] == [1, 2, 3]
    await log.close()


async def test_strict_writes_keep_order_and_share_one_batch() -> None:
    sink = GatedSink()
    sink.gate.set()
    log = AuditLog([sink])
    log.emit(ev(0))  # best effort, buffered first
    await asyncio.gather(*(log.emit_strict(ev(n)) for n in (1, 2, 3)))
    assert [e for batch in sink.batches for e in batch] == [ev(0), ev(1), ev(2), ev(3)]
    assert sink.batches[-1][-3:] == [ev(1), ev(2), ev(3)]  # one round trip for all three
    await log.close()


async def test_a_failing_sink_fails_strict_writes_and_drops_best_effort_ones() -> None:
    memory = MemorySink()
    log = AuditLog([memory, BrokenSink()])
    before = metrics.audit_dropped.value(("broken", "sink_error"))
    log.emit(ev(1))
    with pytest.raises(AuditUnavailable, match="broken"):
        await log.emit_strict(ev(2))
    assert log.dropped == 2
    assert metrics.audit_dropped.value(("broken", "sink_error")) == before + 2
    assert memory.events == [ev(1), ev(2)]  # the healthy sink still got both
    await log.close()


async def test_a_hanging_sink_fails_a_strict_write_after_the_timeout() -> None:
    sink = GatedSink()
    log = AuditLog([sink], strict_timeout_s=0.05)
    with pytest.raises(AuditUnavailable, match="timeout"):
        await log.emit_strict(ev(1))
    sink.gate.set()
    await log.close()
    assert sink.batches == [[ev(1)]]  # written late: recorded, but the call was refused


async def test_a_strict_write_into_a_full_buffer_fails_at_once() -> None:
    sink = GatedSink()
    log = AuditLog([sink], buffer=1)
    log.emit(ev(1))
    await asyncio.sleep(0)
    log.emit(ev(2))
    with pytest.raises(AuditUnavailable, match="buffer full"):
        await log.emit_strict(ev(3))
    sink.gate.set()
    await log.close()


async def test_best_effort_events_of_a_few_milliseconds_share_one_write() -> None:
    sink = GatedSink()
    sink.gate.set()
    log = AuditLog([sink], linger_s=0.05)
    for n in range(3):
        log.emit(ev(n))
        await asyncio.sleep(0.005)  # separate calls, a few milliseconds apart
    await asyncio.sleep(0.1)
    assert sink.batches == [[ev(0), ev(1), ev(2)]]
    await log.close()


async def test_close_drains_what_is_buffered() -> None:
    memory = MemorySink()
    log = AuditLog([memory])
    for n in range(100):
        log.emit(ev(n))
    await log.close()
    assert [e["n"] for e in memory.events] == list(range(100))
    assert log.dropped == 0


async def test_no_sinks_means_no_work_for_best_effort_and_refuses_strict_writes() -> None:
    log = AuditLog([])
    log.emit(ev(1))
    with pytest.raises(AuditUnavailable, match="no audit sink"):
        await log.emit_strict(ev(2))  # no audit record, no execution
    await log.close()
    assert log.dropped == 0


class Observer:
    """Reacts to one event name, like the webhook notifier; keeps no record."""

    name = "observer"

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def write(self, events: Sequence[dict[str, Any]]) -> None:
        self.seen += [e["event"] for e in events]


async def test_observers_see_every_event_but_never_make_a_strict_write_succeed() -> None:
    observer = Observer()
    log = AuditLog([], observers=[observer])
    log.emit(ev(1))
    await log.flush()
    assert observer.seen == ["capability.requested"]
    with pytest.raises(AuditUnavailable, match="no audit sink"):
        await log.emit_strict(ev(2))
    await log.close()
    memory = MemorySink()
    recorded = AuditLog([memory], observers=[BrokenSink()])
    await recorded.emit_strict(ev(3))  # an observer's failure is no strict failure
    assert memory.events == [ev(3)]
    await recorded.close()


async def test_the_file_sink_appends_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b'{"event":"earlier"}\n')
    sink = StreamSink.to_file(str(path))
    log = AuditLog([sink])
    log.emit(ev(1))
    log.emit(ev(2))
    await log.close()
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert lines == [{"event": "earlier"}, ev(1), ev(2)]


async def test_the_redis_stream_is_capped_and_readable_by_a_consumer_group(
    redis_client: aioredis.Redis,
) -> None:
    sink = RedisStreamSink(redis_client, "t:audit", maxlen=100)
    for start in range(0, 1000, 250):
        await sink.write([ev(n) for n in range(start, start + 250)])
    length = await redis_client.xlen("t:audit")
    assert 100 <= length < 1000  # approximate trimming (MAXLEN ~) keeps whole nodes
    await redis_client.xgroup_create("t:audit", "siem", id="0")
    reply = await redis_client.xreadgroup("siem", "c1", {"t:audit": ">"}, count=5)
    entries = reply[0][1]
    events = [orjson.loads(fields[b"e"]) for _id, fields in entries]
    assert [e["n"] for e in events] == list(range(1000 - length, 1000 - length + 5))
