"""The envelope as dataclasses for `match`, error codes kept, connection options (no server)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

import grpc
import pytest
from capgate_client import (
    ApprovalRequired,
    ApprovalStatus,
    AsyncClient,
    Cancelled,
    CapgateError,
    Client,
    Completed,
    Decision,
    ErrorCode,
    ExecutionState,
    Failed,
    LocalActor,
)
from capgate_client.calls import check_result, decide_request, list_request
from capgate_client.envelope import outcome_from_proto

from capgate.v1 import admin_pb2, gateway_pb2, types_pb2


def _describe(outcome: object) -> str:
    match outcome:
        case Completed(output):
            return f"completed {output}"
        case ApprovalRequired(approval):
            return f"approval {approval.id}"
        case Failed(error) | Cancelled(error):
            return f"{type(outcome).__name__.lower()} {error.code}"
    return "?"


def test_completed_matches_with_its_native_output_and_execution_fields() -> None:
    result = gateway_pb2.ExecutionResult(
        execution_id="e1",
        capability_id="orders.get",
        attempts=2,
        execution_state=types_pb2.EXECUTION_STATE_COMPLETED,
        completed=gateway_pb2.Completed(output_json='{"order_id":"o-1","n":9007199254740993}'),
    )
    result.duration.FromMilliseconds(1500)
    outcome = outcome_from_proto(result)
    assert _describe(outcome) == "completed {'order_id': 'o-1', 'n': 9007199254740993}"
    assert outcome.unwrap()["n"] == 2**53 + 1  # 64-bit integers stay exact
    assert outcome.execution_id == "e1"
    assert outcome.attempts == 2
    assert outcome.duration == timedelta(milliseconds=1500)
    assert outcome.execution_state is ExecutionState.COMPLETED


def test_failed_keeps_code_issues_and_execution_id_and_unwrap_raises_it() -> None:
    error = types_pb2.CapabilityError(
        code=types_pb2.ERROR_CODE_INPUT_INVALID,
        stage="input-validation",
        message="The input is invalid.",
        expose_to_model=True,
        issues=[types_pb2.Issue(path="$.amount", message="must be a number")],
        execution_state=types_pb2.EXECUTION_STATE_NOT_STARTED,
    )
    outcome = outcome_from_proto(gateway_pb2.ExecutionResult(execution_id="e2", failed=error))
    assert _describe(outcome) == "failed INPUT_INVALID"
    with pytest.raises(CapgateError) as raised:
        outcome.unwrap()
    err = raised.value
    assert err.code is ErrorCode.INPUT_INVALID
    assert err.code == "INPUT_INVALID"  # a StrEnum: compares with the JSON/MCP name
    assert [(i.path, i.message) for i in err.issues] == [("$.amount", "must be a number")]
    assert err.execution_id == "e2"
    assert err.execution_state is ExecutionState.NOT_STARTED
    assert err.grpc_status is None
    assert "The input is invalid." in str(err)


def test_approval_required_is_native_and_unwrap_raises_approval_pending() -> None:
    approval = types_pb2.Approval(
        id="apr-1",
        status=types_pb2.APPROVAL_STATUS_PENDING,
        input_hash="ab" * 32,
        approvers=types_pb2.ApproverConstraint(roles=["manager"]),
        requester=types_pb2.Actor(id="alice", issuer="idp", kind="user", roles=["agent"]),
    )
    approval.created_at.FromSeconds(1_700_000_000)
    outcome = outcome_from_proto(
        gateway_pb2.ExecutionResult(
            approval_required=gateway_pb2.ApprovalRequired(approval=approval)
        )
    )
    assert _describe(outcome) == "approval apr-1"
    assert isinstance(outcome, ApprovalRequired)
    assert outcome.approval.status is ApprovalStatus.PENDING
    assert not outcome.approval.decided
    assert outcome.approval.approver_roles == ("manager",)
    assert outcome.approval.created_at == datetime.fromtimestamp(1_700_000_000, UTC)
    assert outcome.approval.requester is not None
    assert outcome.approval.requester.roles == ("agent",)
    assert outcome.approval.decided_at is None
    assert outcome.approval.input is None
    with pytest.raises(CapgateError) as raised:
        outcome.unwrap()
    assert raised.value.code is ErrorCode.APPROVAL_PENDING


def test_cancelled_is_its_own_kind() -> None:
    error = types_pb2.CapabilityError(code=types_pb2.ERROR_CODE_TIMEOUT)
    assert _describe(outcome_from_proto(gateway_pb2.ExecutionResult(cancelled=error))) == (
        "cancelled TIMEOUT"
    )


def test_an_envelope_without_an_outcome_is_a_protocol_fault() -> None:
    with pytest.raises(CapgateError):
        outcome_from_proto(gateway_pb2.ExecutionResult(execution_id="e"))


@pytest.mark.parametrize(
    ("enum", "proto_enum", "prefix"),
    [
        (ErrorCode, types_pb2.ErrorCode, "ERROR_CODE_"),
        (ExecutionState, types_pb2.ExecutionState, "EXECUTION_STATE_"),
        (ApprovalStatus, types_pb2.ApprovalStatus, "APPROVAL_STATUS_"),
        (Decision, types_pb2.Decision, "DECISION_"),
    ],
)
def test_native_enums_match_the_proto_enums_exactly(
    enum: type[StrEnum], proto_enum: Any, prefix: str
) -> None:
    assert [m.value for m in enum] == [n.removeprefix(prefix) for n in proto_enum.keys()]  # noqa: SIM118 — an EnumTypeWrapper, not a dict


def test_an_unknown_code_from_a_newer_gateway_reads_as_unspecified() -> None:
    assert ErrorCode.from_proto(999) is ErrorCode.UNSPECIFIED


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (grpc.StatusCode.DEADLINE_EXCEEDED, ErrorCode.TIMEOUT),
        (grpc.StatusCode.CANCELLED, ErrorCode.CANCELLED),
        (grpc.StatusCode.UNAUTHENTICATED, ErrorCode.UNAUTHENTICATED),
        (grpc.StatusCode.PERMISSION_DENIED, ErrorCode.FORBIDDEN),
        (grpc.StatusCode.UNAVAILABLE, ErrorCode.UNSPECIFIED),
    ],
)
def test_transport_faults_keep_their_status_and_map_to_the_governed_code(
    status: grpc.StatusCode, code: ErrorCode
) -> None:
    class Fault(grpc.RpcError):
        def code(self) -> grpc.StatusCode:
            return status

        def details(self) -> str:
            return "boom"

    err = CapgateError.from_rpc_error(Fault())
    assert err.code is code
    assert err.grpc_status is status
    assert err.retryable is (status is grpc.StatusCode.UNAVAILABLE)


def test_check_and_admin_requests_round_trip_their_enums() -> None:
    answer = gateway_pb2.CheckResponse(
        decision=types_pb2.DECISION_REQUIRE_APPROVAL, approval_reasons=["over 500"]
    )
    result = check_result(answer)
    assert result.decision is Decision.REQUIRE_APPROVAL
    assert result.error is None
    assert result.approval_reasons == ("over 500",)
    listing = list_request([ApprovalStatus.APPROVED], "orders.refund", "", 10, "")
    assert list(listing.statuses) == [types_pb2.APPROVAL_STATUS_APPROVED]
    assert decide_request("a", False, "h", "").verdict == admin_pb2.VERDICT_REJECT


def test_a_token_and_a_local_actor_together_are_refused() -> None:
    with pytest.raises(ValueError, match="either"):
        Client("unix:/tmp/x.sock", token="t", local_actor=LocalActor("a"))


def test_trusted_local_metadata_is_refused_on_a_tcp_target() -> None:
    with pytest.raises(ValueError, match="unix"):
        Client("127.0.0.1:1", local_actor=LocalActor("a"))


def test_an_unreachable_gateway_raises_a_retryable_capgate_error() -> None:
    with Client("127.0.0.1:1", token="t", timeout=2) as client, pytest.raises(CapgateError) as e:
        client.describe()
    assert e.value.grpc_status is grpc.StatusCode.UNAVAILABLE
    assert e.value.retryable


async def test_a_token_function_is_called_for_every_call() -> None:
    calls: list[int] = []

    def token() -> str:
        calls.append(1)
        return "t"

    async with AsyncClient("127.0.0.1:1", token=token, timeout=1) as client:
        for _ in range(2):
            with pytest.raises(CapgateError):
                await client.describe()
    assert len(calls) == 2
