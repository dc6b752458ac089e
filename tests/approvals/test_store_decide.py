"""DecideApproval's store half: who may decide, binding to the seen input, one decision only."""

from __future__ import annotations

import dataclasses

import pytest
import redis.asyncio as aioredis
from approvalkit import ALICE, BOB, CAROL, INBOX, FakeClock, new_record

from gateway.config.settings import ApprovalSettings
from gateway.errors import CapabilityError, Code
from gateway.model import Actor
from gateway.state.approvals import RedisApprovalStore, Status

pytestmark = pytest.mark.integration


async def _refused(store: RedisApprovalStore, approval_id: str, **kw: object) -> Code:
    args: dict[str, object] = {
        "approve": True,
        "approver": BOB,
        "via": None,
        "note": "",
        "input_hash": "",
    }
    args.update(kw)
    with pytest.raises(CapabilityError) as err:
        await store.decide(approval_id, **args)  # type: ignore[arg-type]
    return err.value.code


async def test_a_stale_input_hash_is_refused_and_the_record_stays_pending(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    record = await store.create(new_record(clock))
    stale = "0" * 64
    assert await _refused(store, record.id, input_hash=stale) is Code.APPROVAL_INPUT_MISMATCH
    assert await _refused(store, record.id, input_hash="") is Code.APPROVAL_INPUT_MISMATCH
    current = await store.get(record.id)
    assert current is not None
    assert current.status is Status.PENDING


async def test_a_rejection_without_a_hash_rejects_whatever_is_pending(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    record = await store.create(new_record(clock))
    rejected = await store.decide(
        record.id, approve=False, approver=BOB, via=None, note="no", input_hash=""
    )
    assert rejected.status is Status.REJECTED


async def test_the_requester_cannot_approve_their_own_request(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    requester = dataclasses.replace(ALICE, roles=("approver",))
    record = await store.create(new_record(clock, requester=requester))
    code = await _refused(store, record.id, approver=requester, input_hash=record.input_hash)
    assert code is Code.APPROVAL_SELF_APPROVAL
    # Same id under another issuer is another person: (issuer, id) is the identity (§12).
    namesake = dataclasses.replace(requester, issuer="https://other-idp.example")
    approved = await store.decide(
        record.id,
        approve=True,
        approver=namesake,
        via=None,
        note="",
        input_hash=record.input_hash,
    )
    assert approved.status is Status.APPROVED


async def test_self_approval_is_allowed_when_configured(
    redis_client: aioredis.Redis, store: RedisApprovalStore, clock: FakeClock
) -> None:
    lenient = RedisApprovalStore(
        redis_client,
        prefix="t",
        clock=clock,
        settings=ApprovalSettings(reject_self_approval=False),
    )
    requester = dataclasses.replace(ALICE, roles=("approver",))
    record = await lenient.create(new_record(clock, requester=requester))
    approved = await lenient.decide(
        record.id,
        approve=True,
        approver=requester,
        via=None,
        note="",
        input_hash=record.input_hash,
    )
    assert approved.decided_by == requester


async def test_an_approver_must_hold_every_required_role(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    record = await store.create(new_record(clock, roles=("approver", "finance")))
    code = await _refused(store, record.id, approver=BOB, input_hash=record.input_hash)
    assert code is Code.FORBIDDEN
    approved = await store.decide(
        record.id, approve=True, approver=CAROL, via=None, note="", input_hash=record.input_hash
    )
    assert approved.decided_by == CAROL


async def test_anonymous_approvers_are_forbidden(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    record = await store.create(new_record(clock))
    nobody = Actor(id="anonymous", kind="anonymous", issuer="capgate", roles=("approver",))
    assert await _refused(store, record.id, approver=nobody) is Code.FORBIDDEN


async def test_a_decided_approval_cannot_be_decided_again(
    store: RedisApprovalStore, clock: FakeClock, redis_client: aioredis.Redis
) -> None:
    record = await store.create(new_record(clock))
    first = await store.decide(
        record.id, approve=True, approver=BOB, via=None, note="", input_hash=record.input_hash
    )
    code = await _refused(store, record.id, approver=CAROL, input_hash=record.input_hash)
    assert code is Code.APPROVAL_ALREADY_DECIDED
    code = await _refused(store, record.id, approve=False, approver=BOB)
    assert code is Code.APPROVAL_ALREADY_DECIDED
    # The same approver repeating the same verdict (a lost reply) gets the record, no new event.
    repeat = await store.decide(
        record.id, approve=True, approver=BOB, via=None, note="", input_hash=record.input_hash
    )
    assert repeat == first
    assert await redis_client.xlen(store.keys.events) == 2


async def test_an_expired_approval_cannot_be_decided(
    store: RedisApprovalStore, clock: FakeClock, redis_client: aioredis.Redis
) -> None:
    record = await store.create(new_record(clock, expires_in=60))
    clock.advance(61)
    assert await _refused(store, record.id, input_hash=record.input_hash) is Code.APPROVAL_EXPIRED
    assert await _refused(store, record.id, input_hash=record.input_hash) is Code.APPROVAL_EXPIRED
    current = await store.get(record.id)
    assert current is not None
    assert current.status is Status.EXPIRED
    types = [f[b"type"] for _, f in await redis_client.xrange(store.keys.events)]
    assert types == [b"requested", b"expired"]


async def test_unknown_ids_are_not_found(store: RedisApprovalStore) -> None:
    assert await _refused(store, "nope") is Code.APPROVAL_NOT_FOUND
    assert await _refused(store, "bad id with spaces") is Code.APPROVAL_NOT_FOUND


async def test_an_inbox_decides_for_a_human_and_both_are_recorded(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    record = await store.create(new_record(clock))
    approved = await store.decide(
        record.id,
        approve=True,
        approver=BOB,
        via=INBOX,
        note="via inbox",
        input_hash=record.input_hash,
    )
    assert (approved.decided_by, approved.decided_via) == (BOB, INBOX)
