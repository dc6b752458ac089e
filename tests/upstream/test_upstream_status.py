"""The one upstream status → code table (DESIGN §5), on plain values."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from capgate.v1 import procedure_pb2
from gateway.errors import Code
from gateway.upstream.state import ExecutionState, state_of
from gateway.upstream.status import MAX_PUBLIC_MESSAGE, STATUS_TABLE, map_status

S = grpc.StatusCode


def details_trailer(*details: object, message: str = "status message") -> list[tuple[str, bytes]]:
    packed = []
    for detail in details:
        item = any_pb2.Any()
        item.Pack(detail)  # type: ignore[arg-type]
        packed.append(item)
    status = status_pb2.Status(code=9, message=message, details=packed)
    return [("grpc-status-details-bin", status.SerializeToString())]


@pytest.mark.parametrize(
    ("status", "code", "state"),
    [
        (S.UNAUTHENTICATED, Code.UNAUTHENTICATED, ExecutionState.COMPLETED),
        (S.PERMISSION_DENIED, Code.FORBIDDEN, ExecutionState.COMPLETED),
        (S.DEADLINE_EXCEEDED, Code.TIMEOUT, ExecutionState.UNKNOWN),
        (S.CANCELLED, Code.CANCELLED, ExecutionState.UNKNOWN),
        (S.UNAVAILABLE, Code.UPSTREAM_UNAVAILABLE, ExecutionState.UNKNOWN),
        (S.INTERNAL, Code.EXECUTION_FAILED, ExecutionState.UNKNOWN),
        (S.UNKNOWN, Code.EXECUTION_FAILED, ExecutionState.UNKNOWN),
        (S.DATA_LOSS, Code.EXECUTION_FAILED, ExecutionState.UNKNOWN),
        (S.NOT_FOUND, Code.EXECUTION_FAILED, ExecutionState.COMPLETED),
        (S.INVALID_ARGUMENT, Code.EXECUTION_FAILED, ExecutionState.COMPLETED),
        (S.RESOURCE_EXHAUSTED, Code.EXECUTION_FAILED, ExecutionState.COMPLETED),
        (S.UNIMPLEMENTED, Code.EXECUTION_FAILED, ExecutionState.COMPLETED),
    ],
)
def test_each_status_maps_to_one_code_and_execution_state(
    status: grpc.StatusCode, code: Code, state: ExecutionState
) -> None:
    error = map_status(status, "db password=hunter2 at row 7", [], upstream="orders")
    assert error.code is code
    assert state_of(error) is state
    assert error.details["upstream_status"] == status.name
    assert "hunter2" not in error.public_message  # SI-9: the cause stays in the reason
    assert "hunter2" in (error.reason or "")
    if code is Code.EXECUTION_FAILED:
        assert error.public_message == "The operation failed."
        assert not error.exposed


def test_the_table_covers_exactly_the_designed_statuses() -> None:
    assert {s.name: c.value for s, c in STATUS_TABLE.items()} == {
        "UNAUTHENTICATED": "UNAUTHENTICATED",
        "PERMISSION_DENIED": "FORBIDDEN",
        "DEADLINE_EXCEEDED": "TIMEOUT",
        "CANCELLED": "CANCELLED",
        "UNAVAILABLE": "UPSTREAM_UNAVAILABLE",
    }


def test_unavailable_before_any_connection_did_not_start() -> None:
    details = (
        "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: "
        "Failed to connect to remote host: Connection refused"
    )
    error = map_status(S.UNAVAILABLE, details, [], upstream="orders")
    assert error.code is Code.UPSTREAM_UNAVAILABLE
    assert error.is_retryable
    assert state_of(error) is ExecutionState.NOT_STARTED
    assert not error.executed


def test_a_reply_over_the_receive_limit_is_output_invalid_after_execution() -> None:
    details = "Stream removed (CLIENT: Received message larger than max (5000 vs. 100))"
    error = map_status(S.RESOURCE_EXHAUSTED, details, [], upstream="orders")
    assert error.code is Code.OUTPUT_INVALID
    assert error.executed
    assert state_of(error) is ExecutionState.COMPLETED


def test_a_contract_error_is_exposed_with_its_public_message() -> None:
    trailer = details_trailer(
        procedure_pb2.ContractError(reason="ORDER_LOCKED", message="The order is locked.")
    )
    error = map_status(S.FAILED_PRECONDITION, "The order is locked.", trailer, upstream="o")
    assert error.code is Code.EXECUTION_FAILED
    assert error.exposed
    assert error.public_message == "The order is locked."
    assert error.details["contract_reason"] == "ORDER_LOCKED"
    assert state_of(error) is ExecutionState.COMPLETED


def test_an_error_info_message_comes_from_metadata_else_the_status_message() -> None:
    with_message = details_trailer(
        error_details_pb2.ErrorInfo(
            reason="QUOTA", domain="orders", metadata={"message": "Too many refunds today."}
        )
    )
    error = map_status(S.FAILED_PRECONDITION, "x", with_message, upstream="o")
    assert error.public_message == "Too many refunds today."
    assert error.exposed
    without = details_trailer(
        error_details_pb2.ErrorInfo(reason="QUOTA"), message="Quota exceeded."
    )
    assert map_status(S.ABORTED, "x", without, upstream="o").public_message == "Quota exceeded."


def test_public_messages_are_one_bounded_line() -> None:
    trailer = details_trailer(
        procedure_pb2.ContractError(reason="R", message="line one\nline two " + "y" * 2000)
    )
    message = map_status(S.FAILED_PRECONDITION, "", trailer, upstream="o").public_message
    assert "\n" not in message
    assert len(message) == MAX_PUBLIC_MESSAGE
    assert message.startswith("line one line two")


def test_other_details_or_garbage_are_not_contract_errors() -> None:
    unrelated = details_trailer(error_details_pb2.RetryInfo())
    assert not map_status(S.ABORTED, "x", unrelated, upstream="o").exposed
    garbage = [("grpc-status-details-bin", b"\xff\x00 not a status")]
    assert not map_status(S.ABORTED, "x", garbage, upstream="o").exposed


def test_mapped_statuses_keep_their_table_message_even_with_a_contract_detail() -> None:
    trailer = details_trailer(procedure_pb2.ContractError(reason="R", message="Nope."))
    error = map_status(S.PERMISSION_DENIED, "x", trailer, upstream="o")
    assert error.code is Code.FORBIDDEN
    assert error.public_message == "The operation is not permitted."


@pytest.mark.parametrize(
    ("details", "state"),
    [
        # grpc-core's server refusing our request headers: its handler never ran.
        ("received metadata size exceeds hard limit (value length 20000 vs. 16384)", "NOT_STARTED"),
        # Our channel refusing to send a request over its limit.
        ("Sent message larger than max (5000000 vs. 4194304)", "NOT_STARTED"),
        # Our channel refusing the reply's headers: the upstream did run.
        (
            "Stream removed (received metadata size exceeds hard limit (value length 20000 vs. "
            "16384))",
            "COMPLETED",
        ),
        ("quota exceeded", "COMPLETED"),  # the upstream's own answer
    ],
)
def test_resource_exhausted_before_any_handler_ran_is_not_started(details: str, state: str) -> None:
    error = map_status(S.RESOURCE_EXHAUSTED, details, [], upstream="orders")
    assert error.code is Code.EXECUTION_FAILED
    assert state_of(error) is ExecutionState(state)
    assert error.public_message == "The operation failed."
