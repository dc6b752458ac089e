"""Index bounds of the approval store on real Redis (issue 14 #6, ADR 0018): the retire
schedule never drops a record Redis still holds, and index TTLs are extended, never shortened.

The store's clock is injected; Redis's own TTLs run on real time, so a record "past its end" by
the injected clock is still in Redis until the test deletes it, as its TTL would."""

from __future__ import annotations

import redis.asyncio as aioredis
from approvalkit import FakeClock, new_record

from gateway.state.approvals import RedisApprovalStore

CAP = "t:{apr-idx}:cap:orders.refund"
ALL = "t:{apr-idx}:all"
RETIRE = "t:{apr-idx}:retire"


async def test_an_entry_leaves_all_and_its_capability_only_when_its_record_is_gone(
    store: RedisApprovalStore, redis_client: aioredis.Redis, clock: FakeClock
) -> None:
    record = await store.create(new_record(clock, expires_in=60))
    member = f"{record.id} orders.refund"
    end = record.expires_at + store.settings.retention_s
    assert await redis_client.zscore(RETIRE, member) == end
    clock.advance(60 + store.settings.retention_s + 1)  # past its end by the gateway's clock
    await store.expire_sweep()
    # Redis still holds it (its TTL runs on Redis's clock): indexed, and looked at again later.
    assert await redis_client.exists(store.keys.record(record.id))
    assert await redis_client.zscore(CAP, record.id) is not None
    assert await redis_client.zscore(ALL, record.id) is not None
    assert (await redis_client.zscore(RETIRE, member) or 0) > clock()
    await redis_client.delete(store.keys.record(record.id))  # what its TTL does
    clock.advance(2 * store.settings.retention_s)
    await store.expire_sweep()
    assert await redis_client.zscore(CAP, record.id) is None
    assert await redis_client.zscore(ALL, record.id) is None
    assert await redis_client.zcard(RETIRE) == 0
    assert not await redis_client.exists(CAP, ALL, RETIRE, store.keys.pending)


async def test_index_ttls_cover_the_longest_lived_record_and_are_never_shortened(
    store: RedisApprovalStore, redis_client: aioredis.Redis, clock: FakeClock
) -> None:
    await store.create(new_record(clock, expires_in=7200))
    long_ttl = await redis_client.pttl(CAP)
    assert long_ttl > (7200 + store.settings.retention_s - 5) * 1000
    await store.create(new_record(clock, expires_in=10))  # shorter-lived: must not cut it
    for key in (CAP, ALL, RETIRE, store.keys.pending):
        assert await redis_client.pttl(key) > (7200 + store.settings.retention_s - 5) * 1000, key
    assert await redis_client.pttl(store.keys.events) > 0


async def test_reconcile_rebuilds_the_retire_schedule_and_the_ttls(
    store: RedisApprovalStore, redis_client: aioredis.Redis, clock: FakeClock
) -> None:
    record = await store.create(new_record(clock))
    await redis_client.delete(RETIRE)
    await redis_client.persist(CAP)
    await redis_client.zadd(CAP, {"ghost": 1.0})
    report = await store.reconcile()
    assert report.removed >= 1 and report.added >= 1
    assert await redis_client.zscore(RETIRE, f"{record.id} orders.refund") is not None
    assert await redis_client.zscore(CAP, "ghost") is None
    assert await redis_client.pttl(CAP) > 0 and await redis_client.pttl(RETIRE) > 0
