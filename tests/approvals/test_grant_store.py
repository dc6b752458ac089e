"""The grant store on the session's real Redis (ADR 0038, docs/approvals.md "Grants").

Create, get (lazily expired, its event once), list with filters and pages, revoke (at once:
the next take refuses), candidates by whom/what, take (max_uses and max_total exact, the
grant exhausted once), give back (once, by receipt; a give-back before its take voids the take),
the live cap, TTLs on every key.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from approvalkit import ALICE, BOB, CAROL, FakeClock

from gateway.config.settings import ApprovalSettings, RedisSettings
from gateway.errors import CapabilityError, Code
from gateway.state.approvals.grants import GrantRecord, GrantStatus, RedisGrantStore
from gateway.state.connections import connect
from gateway.state.embedded import RedisProcess


@pytest.fixture
async def grants(
    redis_server: RedisProcess,
    redis_client: aioredis.Redis,  # flushes the database first
    clock: FakeClock,
) -> AsyncIterator[tuple[RedisGrantStore, list[GrantRecord]]]:
    expired: list[GrantRecord] = []
    client = connect(RedisSettings(url=redis_server.url))
    settings = ApprovalSettings(retention_s=3600.0, grants_max_active=5)
    yield (
        RedisGrantStore(
            client, prefix="t", settings=settings, clock=clock, on_expired=expired.append
        ),
        expired,
    )
    await client.aclose()


def grant(clock: FakeClock, **fields: object) -> GrantRecord:
    base: dict[str, object] = {
        "id": secrets.token_hex(8),
        "created_at": clock(),
        "expires_at": clock() + 600,
        "created_by": BOB,
        "actor": ALICE,
        "capability_id": "orders.refund",
        "approver_roles": ("approver",),
    }
    base.update(fields)
    return GrantRecord(**base)  # type: ignore[arg-type]


async def test_create_get_and_lazy_expiry_once(grants, clock) -> None:  # type: ignore[no-untyped-def]
    store, expired = grants
    made = await store.create(grant(clock, max_uses=3, note="daily refunds"))
    got = await store.get(made.id)
    assert got == made and got.status == GrantStatus.ACTIVE and got.note == "daily refunds"
    assert await store.get("nope") is None and await store.get("{bad}") is None
    clock.advance(601)
    assert (await store.get(made.id)).status == GrantStatus.EXPIRED  # type: ignore[union-attr]
    assert (await store.get(made.id)).status == GrantStatus.EXPIRED  # type: ignore[union-attr]
    assert [g.id for g in expired] == [made.id]


async def test_every_key_has_a_ttl(grants, clock, redis_client) -> None:  # type: ignore[no-untyped-def]
    store, _ = grants
    made = await store.create(grant(clock, max_uses=2))
    assert await store.take(made.id, execution_id="e1", amount=None, receipt_ttl_s=30)
    keys = [k async for k in redis_client.scan_iter(match="t:*")]
    assert len(keys) == 6  # record, receipt, live, all, match, spec
    for key in keys:
        assert await redis_client.pttl(key) > 0, key


async def test_take_counts_uses_exactly_and_exhausts_once(grants, clock) -> None:  # type: ignore[no-untyped-def]
    store, _ = grants
    made = await store.create(grant(clock, max_uses=3))
    taken = await asyncio.gather(
        *(
            store.take(made.id, execution_id=f"e{i}", amount=None, receipt_ttl_s=30)
            for i in range(10)
        )
    )
    won = [t for t in taken if t is not None]
    assert len(won) == 3
    assert sum(t.exhausted for t in won) == 1
    assert sorted(t.uses for t in won) == [1, 2, 3]
    after = await store.get(made.id)
    assert after is not None and after.uses == 3 and after.status == GrantStatus.EXHAUSTED
    # A give-back returns one use, once, and the grant is active again.
    winner = next(f"e{i}" for i, t in enumerate(taken) if t is not None)
    assert await store.give_back(made.id, execution_id=winner) is True
    back = await store.get(made.id)
    assert back is not None and back.uses == 2 and back.status == GrantStatus.ACTIVE


async def test_give_back_once_by_receipt_and_void_before_take(grants, clock) -> None:  # type: ignore[no-untyped-def]
    store, _ = grants
    made = await store.create(grant(clock, max_uses=1))
    assert await store.take(made.id, execution_id="e1", amount=None, receipt_ttl_s=30)
    assert (await store.get(made.id)).status == GrantStatus.EXHAUSTED  # type: ignore[union-attr]
    assert await store.give_back(made.id, execution_id="e1") is True
    assert await store.give_back(made.id, execution_id="e1") is False
    back = await store.get(made.id)
    assert back is not None and back.uses == 0 and back.status == GrantStatus.ACTIVE
    # The give-back of e2 arrives before e2's take (its reply lost): the take counts nothing.
    assert await store.give_back(made.id, execution_id="e2") is False
    assert await store.take(made.id, execution_id="e2", amount=None, receipt_ttl_s=30) is None
    # A retried take of the same execution counts once.
    assert await store.take(made.id, execution_id="e3", amount=None, receipt_ttl_s=30)
    assert await store.take(made.id, execution_id="e3", amount=None, receipt_ttl_s=30)
    assert (await store.get(made.id)).uses == 1  # type: ignore[union-attr]


async def test_max_total_exact(grants, clock) -> None:  # type: ignore[no-untyped-def]
    store, _ = grants
    made = await store.create(grant(clock, amount="input.amount", max_total=100.0))
    taken = await asyncio.gather(
        *(
            store.take(made.id, execution_id=f"e{i}", amount=30.0, receipt_ttl_s=30)
            for i in range(10)
        )
    )
    assert sum(t is not None for t in taken) == 3
    assert await store.take(made.id, execution_id="small", amount=10.0, receipt_ttl_s=30)
    after = await store.get(made.id)
    assert after is not None and after.total == 100.0 and after.status == GrantStatus.EXHAUSTED
    assert await store.give_back(made.id, execution_id="small")
    back = await store.get(made.id)
    assert back is not None and back.total == 90.0 and back.status == GrantStatus.ACTIVE


async def test_revoke_at_once(grants, clock) -> None:  # type: ignore[no-untyped-def]
    store, _ = grants
    made = await store.create(grant(clock))
    revoked = await store.revoke(made.id, by=CAROL, via=None, note="misused")
    assert revoked.status == GrantStatus.REVOKED and revoked.revoked_by == CAROL
    assert revoked.revoked_at == clock() and revoked.revoke_note == "misused"
    assert await store.take(made.id, execution_id="e1", amount=None, receipt_ttl_s=30) is None
    with pytest.raises(CapabilityError) as again:
        await store.revoke(made.id, by=CAROL, via=None, note="")
    assert again.value.code == Code.APPROVAL_ALREADY_DECIDED
    with pytest.raises(CapabilityError) as unknown:
        await store.revoke("missing", by=CAROL, via=None, note="")
    assert unknown.value.code == Code.APPROVAL_NOT_FOUND
    assert await store.candidates(ALICE, "orders.refund", ()) == []


async def test_candidates_by_whom_and_what(grants, clock) -> None:  # type: ignore[no-untyped-def]
    store, _ = grants
    by_actor = await store.create(grant(clock, expires_at=clock() + 300))
    by_role = await store.create(
        grant(clock, actor=None, role="agent", capability_id="", tag="refunds")
    )
    await store.create(grant(clock, capability_id="orders.cancel"))
    await store.create(grant(clock, actor=BOB))
    agent = ALICE.__class__(id="alice", kind="user", issuer=ALICE.issuer, roles=("agent",))
    found = await store.candidates(agent, "orders.refund", ("refunds",))
    assert [g.id for g in found] == [by_actor.id, by_role.id]  # earliest expiry first
    assert [g.id for g in await store.candidates(ALICE, "orders.refund", ())] == [by_actor.id]
    clock.advance(301)
    assert [g.id for g in await store.candidates(agent, "orders.refund", ("refunds",))] == [
        by_role.id
    ]


async def test_live_cap(grants, clock) -> None:  # type: ignore[no-untyped-def]
    store, _ = grants
    made = [await store.create(grant(clock)) for _ in range(5)]
    with pytest.raises(CapabilityError) as over:
        await store.create(grant(clock))
    assert over.value.code == Code.APPROVAL_LIMIT_EXCEEDED
    await store.revoke(made[0].id, by=CAROL, via=None, note="")
    await store.create(grant(clock))  # a revoked grant leaves the cap


async def test_list_filters_and_pages(grants, clock) -> None:  # type: ignore[no-untyped-def]
    store, _ = grants
    made = [await store.create(grant(clock, expires_at=clock() + 100 + i)) for i in range(4)]
    await store.revoke(made[1].id, by=CAROL, via=None, note="")
    page, token = await store.list(page_size=3)
    assert [g.id for g in page] == [g.id for g in made[:3]] and token
    rest, end = await store.list(page_size=3, page_token=token)
    assert [g.id for g in rest] == [made[3].id] and end == ""
    active, _ = await store.list(statuses=["active"])
    assert [g.id for g in active] == [made[0].id, made[2].id, made[3].id]
    assert (await store.list(actor_id="bob"))[0] == []
    assert len((await store.list(capability_id="orders.refund"))[0]) == 4
    clock.advance(102.5)
    assert (await store.expire_sweep(clock())) == 2
    expired, _ = await store.list(statuses=[GrantStatus.EXPIRED])
    assert [g.id for g in expired] == [made[0].id, made[2].id]
