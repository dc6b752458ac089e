"""Listing over the indexes; expiry sweeps; reconciling indexes from the records."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis
from approvalkit import ALICE, BOB, FakeClock, new_record

from gateway.model import Actor
from gateway.state.approvals import ApprovalRecord, RedisApprovalStore, Status

pytestmark = pytest.mark.integration

DAVE = Actor(id="dave", kind="user", issuer="https://idp.example")


async def _all_pages(
    store: RedisApprovalStore, page_size: int, **kw: object
) -> list[list[ApprovalRecord]]:
    pages: list[list[ApprovalRecord]] = []
    token = ""
    while True:
        records, token = await store.list(page_size=page_size, page_token=token, **kw)  # type: ignore[arg-type]
        pages.append(records)
        if not token:
            return pages


async def test_pages_cover_every_pending_approval_once_even_with_equal_timestamps(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    # The fake clock does not move: every record has the same created_at and expires_at.
    created = [await store.create(new_record(clock, requester=r)) for r in [ALICE] * 5 + [DAVE] * 4]
    pages = await _all_pages(store, page_size=2)
    seen = [r.id for page in pages for r in page]
    assert sorted(seen) == sorted(r.id for r in created)
    assert all(len(page) <= 2 for page in pages)


async def test_pending_is_the_default_and_statuses_filter(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    a = await store.create(new_record(clock))
    b = await store.create(new_record(clock))
    await store.decide(b.id, approve=True, approver=BOB, via=None, note="", input_hash=b.input_hash)
    assert [r.id for r in (await store.list())[0]] == [a.id]
    approved, _ = await store.list(statuses=[Status.APPROVED])
    assert [r.id for r in approved] == [b.id]
    both, _ = await store.list(statuses=["pending", "approved"])
    assert {r.id for r in both} == {a.id, b.id}


async def test_capability_and_requester_filters(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    refund = await store.create(new_record(clock, capability_id="orders.refund"))
    await store.create(new_record(clock, capability_id="orders.cancel"))
    daves = await store.create(new_record(clock, requester=DAVE, capability_id="orders.cancel"))
    by_cap, _ = await store.list(capability_id="orders.refund")
    assert [r.id for r in by_cap] == [refund.id]
    by_requester, _ = await store.list(requester_id="dave")
    assert [r.id for r in by_requester] == [daves.id]


async def test_the_visibility_filter_applies_before_paging(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    for _ in range(3):
        await store.create(new_record(clock))
    mine = [await store.create(new_record(clock, requester=DAVE)) for _ in range(3)]
    pages = await _all_pages(store, page_size=2, visible=lambda r: r.requester.id == "dave")
    assert sorted(r.id for p in pages for r in p) == sorted(r.id for r in mine)


async def test_a_token_from_other_filters_is_refused(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    for _ in range(3):
        await store.create(new_record(clock))
    _, token = await store.list(page_size=1)
    assert token
    with pytest.raises(ValueError):
        await store.list(statuses=[Status.APPROVED], page_token=token)
    with pytest.raises(ValueError):
        await store.list(page_token="not-a-token!")


async def test_ids_whose_record_is_gone_are_skipped_and_dropped(
    store: RedisApprovalStore, clock: FakeClock, redis_client: aioredis.Redis
) -> None:
    kept = await store.create(new_record(clock))
    gone = await store.create(new_record(clock))
    await redis_client.delete(store.keys.record(gone.id))  # as when retention ends
    records, _ = await store.list()
    assert [r.id for r in records] == [kept.id]
    assert await redis_client.zscore(store.keys.pending, gone.id) is None


async def test_the_sweep_expires_due_pending_approvals_with_events(
    store: RedisApprovalStore, clock: FakeClock, redis_client: aioredis.Redis
) -> None:
    soon = await store.create(new_record(clock, expires_in=60))
    later = await store.create(new_record(clock, expires_in=600))
    clock.advance(61)
    assert await store.expire_sweep() == 1
    assert await store.expire_sweep() == 0
    expired = await store.get(soon.id)
    assert expired is not None
    assert expired.status is Status.EXPIRED
    still = await store.get(later.id)
    assert still is not None
    assert still.status is Status.PENDING
    assert await redis_client.zrange(store.keys.pending, 0, -1) == [later.id.encode()]
    types = [f[b"type"] for _, f in await redis_client.xrange(store.keys.events)]
    assert types.count(b"expired") == 1


async def test_reconcile_rebuilds_every_index_from_the_records(
    store: RedisApprovalStore, clock: FakeClock, redis_client: aioredis.Redis
) -> None:
    pending = await store.create(new_record(clock))
    decided = await store.create(new_record(clock, capability_id="orders.cancel"))
    await store.decide(decided.id, approve=False, approver=BOB, via=None, note="", input_hash="")
    index_keys = [k async for k in redis_client.scan_iter(match="t:{apr-idx}:*")]
    snapshot = {k: await redis_client.zrange(k, 0, -1, withscores=True) for k in index_keys}
    # Lose every index, and add a stale entry the records contradict.
    await redis_client.delete(*index_keys)
    await redis_client.zadd(store.keys.pending, {decided.id: 1.0, "ghost": 2.0})
    report = await store.reconcile()
    assert report.records == 2
    assert report.removed == 2
    rebuilt = {k: await redis_client.zrange(k, 0, -1, withscores=True) for k in index_keys}
    assert rebuilt == snapshot
    assert [r.id for r in (await store.list())[0]] == [pending.id]
    # The per-requester cap counts the rebuilt pending entry.
    assert await redis_client.zcard(store.keys.actor(ALICE.identity)) == 1
    again = await store.reconcile()
    assert (again.added, again.removed) == (0, 0)
