"""Errors that keep capgate's `ErrorCode`.

Governed failures come back inside the envelope (`Failed` / `Cancelled`), never as an RPC status:
the gateway answers them with status OK (DESIGN §2). Transport faults (bad credentials, a deadline
on this side, the gateway unreachable) are raised. Both are `CapgateError`, so callers handle one
type; `grpc_status` tells a transport fault apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, TypeVar

import grpc

from capgate_client._proto import types_pb2


class ErrorCode(StrEnum):
    """The stable codes: the proto enum without its `ERROR_CODE_` prefix (as JSON and MCP use)."""

    UNSPECIFIED = "UNSPECIFIED"
    CAPABILITY_NOT_FOUND = "CAPABILITY_NOT_FOUND"
    INPUT_INVALID = "INPUT_INVALID"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    FORBIDDEN = "FORBIDDEN"
    POLICY_DENIED = "POLICY_DENIED"
    POLICY_FAILED = "POLICY_FAILED"
    APPROVAL_UNSERIALIZABLE_INPUT = "APPROVAL_UNSERIALIZABLE_INPUT"
    APPROVAL_PENDING = "APPROVAL_PENDING"
    APPROVAL_REJECTED = "APPROVAL_REJECTED"
    APPROVAL_EXPIRED = "APPROVAL_EXPIRED"
    APPROVAL_CONSUMED = "APPROVAL_CONSUMED"
    APPROVAL_INPUT_MISMATCH = "APPROVAL_INPUT_MISMATCH"
    APPROVAL_SELF_APPROVAL = "APPROVAL_SELF_APPROVAL"
    AUDIT_UNAVAILABLE = "AUDIT_UNAVAILABLE"
    EXECUTION_FAILED = "EXECUTION_FAILED"
    TIMEOUT = "TIMEOUT"
    CANCELLED = "CANCELLED"
    OUTPUT_INVALID = "OUTPUT_INVALID"
    APPROVAL_UNAVAILABLE = "APPROVAL_UNAVAILABLE"
    APPROVAL_NOT_FOUND = "APPROVAL_NOT_FOUND"
    IDEMPOTENCY_CONFLICT = "IDEMPOTENCY_CONFLICT"
    IDEMPOTENCY_IN_PROGRESS = "IDEMPOTENCY_IN_PROGRESS"
    INPUT_TOO_LARGE = "INPUT_TOO_LARGE"
    UPSTREAM_UNAVAILABLE = "UPSTREAM_UNAVAILABLE"
    APPROVAL_ALREADY_DECIDED = "APPROVAL_ALREADY_DECIDED"
    APPROVAL_LIMIT_EXCEEDED = "APPROVAL_LIMIT_EXCEEDED"
    RATE_LIMITED = "RATE_LIMITED"
    HOOK_FAILED = "HOOK_FAILED"
    HOOK_DENIED = "HOOK_DENIED"

    @classmethod
    def from_proto(cls, value: int) -> ErrorCode:
        """The code of a proto enum value; UNSPECIFIED for a value this client does not know."""
        return _by_number(cls, types_pb2.ErrorCode, value, "ERROR_CODE_")


class ExecutionState(StrEnum):
    """Whether the upstream effect happened (UNKNOWN: never re-run automatically)."""

    UNSPECIFIED = "UNSPECIFIED"
    NOT_STARTED = "NOT_STARTED"
    COMPLETED = "COMPLETED"
    UNKNOWN = "UNKNOWN"

    @classmethod
    def from_proto(cls, value: int) -> ExecutionState:
        return _by_number(cls, types_pb2.ExecutionState, value, "EXECUTION_STATE_")


_E = TypeVar("_E", bound=StrEnum)


def _by_number(enum: type[_E], proto_enum: Any, value: int, prefix: str) -> _E:
    try:
        name = str(proto_enum.Name(value)).removeprefix(prefix)
    except ValueError:
        name = "UNSPECIFIED"
    return enum(name) if name in enum.__members__ else enum("UNSPECIFIED")


@dataclass(frozen=True, slots=True)
class Issue:
    """One input-validation problem (INPUT_INVALID only): a JSON path and a value-free message."""

    path: str
    message: str


class CapgateError(Exception):
    """A capgate failure with its governed `code`.

    `grpc_status` is set only for transport faults; `code` is then the nearest governed code
    (TIMEOUT for a deadline, CANCELLED, UNAUTHENTICATED, FORBIDDEN) or UNSPECIFIED.
    `retry_after` (seconds) is set for RATE_LIMITED: the earliest time from now at which the
    same call can pass the limit that refused it; None otherwise.
    """

    def __init__(
        self,
        code: ErrorCode,
        message: str = "",
        *,
        stage: str = "",
        retryable: bool = False,
        expose_to_model: bool = False,
        issues: Sequence[Issue] = (),
        executed_before_failure: bool = False,
        execution_state: ExecutionState = ExecutionState.UNKNOWN,
        execution_id: str = "",
        grpc_status: grpc.StatusCode | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}" if message else str(code))
        self.code = code
        self.message = message
        self.stage = stage
        self.retryable = retryable
        self.expose_to_model = expose_to_model
        self.issues = tuple(issues)
        self.executed_before_failure = executed_before_failure
        self.execution_state = execution_state
        self.execution_id = execution_id
        self.grpc_status = grpc_status
        self.retry_after = retry_after

    @classmethod
    def from_proto(cls, error: Any, execution_id: str = "") -> CapgateError:
        """From a `capgate.v1.CapabilityError` of an envelope or an answer."""
        return cls(
            ErrorCode.from_proto(error.code),
            error.message,
            stage=error.stage,
            retryable=error.retryable,
            expose_to_model=error.expose_to_model,
            issues=[Issue(i.path, i.message) for i in error.issues],
            executed_before_failure=error.executed_before_failure,
            execution_state=ExecutionState.from_proto(error.execution_state),
            execution_id=execution_id,
            retry_after=(
                error.retry_after.ToNanoseconds() / 1e9 if error.HasField("retry_after") else None
            ),
        )

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> CapgateError:
        """From a failed RPC (a transport fault)."""
        status: grpc.StatusCode = error.code()
        code, stage, state = _TRANSPORT.get(
            status, (ErrorCode.UNSPECIFIED, "transport", ExecutionState.UNKNOWN)
        )
        return cls(
            code,
            error.details() or status.name,
            stage=stage,
            retryable=status is grpc.StatusCode.UNAVAILABLE,
            execution_state=state,
            grpc_status=status,
        )


# A deadline or a cancellation may strike after the upstream ran, so the effect is UNKNOWN; an
# authentication refusal happens before anything ran.
_TRANSPORT: Final[dict[grpc.StatusCode, tuple[ErrorCode, str, ExecutionState]]] = {
    grpc.StatusCode.CANCELLED: (ErrorCode.CANCELLED, "cancellation", ExecutionState.UNKNOWN),
    grpc.StatusCode.DEADLINE_EXCEEDED: (ErrorCode.TIMEOUT, "timeout", ExecutionState.UNKNOWN),
    grpc.StatusCode.UNAUTHENTICATED: (
        ErrorCode.UNAUTHENTICATED,
        "authentication",
        ExecutionState.NOT_STARTED,
    ),
    grpc.StatusCode.PERMISSION_DENIED: (
        ErrorCode.FORBIDDEN,
        "authorization",
        ExecutionState.NOT_STARTED,
    ),
}
