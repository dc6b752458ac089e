"""capgate_client against the shared stack: the real gateway (tests/gateway/gateway.yaml), the
real example upstream and Redis, started once by `scripts/stack.py start`. Skipped, with the
reason, when `.run/stack.json` (or $CAPGATE_STACK) is absent."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from capgate_client import (
    AdminClient,
    ApprovalRequired,
    ApprovalStatus,
    AsyncAdminClient,
    AsyncClient,
    Cancelled,
    CapgateError,
    Client,
    Completed,
    ErrorCode,
    ExecutionState,
    Failed,
    LocalActor,
)
from clientkit import upstream_log

pytestmark = pytest.mark.integration


async def test_describe_lists_what_alice_may_see_and_hides_admin_capabilities(
    alice: AsyncClient,
) -> None:
    catalog = await alice.describe()
    assert "orders.get" in catalog
    assert "orders.refund" in catalog
    assert "admin.orders.purge" not in catalog  # hidden from non-admins
    assert "orders.unexposed" not in catalog
    assert catalog.revision
    refund = catalog.get("orders.refund")
    assert refund is not None
    assert refund.side_effect == "write"
    assert sorted(refund.input_schema["required"]) == ["amount", "order_id"]


async def test_an_admin_sees_the_admin_capability_others_do_not(stack: dict[str, Any]) -> None:
    async with AsyncClient(stack["agents"], token=stack["tokens"]["root"]) as root:
        assert "admin.orders.purge" in await root.describe()


async def test_invoke_completes_with_native_output_and_exact_64_bit_integers(
    alice: AsyncClient,
) -> None:
    outcome = await alice.invoke("orders.get", {"order_id": "o-1003"})
    match outcome:
        case Completed(output):
            assert output["order_id"] == "o-1003"
            assert int(output["total_cents"]) == 2**53 + 1
        case _:
            pytest.fail(f"expected completed, got {outcome!r}")
    assert outcome.capability_id == "orders.get"
    assert outcome.execution_state is ExecutionState.COMPLETED
    assert outcome.execution_id


async def test_a_refund_over_the_limit_is_denied_and_unwrap_raises_it(alice: AsyncClient) -> None:
    outcome = await alice.invoke("orders.refund", {"order_id": "o-1001", "amount": 50000})
    assert isinstance(outcome, Failed), outcome
    assert outcome.error.code is ErrorCode.POLICY_DENIED
    assert outcome.error.execution_state is ExecutionState.NOT_STARTED
    assert outcome.error.execution_id == outcome.execution_id
    with pytest.raises(CapgateError) as raised:
        outcome.unwrap()
    assert raised.value.code is ErrorCode.POLICY_DENIED


async def test_invalid_input_fails_with_input_invalid_naming_the_path(alice: AsyncClient) -> None:
    outcome = await alice.invoke("orders.refund", {"order_id": "o-1001", "amount": "x"})
    assert isinstance(outcome, Failed), outcome
    assert outcome.error.code is ErrorCode.INPUT_INVALID
    assert "$.amount" in [issue.path for issue in outcome.error.issues]


async def test_a_hidden_capability_answers_not_found(alice: AsyncClient) -> None:
    outcome = await alice.invoke("admin.orders.purge", {})
    assert isinstance(outcome, Failed), outcome
    assert outcome.error.code is ErrorCode.CAPABILITY_NOT_FOUND


async def test_approval_flow_end_to_end_runs_the_upstream_once(
    alice: AsyncClient, bob: AsyncAdminClient, stack: dict[str, Any]
) -> None:
    asked = await alice.invoke(
        "orders.refund", {"order_id": "o-1003", "amount": 800, "reason": "damaged"}
    )
    assert isinstance(asked, ApprovalRequired), asked
    approval = asked.approval
    assert approval.status is ApprovalStatus.PENDING
    assert len(approval.input_hash) == 64
    assert "manager" in approval.approver_roles

    page = await bob.list_approvals(capability_id="orders.refund")
    seen = next(a for a in page.approvals if a.id == approval.id)
    decided = await bob.approve(approval.id, seen.input_hash, note="ok")
    assert decided.status is ApprovalStatus.APPROVED

    waited = await alice.wait_for_approval(approval.id, timeout=5)
    assert waited.status is ApprovalStatus.APPROVED
    assert waited.decided_by is not None
    assert waited.decided_by.id == "bob"

    resumed = await alice.resume(approval.id)
    assert isinstance(resumed, Completed), resumed
    assert resumed.output["order_id"] == "o-1003"
    assert resumed.output["card_last4"] == "****"  # redacted before it left the gateway
    assert resumed.approval_id == approval.id
    runs = [r for r in await upstream_log(stack["orders"]) if r.approval_id == approval.id]
    assert len(runs) == 1


async def test_wait_returns_the_pending_approval_at_its_deadline_and_a_rejection_ends_it(
    alice: AsyncClient, bob: AsyncAdminClient
) -> None:
    asked = await alice.invoke("orders.refund", {"order_id": "o-1003", "amount": 600})
    assert isinstance(asked, ApprovalRequired), asked
    started = time.monotonic()
    waited = await alice.wait_for_approval(asked.approval.id, timeout=0.3)
    assert waited.status is ApprovalStatus.PENDING
    assert time.monotonic() - started < 3
    pending = await alice.resume(asked.approval.id)
    assert isinstance(pending, Failed)
    assert pending.error.code is ErrorCode.APPROVAL_PENDING

    waiting = asyncio.create_task(alice.wait_for_approval(asked.approval.id, timeout=10))
    await bob.reject(asked.approval.id, asked.approval.input_hash, note="no")
    assert (await waiting).status is ApprovalStatus.REJECTED
    rejected = await alice.resume(asked.approval.id)
    assert isinstance(rejected, Failed)
    assert rejected.error.code is ErrorCode.APPROVAL_REJECTED


async def test_a_capability_timeout_comes_back_cancelled_with_timeout(alice: AsyncClient) -> None:
    outcome = await alice.invoke("orders.cancel", {"order_id": "slow-2000"})
    assert isinstance(outcome, Cancelled), outcome
    assert outcome.error.code is ErrorCode.TIMEOUT
    assert outcome.error.execution_state is ExecutionState.UNKNOWN


async def test_cancelling_the_task_mid_flight_cancels_the_call_up_to_the_upstream(
    alice: AsyncClient, stack: dict[str, Any]
) -> None:
    key = f"py-cancel-{uuid.uuid4()}"
    call = asyncio.create_task(
        alice.invoke("orders.get", {"order_id": "slow-2000"}, idempotency_key=key)
    )
    await asyncio.sleep(0.2)
    started = time.monotonic()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):  # asyncio's convention, kept on purpose
        await call
    assert time.monotonic() - started < 0.5
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        runs = [r for r in await upstream_log(stack["orders"]) if r.idempotency_key == key]
        if runs and runs[0].cancelled:
            break
        await asyncio.sleep(0.05)
    assert [r.cancelled for r in runs] == [True], "the upstream saw its call cancelled"


async def test_a_caller_deadline_shorter_than_the_work_ends_in_timeout(alice: AsyncClient) -> None:
    # The gateway answers first (deadline minus its margin) with a cancelled envelope; if the
    # client's own deadline fires first the call raises instead. Both carry TIMEOUT.
    result: object
    try:
        result = await alice.invoke("orders.get", {"order_id": "slow-2000"}, timeout=0.4)
    except CapgateError as err:
        result = err
    if isinstance(result, Cancelled):
        result = result.error
    assert isinstance(result, CapgateError), result
    assert result.code is ErrorCode.TIMEOUT


async def test_an_idempotency_key_replays_the_recorded_result_and_refuses_other_input(
    alice: AsyncClient, stack: dict[str, Any]
) -> None:
    key = f"py-{uuid.uuid4()}"
    first = await alice.invoke("orders.get", {"order_id": "o-1004"}, idempotency_key=key)
    again = await alice.invoke("orders.get", {"order_id": "o-1004"}, idempotency_key=key)
    assert isinstance(first, Completed)
    assert isinstance(again, Completed)
    assert again.output == first.output
    assert again.execution_id == first.execution_id
    assert len([r for r in await upstream_log(stack["orders"]) if r.idempotency_key == key]) == 1
    other = await alice.invoke("orders.get", {"order_id": "o-1005"}, idempotency_key=key)
    assert isinstance(other, Failed)
    assert other.error.code is ErrorCode.IDEMPOTENCY_CONFLICT


async def test_the_correlation_id_reaches_the_upstream(
    alice: AsyncClient, stack: dict[str, Any]
) -> None:
    correlation = f"py-corr-{uuid.uuid4()}"
    outcome = await alice.invoke("orders.get", {"order_id": "o-1001"}, correlation_id=correlation)
    runs = [
        r for r in await upstream_log(stack["orders"]) if r.execution_id == outcome.execution_id
    ]
    assert [r.correlation_id for r in runs] == [correlation]


async def test_a_bad_token_raises_unauthenticated(stack: dict[str, Any]) -> None:
    async with AsyncClient(stack["agents"], token="not-a-jwt") as stranger:
        with pytest.raises(CapgateError) as raised:
            await stranger.describe()
    assert raised.value.code is ErrorCode.UNAUTHENTICATED
    assert raised.value.grpc_status is not None


async def test_trusted_local_over_the_unix_socket(stack: dict[str, Any]) -> None:
    actor = LocalActor("alice", kind="user", roles=("agent",))
    async with AsyncClient(f"unix:{stack['local_socket']}", local_actor=actor) as local:
        assert "orders.get" in await local.describe()
        outcome = await local.invoke("orders.get", {"order_id": "o-1002"})
    assert isinstance(outcome, Completed), outcome
    runs = [
        r for r in await upstream_log(stack["orders"]) if r.execution_id == outcome.execution_id
    ]
    assert [r.surface for r in runs] == ["direct"]


def test_the_blocking_facade_runs_the_approval_flow(stack: dict[str, Any]) -> None:
    with (
        Client(stack["agents"], token=stack["tokens"]["alice"], timeout=10) as alice,
        AdminClient(stack["admin"], token=stack["tokens"]["bob"], timeout=10) as bob,
    ):
        assert "orders.refund" in alice.describe()
        asked = alice.invoke("orders.refund", {"order_id": "o-1003", "amount": 700})
        assert isinstance(asked, ApprovalRequired), asked
        bob.approve(asked.approval.id, asked.approval.input_hash)
        assert alice.wait_for_approval(asked.approval.id, timeout=5).decided
        assert alice.resume(asked.approval.id).unwrap()["order_id"] == "o-1003"
