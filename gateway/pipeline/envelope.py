"""Builds the normalized envelope (`ExecutionResult`) and error messages. Only the pipeline
runner calls `failure`; stages raise `CapabilityError` instead (STYLE principle 2)."""

from __future__ import annotations

from capgate.v1 import gateway_pb2, types_pb2
from gateway.errors import CapabilityError, Code, Kind

State = types_pb2.ExecutionState

ERROR_CODES = {code: types_pb2.ErrorCode.Value(f"ERROR_CODE_{code.value}") for code in Code}

# SI-8 (DESIGN §12): a concealed answer equals the not-found answer except `execution_id`, with
# `duration` omitted. Every answer with one of these codes omits it — the genuine not-found too,
# so that the concealed one has nothing to differ in (nor a time to be told apart by).
NOT_FOUND: frozenset[Code] = frozenset({Code.CAPABILITY_NOT_FOUND, Code.APPROVAL_NOT_FOUND})


def error_proto(
    err: CapabilityError, state: State, *, rerun_safe: bool = False
) -> types_pb2.CapabilityError:
    """`rerun_safe`: running the capability again cannot repeat an effect (side effect
    none/read, or declared idempotent). After an UNKNOWN outcome the call may have taken effect,
    so `retryable` is only ever true then when a re-run is safe (DESIGN §12: UNKNOWN is never
    re-run automatically; a client that follows `retryable` must not repeat a write)."""
    msg = types_pb2.CapabilityError(
        code=ERROR_CODES[err.code],
        stage=err.spec.stage,
        message=err.public_message,
        retryable=err.is_retryable and (state != types_pb2.EXECUTION_STATE_UNKNOWN or rerun_safe),
        expose_to_model=err.exposed,
        executed_before_failure=err.executed,
        execution_state=state,
    )
    if err.code is Code.INPUT_INVALID:
        msg.issues.extend(types_pb2.Issue(path=i.path, message=i.message) for i in err.issues)
    if err.retry_after_s is not None:
        msg.retry_after.FromNanoseconds(max(0, round(err.retry_after_s * 1e9)))
    return msg


def failure(
    err: CapabilityError,
    *,
    execution_id: str,
    capability_id: str,
    attempts: int,
    duration_s: float | None,
    state: State,
    revision: str,
    approval_id: str = "",
    rerun_safe: bool = False,
) -> gateway_pb2.ExecutionResult:
    result = gateway_pb2.ExecutionResult(
        execution_id=execution_id,
        capability_id=capability_id,
        attempts=attempts,
        execution_state=state,
        revision=revision,
        approval_id=approval_id,
    )
    if duration_s is not None and err.code not in NOT_FOUND:
        result.duration.FromNanoseconds(int(duration_s * 1e9))
    target = result.cancelled if err.spec.kind is Kind.CANCELLED else result.failed
    target.CopyFrom(error_proto(err, state, rerun_safe=rerun_safe))
    return result


def completed(
    *,
    execution_id: str,
    capability_id: str,
    attempts: int,
    duration_s: float,
    output_json: str,
    revision: str,
    approval_id: str = "",
) -> gateway_pb2.ExecutionResult:
    result = gateway_pb2.ExecutionResult(
        execution_id=execution_id,
        capability_id=capability_id,
        attempts=attempts,
        execution_state=types_pb2.EXECUTION_STATE_COMPLETED,
        revision=revision,
        approval_id=approval_id,
    )
    result.duration.FromNanoseconds(int(duration_s * 1e9))
    result.completed.output_json = output_json
    return result


def approval_required(
    *,
    execution_id: str,
    capability_id: str,
    duration_s: float,
    revision: str,
    approval: types_pb2.Approval,
) -> gateway_pb2.ExecutionResult:
    """Stage 8 suspended the call: nothing was sent upstream (NOT_STARTED)."""
    result = gateway_pb2.ExecutionResult(
        execution_id=execution_id,
        capability_id=capability_id,
        execution_state=types_pb2.EXECUTION_STATE_NOT_STARTED,
        revision=revision,
    )
    result.duration.FromNanoseconds(int(duration_s * 1e9))
    result.approval_required.approval.CopyFrom(approval)
    return result
