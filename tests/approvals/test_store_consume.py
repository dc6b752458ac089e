"""Resume's store half: seed 001's checks in order, at most once (SI-12), input binding (SI-5)."""

from __future__ import annotations

import asyncio
import dataclasses

import orjson
import pytest
import redis.asyncio as aioredis
from approvalkit import ALICE, BOB, FakeClock, new_record

from gateway.config.settings import ApprovalSettings
from gateway.errors import CapabilityError, Code
from gateway.state.approvals import ApprovalConsumed, ApprovalRecord, RedisApprovalStore, Status

pytestmark = pytest.mark.integration


async def _approved(store: RedisApprovalStore, clock: FakeClock, **kw: object) -> ApprovalRecord:
    record = await store.create(new_record(clock, **kw))  # type: ignore[arg-type]
    return await store.decide(
        record.id, approve=True, approver=BOB, via=None, note="", input_hash=record.input_hash
    )


async def _consume_error(
    store: RedisApprovalStore, approval_id: str, **kw: object
) -> CapabilityError:
    args: dict[str, object] = {"requester": ALICE, "surface": "agent", "execution_id": "exec-r"}
    args.update(kw)
    with pytest.raises(CapabilityError) as err:
        await store.consume(approval_id, **args)  # type: ignore[arg-type]
    return err.value


async def test_another_requester_or_surface_gets_exactly_the_unknown_id_answer(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    record = await _approved(store, clock)
    unknown = await _consume_error(store, "no-such-approval")
    namesake = dataclasses.replace(ALICE, issuer="https://other-idp.example")
    answers = [
        await _consume_error(store, record.id, requester=BOB),
        await _consume_error(store, record.id, requester=namesake),
        await _consume_error(store, record.id, surface="mcp"),
    ]
    for answer in answers:  # SI-8: same code, message and logged reason as an unknown id
        assert (answer.code, answer.public_message, answer.reason) == (
            unknown.code,
            unknown.public_message,
            unknown.reason,
        )
        assert answer.code is Code.APPROVAL_NOT_FOUND


async def test_each_status_refuses_with_its_code_in_seed_order(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    pending = await store.create(new_record(clock))
    assert (await _consume_error(store, pending.id)).code is Code.APPROVAL_PENDING
    # The requester check comes before the status: a stranger learns nothing about it.
    stranger = await _consume_error(store, pending.id, requester=BOB)
    assert stranger.code is Code.APPROVAL_NOT_FOUND

    rejected = await store.create(new_record(clock))
    await store.decide(rejected.id, approve=False, approver=BOB, via=None, note="", input_hash="")
    assert (await _consume_error(store, rejected.id)).code is Code.APPROVAL_REJECTED

    approved = await _approved(store, clock, expires_in=30)
    clock.advance(31)  # approved, but past its expiry: expired, and stays expired
    assert (await _consume_error(store, approved.id)).code is Code.APPROVAL_EXPIRED
    assert (await _consume_error(store, approved.id)).code is Code.APPROVAL_EXPIRED
    after = await store.get(approved.id)
    assert after is not None
    assert after.status is Status.EXPIRED


async def test_a_pending_record_past_its_expiry_reads_as_expired(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    record = await store.create(new_record(clock, expires_in=30))
    clock.advance(31)
    assert (await _consume_error(store, record.id)).code is Code.APPROVAL_EXPIRED


async def test_a_consumed_or_executed_record_is_returned_with_the_error(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    record = await _approved(store, clock)
    await store.consume(record.id, requester=ALICE, surface="agent", execution_id="exec-1")
    # A crash before finish: the record stays consumed forever and is never consumed again.
    err = await _consume_error(store, record.id, execution_id="exec-2")
    assert isinstance(err, ApprovalConsumed)
    assert err.record is not None
    assert err.record.status is Status.CONSUMED
    assert err.record.outcome_envelope is None
    with pytest.raises(CapabilityError) as foreign:
        await store.finish(
            record.id, envelope=b"x", outcome_code=None, resumed_execution_id="exec-2"
        )
    assert foreign.value.code is Code.APPROVAL_CONSUMED
    await store.finish(
        record.id, envelope=b"env", outcome_code="TIMEOUT", resumed_execution_id="exec-1"
    )
    err = await _consume_error(store, record.id, execution_id="exec-3")
    assert isinstance(err, ApprovalConsumed)
    assert err.record is not None
    assert (err.record.status, err.record.outcome_envelope, err.record.outcome_code) == (
        Status.EXECUTED,
        b"env",
        "TIMEOUT",
    )


async def test_the_consuming_execution_may_repeat_its_consume(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    record = await _approved(store, clock)
    first = await store.consume(record.id, requester=ALICE, surface="agent", execution_id="e1")
    again = await store.consume(record.id, requester=ALICE, surface="agent", execution_id="e1")
    assert again == first


async def test_self_approval_is_checked_again_on_consume(
    redis_client: aioredis.Redis, store: RedisApprovalStore, clock: FakeClock
) -> None:
    # Decided while self-approval was allowed; the setting changed before the Resume (SI-4).
    lenient = RedisApprovalStore(
        redis_client,
        prefix="t",
        clock=clock,
        settings=ApprovalSettings(reject_self_approval=False),
    )
    requester = dataclasses.replace(ALICE, roles=("approver",))
    record = await lenient.create(new_record(clock, requester=requester))
    await lenient.decide(
        record.id,
        approve=True,
        approver=requester,
        via=None,
        note="",
        input_hash=record.input_hash,
    )
    err = await _consume_error(store, record.id, requester=requester)
    assert err.code is Code.APPROVAL_SELF_APPROVAL


async def test_fifty_concurrent_consumes_let_exactly_one_through(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    record = await _approved(store, clock)

    async def attempt(n: int) -> str:
        try:
            await store.consume(
                record.id, requester=ALICE, surface="agent", execution_id=f"exec-{n}"
            )
        except CapabilityError as err:
            return err.code.value
        return "OK"

    outcomes = await asyncio.gather(*(attempt(n) for n in range(50)))
    assert outcomes.count("OK") == 1
    assert outcomes.count(Code.APPROVAL_CONSUMED.value) == 49


async def test_tampering_with_the_stored_input_is_detected(
    store: RedisApprovalStore, clock: FakeClock, redis_client: aioredis.Redis
) -> None:
    record = await _approved(store, clock, value={"order": "o-1", "amount": 250})
    current = await store.get(record.id)
    assert current is not None
    assert store.verify_input(current)
    await redis_client.hset(
        store.keys.record(record.id), "input", orjson.dumps({"order": "o-1", "amount": 25000})
    )
    tampered = await store.get(record.id)
    assert tampered is not None
    assert tampered.input == {"order": "o-1", "amount": 25000}
    assert not store.verify_input(tampered)
