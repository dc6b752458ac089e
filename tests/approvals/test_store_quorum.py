"""DECIDE with quorum, separation of duties, edits and escalation (issue 28 items 2-4), at the
store: real Redis, the one Lua script per transition (docs/approvals.md "Quorum and separation
of duties", "Escalation")."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from approvalkit import ALICE, BOB, CAROL, FakeClock, new_record

from gateway.errors import CapabilityError, Code
from gateway.model import Actor
from gateway.state.approvals import ApprovalRecord, RedisApprovalStore, Status
from gateway.state.approvals.store import EditedInput
from gateway.values.canonical import input_hash

pytestmark = pytest.mark.integration

IDP = "https://idp.example"


def approver(name: str, *roles: str) -> Actor:
    return Actor(id=name, kind="user", issuer=IDP, roles=("approver", *roles))


async def _stream(store: RedisApprovalStore, approval_id: str) -> list[str]:
    rows: Any = await store._redis.xrange(store.keys.events)
    return [r[1][b"type"].decode() for r in rows if r[1][b"id"].decode() == approval_id]


async def _approve(
    store: RedisApprovalStore, record: ApprovalRecord, who: Actor, **kw: Any
) -> ApprovalRecord:
    args: dict[str, Any] = {"via": None, "note": "", "input_hash": record.input_hash}
    args.update(kw)
    return await store.decide(record.id, approve=True, approver=who, **args)


async def _code(coro: Any) -> CapabilityError:
    with pytest.raises(CapabilityError) as err:
        await coro
    return err.value


async def test_two_of_two_is_approved_by_the_second_vote_and_a_repeat_counts_once(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    record = await store.create(dataclasses.replace(new_record(clock), quorum=2))
    first = await _approve(store, record, BOB)
    assert (first.status, len(first.votes), first.decided_by) == (Status.PENDING, 1, None)
    again = await _approve(store, record, BOB)
    assert (again.status, len(again.votes)) == (Status.PENDING, 1)
    # Same id under another issuer is another person: (issuer, id) is the identity.
    namesake = dataclasses.replace(BOB, issuer="https://other-idp.example")
    done = await _approve(store, record, namesake)
    assert done.status is Status.APPROVED
    assert done.decided_by is not None and done.decided_by.identity == namesake.identity
    assert [v.identity for v in done.votes] == [BOB.identity, namesake.identity]
    assert await _stream(store, record.id) == ["requested", "voted", "approved"]
    # A retry by either voter after the approval answers the record, no event.
    assert (await _approve(store, record, BOB)).status is Status.APPROVED
    assert await _stream(store, record.id) == ["requested", "voted", "approved"]


async def test_the_requester_can_never_vote(store: RedisApprovalStore, clock: FakeClock) -> None:
    requester = dataclasses.replace(ALICE, roles=("approver",))
    record = await store.create(
        dataclasses.replace(new_record(clock, requester=requester), quorum=2)
    )
    await _approve(store, record, BOB)
    err = await _code(_approve(store, record, requester))
    assert err.code is Code.APPROVAL_SELF_APPROVAL
    current = await store.get(record.id)
    assert current is not None and len(current.votes) == 1


async def test_distinct_roles_refuse_a_vote_that_cannot_cover_them(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    record = await store.create(
        dataclasses.replace(new_record(clock), quorum=2, distinct_roles=("finance", "risk"))
    )
    await _approve(store, record, approver("f1", "finance"))
    err = await _code(_approve(store, record, approver("f2", "finance")))
    assert err.code is Code.FORBIDDEN
    assert err.public_message == "This approval still needs approvers holding: risk."
    current = await store.get(record.id)
    assert current is not None
    assert (current.status, len(current.votes)) == (Status.PENDING, 1)
    done = await _approve(store, record, approver("r1", "risk"))
    assert done.status is Status.APPROVED


async def test_distinct_roles_are_matched_not_counted(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    # One approver holding both roles first, then one holding only finance: the matching gives
    # risk to the first and finance to the second (a greedy count would have refused it).
    record = await store.create(
        dataclasses.replace(new_record(clock), quorum=2, distinct_roles=("finance", "risk"))
    )
    await _approve(store, record, approver("both", "finance", "risk"))
    done = await _approve(store, record, approver("f1", "finance"))
    assert done.status is Status.APPROVED
    # The quorum is at least one approver per distinct role, whatever the record asked.
    small = await store.create(
        dataclasses.replace(new_record(clock), quorum=1, distinct_roles=("finance", "risk"))
    )
    assert small.quorum == 2


async def test_one_rejection_rejects_at_once(store: RedisApprovalStore, clock: FakeClock) -> None:
    record = await store.create(dataclasses.replace(new_record(clock), quorum=3))
    await _approve(store, record, BOB)
    await _approve(store, record, CAROL)
    rejected = await store.decide(
        record.id, approve=False, approver=approver("dan"), via=None, note="no", input_hash=""
    )
    assert rejected.status is Status.REJECTED
    assert rejected.decided_by is not None and rejected.decided_by.id == "dan"
    err = await _code(_approve(store, record, approver("erin")))
    assert err.code is Code.APPROVAL_ALREADY_DECIDED


async def test_an_edit_resets_the_votes_and_counts_the_editor(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    record = await store.create(dataclasses.replace(new_record(clock), quorum=2))
    await _approve(store, record, BOB)
    changed = {**record.input, "amount": 200}
    edit = EditedInput(input=changed, input_hash=input_hash(changed))
    edited = await _approve(store, record, CAROL, edit=edit)
    assert edited.status is Status.PENDING
    assert (edited.input, edited.input_hash, edited.request_hash) == (
        changed,
        edit.input_hash,
        edit.input_hash,
    )
    assert edited.edited and edited.edited_by is not None and edited.edited_by.id == "carol"
    assert (edited.original_input, edited.original_input_hash) == (
        record.input,
        record.input_hash,
    )
    assert [v.id for v in edited.votes] == ["carol"]  # bob approved another input
    # Bob approving what he saw (the old input) is refused: another approver edited it.
    err = await _code(_approve(store, record, BOB))
    assert err.code is Code.APPROVAL_INPUT_MISMATCH
    # A second edit keeps the requester's original.
    again = {**record.input, "amount": 150}
    second = EditedInput(input=again, input_hash=input_hash(again))
    re_edited = await _approve(store, edited, BOB, edit=second)
    assert re_edited.original_input_hash == record.input_hash
    assert [v.id for v in re_edited.votes] == ["bob"]
    done = await _approve(store, re_edited, CAROL)
    assert done.status is Status.APPROVED and done.input == again
    assert await _stream(store, record.id) == [
        "requested",
        "voted",
        "edited",
        "edited",
        "approved",
    ]


async def test_an_edit_approves_at_once_with_a_quorum_of_one(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    record = await store.create(new_record(clock))
    changed = {**record.input, "amount": 1}
    edit = EditedInput(input=changed, input_hash=input_hash(changed))
    done = await _approve(store, record, BOB, edit=edit)
    assert done.status is Status.APPROVED and done.input == changed and done.edited
    assert store.verify_input(done)
    assert await _stream(store, record.id) == ["requested", "edited", "approved"]
    # The same edit retried after a lost reply answers the record.
    assert (await _approve(store, record, BOB, edit=edit)).status is Status.APPROVED


async def test_an_edit_is_checked_like_a_vote(store: RedisApprovalStore, clock: FakeClock) -> None:
    record = await store.create(new_record(clock))
    changed = {**record.input, "amount": 1}
    edit = EditedInput(input=changed, input_hash=input_hash(changed))
    outsider = Actor(id="mallory", kind="user", issuer=IDP, roles=("viewer",))
    assert (await _code(_approve(store, record, outsider, edit=edit))).code is Code.FORBIDDEN
    stale = await _code(_approve(store, record, BOB, edit=edit, input_hash="0" * 64))
    assert stale.code is Code.APPROVAL_INPUT_MISMATCH
    with pytest.raises(ValueError):
        await _approve(store, record, BOB, edit=EditedInput(changed, record.input_hash))
    current = await store.get(record.id)
    assert current is not None and not current.edited and current.input == record.input


async def test_escalation_lets_escalation_roles_decide_after_it_once(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    heard: list[str] = []
    other = RedisApprovalStore(
        store._redis,
        prefix="t",
        settings=store.settings,
        clock=clock,
        on_transition=lambda event, _record: heard.append(event),
    )
    record = await store.create(
        dataclasses.replace(
            new_record(clock),
            escalate_at=clock() + 60,
            escalation_roles=("manager",),
        )
    )
    boss = Actor(id="boss", kind="user", issuer=IDP, roles=("manager",))
    assert (await _code(_approve(store, record, boss))).code is Code.FORBIDDEN
    assert await asyncio.gather(store.escalate_sweep(), other.escalate_sweep()) == [0, 0]
    clock.advance(61)
    swept = await asyncio.gather(*(s.escalate_sweep() for s in (store, other) * 5))
    assert sum(swept) == 1
    current = await store.get(record.id)
    assert current is not None and current.escalated_at == clock()
    assert await store._redis.zcard(store.keys.escalate) == 0
    done = await _approve(store, record, boss)
    assert done.status is Status.APPROVED
    assert (await _stream(store, record.id)).count("escalated") == 1


async def test_a_late_sweep_does_not_delay_escalation(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    record = await store.create(
        dataclasses.replace(
            new_record(clock), escalate_at=clock() + 60, escalation_roles=("manager",)
        )
    )
    clock.advance(61)
    boss = Actor(id="boss", kind="user", issuer=IDP, roles=("manager",))
    done = await _approve(store, record, boss)
    assert done.status is Status.APPROVED and done.escalated_at == clock()
    assert await _stream(store, record.id) == ["requested", "escalated", "approved"]
    assert await store.escalate_sweep() == 0


async def test_the_escalation_index_is_bounded_and_rebuilt(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    redis = store._redis
    keys = store.keys
    due = dataclasses.replace(
        new_record(clock), escalate_at=clock() + 60, escalation_roles=("manager",)
    )
    never = dataclasses.replace(
        new_record(clock, expires_in=30), escalate_at=clock() + 60, escalation_roles=("manager",)
    )
    record = await store.create(due)
    await store.create(never)  # escalate_at after its expiry: never indexed
    assert [m.decode() for m in await redis.zrange(keys.escalate, 0, -1)] == [record.id]
    assert await redis.pttl(keys.escalate) > (record.expires_at - clock()) * 1000
    await redis.delete(keys.escalate)
    await store.reconcile()
    assert [m.decode() for m in await redis.zrange(keys.escalate, 0, -1)] == [record.id]
    assert await redis.pttl(keys.escalate) > 0
    await _approve(store, record, BOB)  # decided: it leaves the index
    assert await redis.zcard(keys.escalate) == 0
