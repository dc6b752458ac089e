"""`get_own` (SI-8, issue 14 item 4): the record only for its requester (issuer, id) on its
surface, decided inside Redis before the record is read; everyone else gets None, as for an
unknown id. The owner's record is expired lazily like `get`'s."""

from __future__ import annotations

import dataclasses

import pytest
import redis.asyncio as aioredis
from approvalkit import ALICE, CAROL, FakeClock, new_record

from gateway.state.approvals import RedisApprovalStore, Status

pytestmark = pytest.mark.integration


async def test_only_the_requester_on_its_surface_gets_the_record(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    record = await store.create(new_record(clock))
    own = await store.get_own(record.id, requester=ALICE, surface="agent")
    assert own == await store.get(record.id)
    other_issuer = dataclasses.replace(ALICE, issuer="https://other.example")
    for requester, surface in (
        (CAROL, "agent"),
        (other_issuer, "agent"),
        (ALICE, "mcp"),
        (dataclasses.replace(ALICE, id=""), "agent"),
    ):
        assert await store.get_own(record.id, requester=requester, surface=surface) is None
    assert await store.get_own("no-such-id", requester=ALICE, surface="agent") is None
    assert await store.get_own("{bad id}", requester=ALICE, surface="agent") is None


async def test_the_owners_record_past_its_expiry_reads_as_expired(
    store: RedisApprovalStore, clock: FakeClock, redis_client: aioredis.Redis
) -> None:
    record = await store.create(new_record(clock, expires_in=60))
    clock.advance(61)
    assert await store.get_own(record.id, requester=CAROL, surface="agent") is None
    # A stranger's lookup changes nothing either: the record is still stored as pending.
    assert await redis_client.hget(store.keys.record(record.id), "status") == b"pending"
    own = await store.get_own(record.id, requester=ALICE, surface="agent")
    assert own is not None and own.status is Status.EXPIRED
