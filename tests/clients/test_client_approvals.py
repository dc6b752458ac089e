"""capgate_client and issue 28's approvals on the shared stack (tests/stack/): a call a standing
grant covers shows the grant, a resumed call whose approver edited it shows the edit and its
patch, and a two-person approval shows its progress ("1 of 2")."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from capgate_client import (
    Actor,
    AdminClient,
    ApprovalRequired,
    ApprovalStatus,
    AsyncAdminClient,
    AsyncClient,
    Client,
    Completed,
    ExecutionState,
    Failed,
    GrantStatus,
)

pytestmark = pytest.mark.integration

ORDER = "o-1003"  # its total never runs out, however often the client suites run


@pytest.fixture
async def carol(stack: dict[str, Any]) -> AsyncIterator[AsyncAdminClient]:
    async with AsyncAdminClient(stack["admin"], token=stack["tokens"]["carol"], timeout=10) as c:
        yield c


async def test_a_call_a_grant_covers_runs_at_once_and_names_the_grant(
    alice: AsyncClient, bob: AsyncAdminClient
) -> None:
    marker = f"py-grant-{uuid.uuid4().hex}"  # no other suite's call matches this grant
    grant = await bob.create_grant(
        actor=Actor("alice", "test-idp", "user"),
        capability_id="orders.refund",
        constraint=f'input.reason == "{marker}" && input.amount <= 900',
        expires_in=timedelta(minutes=10),
        max_uses=1,
        note="python client test",
    )
    assert grant.active and grant.uses == 0 and grant.max_uses == 1
    assert grant.created_by is not None and grant.created_by.id == "bob"
    covered = {"order_id": ORDER, "amount": 800, "reason": marker}

    # Check says which grant Invoke would use, and uses nothing.
    check = await alice.check("orders.refund", covered)
    assert check.grant_id == grant.id

    # Over 500 a refund needs a manager's approval; the grant stands in for it.
    outcome = await alice.invoke("orders.refund", covered)
    assert isinstance(outcome, Completed), outcome
    assert outcome.grant_id == grant.id
    assert (outcome.approval_id, outcome.edited, outcome.patch) == ("", False, ())

    used = await bob.get_grant(grant.id)
    assert (used.uses, used.status) == (1, GrantStatus.EXHAUSTED)
    listed = await bob.list_grants(statuses=[GrantStatus.EXHAUSTED], actor_id="alice")
    assert grant.id in {g.id for g in listed.grants}

    # Used up: the same call waits for an approval again, with no grant in its envelope.
    again = await alice.invoke("orders.refund", covered)
    assert isinstance(again, ApprovalRequired), again
    assert again.grant_id == ""
    await bob.reject(again.approval.id, again.approval.input_hash)  # leave nothing pending


def test_the_blocking_admin_client_revokes_a_grant_at_once(stack: dict[str, Any]) -> None:
    marker = f"py-revoke-{uuid.uuid4().hex}"
    with (
        AdminClient(stack["admin"], token=stack["tokens"]["bob"], timeout=10) as bob,
        Client(stack["agents"], token=stack["tokens"]["alice"], timeout=10) as alice,
    ):
        grant = bob.create_grant(
            actor=Actor("alice", "test-idp", "user"),
            capability_id="orders.refund",
            constraint=f'input.reason == "{marker}"',
            expires_in=600,
        )
        covered = {"order_id": ORDER, "amount": 600, "reason": marker}
        assert alice.check("orders.refund", covered).grant_id == grant.id
        revoked = bob.revoke_grant(grant.id, note="no longer")
        assert revoked.status is GrantStatus.REVOKED and revoked.revoked_at is not None
        assert alice.check("orders.refund", covered).grant_id == ""
        assert bob.get_grant(grant.id).status is GrantStatus.REVOKED


async def test_a_resumed_call_whose_approver_edited_it_shows_the_edit_and_its_patch(
    alice: AsyncClient, bob: AsyncAdminClient
) -> None:
    asked = await alice.invoke(
        "orders.refund_reviewed", {"order_id": ORDER, "amount": 900, "reason": "damaged"}
    )
    assert isinstance(asked, ApprovalRequired), asked
    pending = asked.approval
    assert (pending.edited, pending.patch, pending.original_input_hash) == (False, (), "")

    # bob lowers the amount in the input as he was shown it (the reason is masked for him:
    # he sends the mask back, and the requester's reason is kept); input_hash stays the one he
    # was shown.
    decided = await bob.approve(
        pending.id,
        pending.input_hash,
        edited_input={"order_id": ORDER, "amount": 700, "reason": "****"},
    )
    change = ({"op": "replace", "path": "/amount", "value": 700},)
    assert decided.status is ApprovalStatus.APPROVED and decided.edited
    assert decided.edited_by is not None and decided.edited_by.id == "bob"

    seen = await alice.get_approval(pending.id)
    assert seen.edited and seen.patch == change
    assert seen.original_input_hash == pending.input_hash != seen.input_hash

    done = await alice.resume(pending.id)
    assert isinstance(done, Completed), done
    assert done.output["amount"] == 700  # the edited input ran
    assert (done.edited, done.patch, done.approval_id) == (True, change, pending.id)


async def test_a_two_person_approval_shows_its_progress(
    alice: AsyncClient, bob: AsyncAdminClient, carol: AsyncAdminClient
) -> None:
    asked = await alice.invoke("orders.refund_dual", {"order_id": ORDER, "amount": 20})
    assert isinstance(asked, ApprovalRequired), asked
    pending = asked.approval
    assert (pending.quorum, pending.approvals_received, pending.progress) == (2, 0, "0 of 2")
    # Escalation is planned at creation (30 minutes later, to admins) and has not happened.
    assert pending.created_at is not None and pending.escalated_at is None
    assert pending.escalate_at == pending.created_at + timedelta(minutes=30)
    assert pending.escalation_roles == ("admin",)

    half = await bob.approve(pending.id, pending.input_hash)
    assert half.status is ApprovalStatus.PENDING and half.progress == "1 of 2"
    assert [a.id for a in half.approved_by] == ["bob"]
    assert (await alice.get_approval(pending.id)).progress == "1 of 2"
    early = await alice.resume(pending.id)  # one approval is not enough: nothing runs
    assert isinstance(early, Failed) and early.execution_state is ExecutionState.NOT_STARTED

    full = await carol.approve(pending.id, pending.input_hash)
    assert full.status is ApprovalStatus.APPROVED and full.progress == "2 of 2"
    assert {a.id for a in full.approved_by} == {"bob", "carol"}
    done = await alice.resume(pending.id)
    assert isinstance(done, Completed) and done.output["order_id"] == ORDER
