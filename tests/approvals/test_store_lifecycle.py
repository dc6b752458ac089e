"""Creating, reading and finishing approvals; the pending cap; TTL; lazy expiry."""

from __future__ import annotations

import dataclasses

import pytest
import redis.asyncio as aioredis
from approvalkit import ALICE, BOB, FakeClock, new_record

from gateway.config.settings import ApprovalSettings
from gateway.errors import CapabilityError, Code
from gateway.model import ANONYMOUS, Actor
from gateway.state.approvals import ApprovalRecord, RedisApprovalStore, Status

pytestmark = pytest.mark.integration


async def _events(redis_client: aioredis.Redis, store: RedisApprovalStore) -> list[tuple[str, str]]:
    rows = await redis_client.xrange(store.keys.events)
    return [(f[b"type"].decode(), f[b"id"].decode()) for _, f in rows]


async def test_a_created_record_reads_back_field_for_field(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    record = dataclasses.replace(
        new_record(clock, value={"n": 2**63 - 1, "x": 0.1, "s": "é\u2028", "l": [None, True]}),
        requester=Actor(
            id="alice",
            kind="user",
            issuer="https://idp.example",
            roles=("r",),
            attributes={"team": "ops"},
        ),
    )
    created = await store.create(record)
    assert created == record
    assert await store.get(record.id) == record
    assert store.verify_input(record)


async def test_full_lifecycle_pending_approved_consumed_executed_with_events(
    store: RedisApprovalStore, clock: FakeClock, redis_client: aioredis.Redis
) -> None:
    record = await store.create(new_record(clock))
    clock.advance(10)
    approved = await store.decide(
        record.id, approve=True, approver=BOB, via=None, note="ok", input_hash=record.input_hash
    )
    assert (approved.status, approved.decided_by, approved.note) == (Status.APPROVED, BOB, "ok")
    assert approved.decided_at == clock.now
    consumed = await store.consume(
        record.id, requester=ALICE, surface="agent", execution_id="exec-2"
    )
    assert (consumed.status, consumed.resumed_execution_id) == (Status.CONSUMED, "exec-2")
    done = await store.finish(
        record.id, envelope=b"\x08\x01envelope", outcome_code=None, resumed_execution_id="exec-2"
    )
    assert (done.status, done.outcome_envelope, done.outcome_code) == (
        Status.EXECUTED,
        b"\x08\x01envelope",
        None,
    )
    # Finishing again (a retry) keeps the first envelope and emits nothing more.
    again = await store.finish(
        record.id, envelope=b"other", outcome_code="TIMEOUT", resumed_execution_id="exec-2"
    )
    assert again.outcome_envelope == b"\x08\x01envelope"
    assert await _events(redis_client, store) == [
        ("requested", record.id),
        ("approved", record.id),
        ("consumed", record.id),
        ("executed", record.id),
    ]
    # The approval no longer appears among pending ones; its requester's slot is free again.
    assert await redis_client.zscore(store.keys.pending, record.id) is None
    assert await redis_client.zcard(store.keys.actor(ALICE.identity)) == 0


async def test_anonymous_requesters_cannot_create_approvals(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    with pytest.raises(CapabilityError) as err:
        await store.create(new_record(clock, requester=ANONYMOUS))
    assert err.value.code is Code.UNAUTHENTICATED


async def test_pending_approvals_are_capped_per_requester(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    first = [await store.create(new_record(clock)) for _ in range(5)]
    with pytest.raises(CapabilityError) as err:
        await store.create(new_record(clock))
    assert err.value.code is Code.APPROVAL_LIMIT_EXCEEDED
    assert err.value.is_retryable
    # Another requester is not affected; deciding one frees a slot.
    other = Actor(id="dave", kind="user", issuer="https://idp.example")
    await store.create(new_record(clock, requester=other))
    await store.decide(first[0].id, approve=False, approver=BOB, via=None, note="", input_hash="")
    await store.create(new_record(clock))
    # Expired pending approvals stop counting once their expiry passed.
    clock.advance(901)
    for _ in range(5):
        await store.create(new_record(clock))


async def test_records_live_for_expiry_plus_retention(
    store: RedisApprovalStore, clock: FakeClock, redis_client: aioredis.Redis
) -> None:
    record = await store.create(new_record(clock, expires_in=600))
    ttl_ms = await redis_client.pttl(store.keys.record(record.id))
    assert (600 + 3600) * 1000 - 2000 < ttl_ms <= (600 + 3600) * 1000


async def test_missing_roles_fall_back_to_the_default_approver_role(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    record = await store.create(new_record(clock, roles=()))
    assert record.approver_roles == ("approver",)


async def test_get_marks_an_overdue_record_expired_once(
    store: RedisApprovalStore, clock: FakeClock, redis_client: aioredis.Redis
) -> None:
    record = await store.create(new_record(clock))
    clock.advance(900.5)
    first = await store.get(record.id)
    second = await store.get(record.id)
    assert first is not None
    assert second is not None
    assert first.status is second.status is Status.EXPIRED
    assert await _events(redis_client, store) == [
        ("requested", record.id),
        ("expired", record.id),
    ]
    assert await redis_client.zscore(store.keys.pending, record.id) is None


async def test_unknown_and_malformed_ids_read_as_absent(store: RedisApprovalStore) -> None:
    assert await store.get("does-not-exist") is None
    assert await store.get("{apr:x}*") is None


async def test_a_plain_status_string_is_accepted_and_normalized(clock: FakeClock) -> None:
    record = dataclasses.replace(new_record(clock), status="approved")  # type: ignore[arg-type]
    assert isinstance(record.status, Status)
    assert record.status is Status.APPROVED


async def test_a_retried_create_returns_the_stored_record(
    store: RedisApprovalStore, clock: FakeClock, redis_client: aioredis.Redis
) -> None:
    record = await store.create(new_record(clock))
    assert await store.create(record) == record
    assert len(await _events(redis_client, store)) == 1
    clash: ApprovalRecord = dataclasses.replace(new_record(clock), id=record.id)
    with pytest.raises(CapabilityError) as err:
        await store.create(clash)
    assert err.value.code is Code.APPROVAL_UNAVAILABLE


async def test_the_transition_hook_hears_each_transition_once(
    redis_client: aioredis.Redis, clock: FakeClock
) -> None:
    heard: list[tuple[str, str]] = []
    store = RedisApprovalStore(
        redis_client,
        prefix="t",
        settings=ApprovalSettings(),
        clock=clock,
        on_transition=lambda event, record: heard.append((event, str(record.status))),
    )
    record = await store.create(new_record(clock))
    for _ in range(2):  # a repeated decision is no second transition
        await store.decide(
            record.id,
            approve=True,
            approver=BOB,
            via=None,
            note="",
            input_hash=record.input_hash,
        )
    late = await store.create(new_record(clock, expires_in=5))
    clock.advance(6)
    await store.get(late.id)
    await store.get(late.id)
    assert heard == [
        ("requested", "pending"),
        ("approved", "approved"),
        ("requested", "pending"),
        ("expired", "expired"),
    ]
