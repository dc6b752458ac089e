"""Redis crashes: AOF `appendfsync always` keeps every acknowledged transition (SI-12), and an
unreachable Redis is a quick, retryable APPROVAL_UNAVAILABLE (DESIGN §7)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from approvalkit import ALICE, BOB, FakeClock, new_record

from gateway.config.settings import ApprovalSettings, RedisSettings
from gateway.errors import CapabilityError, Code
from gateway.state.approvals import ApprovalConsumed, RedisApprovalStore, Status
from gateway.state.connections import connect
from gateway.state.embedded import RedisProcess

pytestmark = pytest.mark.integration


@pytest.fixture
async def own_redis(tmp_path: Path) -> AsyncIterator[RedisProcess]:
    proc = RedisProcess(tmp_path / "redis").start()
    yield proc
    proc.stop()


async def _unavailable_quickly(call: Callable[[], Awaitable[Any]]) -> None:
    started = time.monotonic()
    with pytest.raises(CapabilityError) as err:
        await call()
    assert err.value.code is Code.APPROVAL_UNAVAILABLE
    assert err.value.is_retryable
    assert time.monotonic() - started < 1.5


async def test_a_consume_survives_a_sigkill_and_calls_fail_fast_while_down(
    own_redis: RedisProcess, clock: FakeClock
) -> None:
    client = connect(RedisSettings(url=own_redis.url))
    store = RedisApprovalStore(client, prefix="t", settings=ApprovalSettings(), clock=clock)
    waiting = await store.create(new_record(clock))
    record = await store.create(new_record(clock))
    await store.decide(
        record.id, approve=True, approver=BOB, via=None, note="", input_hash=record.input_hash
    )
    await store.consume(record.id, requester=ALICE, surface="agent", execution_id="e1")

    own_redis.kill()  # SIGKILL right after the acknowledged consume
    calls: list[Callable[[], Awaitable[Any]]] = [
        lambda: store.create(new_record(clock)),
        lambda: store.get(record.id),
        lambda: store.decide(
            waiting.id,
            approve=True,
            approver=BOB,
            via=None,
            note="",
            input_hash=waiting.input_hash,
        ),
        lambda: store.consume(record.id, requester=ALICE, surface="agent", execution_id="e2"),
        lambda: store.finish(
            record.id, envelope=b"x", outcome_code=None, resumed_execution_id="e1"
        ),
        store.list,
        lambda: store.wait(waiting.id, 5),
        store.expire_sweep,
        store.reconcile,
        lambda: anext(store.watch()),
    ]
    for call in calls:
        await _unavailable_quickly(call)

    restarted = RedisProcess(own_redis.data_dir, port=own_redis.port).start()
    try:
        after = await store.get(record.id)
        assert after is not None
        assert after.status is Status.CONSUMED  # never consumable again
        with pytest.raises(ApprovalConsumed):
            await store.consume(record.id, requester=ALICE, surface="agent", execution_id="e3")
        pending = await store.get(waiting.id)
        assert pending == waiting
        assert [r.id for r in (await store.list())[0]] == [waiting.id]
    finally:
        await client.aclose()
        restarted.stop()


async def test_a_redis_that_never_answers_fails_within_the_operation_timeout(
    clock: FakeClock,
) -> None:
    # A peer that accepts connections and then says nothing (a hung or partitioned server).
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    port = silent.getsockname()[1]
    client = connect(RedisSettings(url=f"redis://127.0.0.1:{port}/0"))
    store = RedisApprovalStore(client, prefix="t", settings=ApprovalSettings(), clock=clock)
    try:
        started = time.monotonic()
        with pytest.raises(CapabilityError) as err:
            await asyncio.wait_for(store.get("some-id"), 10)
        assert err.value.code is Code.APPROVAL_UNAVAILABLE
        assert time.monotonic() - started < 3.0  # 2 s operation timeout, timeouts not retried
    finally:
        await client.aclose()
        silent.close()
