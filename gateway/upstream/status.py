"""Upstream gRPC status → governed `CapabilityError`: the one mapping table (DESIGN §5).

| upstream status                         | code                 | exposed     | state       |
|-----------------------------------------|----------------------|-------------|-------------|
| UNAUTHENTICATED                         | UNAUTHENTICATED      | yes         | COMPLETED   |
| PERMISSION_DENIED                       | FORBIDDEN            | yes         | COMPLETED   |
| DEADLINE_EXCEEDED                       | TIMEOUT              | yes         | UNKNOWN     |
| CANCELLED                               | CANCELLED            | yes         | UNKNOWN     |
| UNAVAILABLE, never connected            | UPSTREAM_UNAVAILABLE | yes         | NOT_STARTED |
| UNAVAILABLE, after connecting           | UPSTREAM_UNAVAILABLE | yes         | UNKNOWN     |
| reply over max_response_bytes (client)  | OUTPUT_INVALID       | no          | COMPLETED   |
| RESOURCE_EXHAUSTED: request over the     | EXECUTION_FAILED     | no (SI-9)   | NOT_STARTED |
|   send limit, or headers the upstream    |                      |             |             |
|   refused before its handler ran         |                      |             |             |
| any other status with a contract detail | EXECUTION_FAILED     | its message | COMPLETED   |
| INTERNAL, UNKNOWN, DATA_LOSS            | EXECUTION_FAILED     | no (SI-9)   | UNKNOWN     |
| any other status                        | EXECUTION_FAILED     | no (SI-9)   | COMPLETED   |

A contract detail is a `capgate.v1.ContractError` or a `google.rpc.ErrorInfo` in the
`grpc-status-details-bin` trailer. Its message is the upstream's declared, intentional public
message (ContractError.message, else ErrorInfo.metadata["message"], else the status message).
Everything else keeps its cause only in `CapabilityError.reason` (SI-9).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

import grpc
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2

from capgate.v1 import procedure_pb2
from gateway.errors import GENERIC_MESSAGE, CapabilityError, Code
from gateway.upstream.state import UPSTREAM_STATUS_KEY, ExecutionState, with_state

__all__ = [
    "MAX_PUBLIC_MESSAGE",
    "STATUS_TABLE",
    "map_rpc_error",
    "map_status",
]

_S = grpc.StatusCode
STATUS_TABLE: Final[Mapping[Any, Code]] = {
    _S.UNAUTHENTICATED: Code.UNAUTHENTICATED,
    _S.PERMISSION_DENIED: Code.FORBIDDEN,
    _S.DEADLINE_EXCEEDED: Code.TIMEOUT,
    _S.CANCELLED: Code.CANCELLED,
    _S.UNAVAILABLE: Code.UPSTREAM_UNAVAILABLE,
}
# No definite answer: the effect may or may not have happened.
_UNKNOWN_OUTCOME: Final = frozenset(
    {_S.DEADLINE_EXCEEDED, _S.CANCELLED, _S.UNAVAILABLE, _S.INTERNAL, _S.UNKNOWN, _S.DATA_LOSS}
)
# What grpc-core says when no connection was ever made (so nothing was sent).
_NEVER_CONNECTED: Final = ("failed to connect to all addresses", "DNS resolution failed")
_TOO_LARGE: Final = "Received message larger than max"
_NOT_SENT: Final = ("Sent message larger than max", "received metadata size exceeds")
_DETAILS_KEY: Final = "grpc-status-details-bin"
_CONTRACT: Final = procedure_pb2.ContractError.DESCRIPTOR.full_name
_ERROR_INFO: Final = error_details_pb2.ErrorInfo.DESCRIPTOR.full_name
MAX_PUBLIC_MESSAGE: Final = 500
_REASON_DETAILS: Final = 200


def map_rpc_error(error: grpc.aio.AioRpcError, *, upstream: str) -> CapabilityError:
    """The governed error for an upstream call that ended with a non-OK status."""
    return map_status(
        error.code(), error.details() or "", error.trailing_metadata() or (), upstream=upstream
    )


def map_status(
    code: Any, details: str, trailing_metadata: Iterable[tuple[str, Any]], *, upstream: str
) -> CapabilityError:
    """`map_rpc_error` on plain values (status code, details text, trailing metadata)."""
    reason = f"upstream {upstream}: {code.name}: {details[:_REASON_DETAILS]}"
    if code == _S.RESOURCE_EXHAUSTED and _TOO_LARGE in details:
        # The channel refused a reply over max_response_bytes: the upstream did answer.
        error = CapabilityError(Code.OUTPUT_INVALID, reason=reason, executed=True)
        return _tag(error, code, ExecutionState.COMPLETED)
    if code == _S.RESOURCE_EXHAUSTED and details.startswith(_NOT_SENT):
        # Refused before any handler ran: our request over the channel's send limit, or our
        # headers over the upstream's limit (grpc-core's server text; a reply's headers over
        # ours arrive as "Stream removed (…)" and stay COMPLETED below).
        return _tag(
            CapabilityError(Code.EXECUTION_FAILED, reason=reason), code, ExecutionState.NOT_STARTED
        )
    mapped = STATUS_TABLE.get(code)
    if code == _S.UNAVAILABLE and any(text in details for text in _NEVER_CONNECTED):
        state = ExecutionState.NOT_STARTED
    elif code in _UNKNOWN_OUTCOME:
        state = ExecutionState.UNKNOWN
    else:
        state = ExecutionState.COMPLETED
    if mapped is not None:
        return _tag(CapabilityError(mapped, reason=reason), code, state)
    contract = _contract_message(trailing_metadata, details)
    if contract is not None:
        message, contract_reason = contract
        error = CapabilityError(
            Code.EXECUTION_FAILED,
            message=message,
            reason=f"{reason} (contract error {contract_reason})",
            expose_to_model=True,
        )
        error.details["contract_reason"] = contract_reason
        # A declared contract error is a deliberate, definite answer.
        return _tag(error, code, ExecutionState.COMPLETED)
    # SI-9: the caller gets the generic message; the cause stays in `reason`.
    return _tag(CapabilityError(Code.EXECUTION_FAILED, reason=reason), code, state)


def _tag(error: CapabilityError, code: Any, state: ExecutionState) -> CapabilityError:
    error.details[UPSTREAM_STATUS_KEY] = code.name
    return with_state(error, state)


def _contract_message(
    trailing_metadata: Iterable[tuple[str, Any]], details: str
) -> tuple[str, str] | None:
    """(public message, machine reason) of a declared contract error, else None."""
    raw = next((value for key, value in trailing_metadata if key == _DETAILS_KEY), None)
    if not isinstance(raw, bytes):
        return None
    try:
        status = status_pb2.Status.FromString(raw)
    except DecodeError:
        return None
    fallback = status.message or details
    for detail in status.details:
        type_name = detail.type_url.rpartition("/")[2]
        try:
            if type_name == _CONTRACT:
                contract = procedure_pb2.ContractError.FromString(detail.value)
                return _public(contract.message or fallback), contract.reason
            if type_name == _ERROR_INFO:
                info = error_details_pb2.ErrorInfo.FromString(detail.value)
                return _public(info.metadata.get("message") or fallback), info.reason
        except DecodeError:
            continue
    return None


def _public(message: str) -> str:
    """A bounded, single-line public message (the upstream chose to expose it)."""
    text = " ".join(message.split())
    if len(text) > MAX_PUBLIC_MESSAGE:
        text = text[: MAX_PUBLIC_MESSAGE - 1] + "…"
    return text or GENERIC_MESSAGE
