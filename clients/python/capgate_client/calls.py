"""Request building and answer reading shared by the async client and its sync facade."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any, Final, TypeAlias

from google.protobuf import duration_pb2

from capgate_client import _json
from capgate_client._proto import admin_pb2, gateway_pb2, types_pb2
from capgate_client.envelope import (
    Actor,
    Approval,
    ApprovalStatus,
    Grant,
    GrantStatus,
    JsonLoads,
    approval_from_proto,
    grant_from_proto,
)
from capgate_client.errors import CapgateError, _by_number

JsonDumps: TypeAlias = Callable[[Any], bytes]

WAIT_CAP_S: Final = 30.0  # the gateway caps one WaitApproval at 30 s; longer waits loop
WAIT_SLACK_S: Final = 5.0  # extra deadline so that the gateway's answer arrives first
DEFAULT_WAIT_S: Final = 60.0


class Decision(StrEnum):
    """A policy outcome; precedence DENY > HIDE > REQUIRE_APPROVAL > ALLOW."""

    UNSPECIFIED = "UNSPECIFIED"
    ALLOW = "ALLOW"
    REQUIRE_APPROVAL = "REQUIRE_APPROVAL"
    HIDE = "HIDE"
    DENY = "DENY"


@dataclass(frozen=True, slots=True)
class CheckResult:
    """A dry run of the pipeline up to the policies; reveals only what `invoke` would."""

    decision: Decision
    error: CapgateError | None  # what invoke would answer when neither ALLOW nor approval
    approval_reasons: tuple[str, ...]
    revision: str
    # With REQUIRE_APPROVAL: the live grant invoke would use instead of asking (a check uses
    # nothing); empty when none applies now.
    grant_id: str = ""


def encode(value: Any, dumps: JsonDumps) -> bytes:
    """Native input → JSON bytes; None means no input ({})."""
    return b"" if value is None else dumps(value)


def invoke_request(
    capability_id: str,
    value: Any,
    dumps: JsonDumps,
    *,
    idempotency_key: str,
    correlation_id: str,
    metadata: Mapping[str, str] | None,
) -> Any:
    return gateway_pb2.InvokeRequest(
        capability_id=capability_id,
        input_json=encode(value, dumps),
        idempotency_key=idempotency_key,
        correlation_id=correlation_id,
        metadata=dict(metadata or {}),
    )


def check_request(
    capability_id: str, value: Any, dumps: JsonDumps, metadata: Mapping[str, str] | None
) -> Any:
    return gateway_pb2.CheckRequest(
        capability_id=capability_id, input_json=encode(value, dumps), metadata=dict(metadata or {})
    )


def check_result(r: Any) -> CheckResult:
    return CheckResult(
        decision=_by_number(Decision, types_pb2.Decision, r.decision, "DECISION_"),
        error=CapgateError.from_proto(r.error) if r.HasField("error") else None,
        approval_reasons=tuple(r.approval_reasons),
        revision=r.revision,
        grant_id=r.grant_id,
    )


def wait_request(approval_id: str, wait_s: float) -> Any:
    timeout = duration_pb2.Duration()
    timeout.FromMilliseconds(int(wait_s * 1000))
    return gateway_pb2.WaitApprovalRequest(approval_id=approval_id, timeout=timeout)


def approval_of(r: Any, loads: JsonLoads = _json.loads) -> Approval:
    """The approval of an answer that carries `approval` or `error`; raises the error."""
    if r.HasField("error"):
        raise CapgateError.from_proto(r.error)
    return approval_from_proto(r.approval, loads)


def list_request(
    statuses: Sequence[ApprovalStatus],
    capability_id: str,
    requester_id: str,
    page_size: int,
    page_token: str,
) -> Any:
    numbers: list[Any] = [s.to_proto() for s in statuses]  # enum numbers, as protobuf takes
    return admin_pb2.ListApprovalsRequest(
        statuses=numbers,
        capability_id=capability_id,
        requester_id=requester_id,
        page_size=page_size,
        page_token=page_token,
    )


def decide_request(
    approval_id: str, approve: bool, input_hash: str, note: str, edited_input: bytes = b""
) -> Any:
    verdict = admin_pb2.VERDICT_APPROVE if approve else admin_pb2.VERDICT_REJECT
    return admin_pb2.DecideApprovalRequest(
        approval_id=approval_id,
        verdict=verdict,
        input_hash=input_hash,
        note=note,
        edited_input_json=edited_input,
    )


@dataclass(frozen=True, slots=True)
class ApprovalPage:
    """One page of `list_approvals`; pass `next_page_token` back for the next one."""

    approvals: tuple[Approval, ...]
    next_page_token: str


def approvals_page(r: Any, loads: JsonLoads) -> ApprovalPage:
    if r.HasField("error"):
        raise CapgateError.from_proto(r.error)
    return ApprovalPage(
        tuple(approval_from_proto(a, loads) for a in r.approvals), r.next_page_token
    )


@dataclass(frozen=True, slots=True)
class GrantPage:
    """One page of `list_grants`; pass `next_page_token` back for the next one."""

    grants: tuple[Grant, ...]
    next_page_token: str


def create_grant_request(
    *,
    expires_in: timedelta | float,
    actor: Actor | None,
    role: str,
    capability_id: str,
    tag: str,
    constraint: str,
    max_uses: int,
    amount: str,
    max_total: float,
    note: str,
    from_approval_id: str,
) -> Any:
    seconds = expires_in.total_seconds() if isinstance(expires_in, timedelta) else expires_in
    duration = duration_pb2.Duration()
    duration.FromMilliseconds(int(seconds * 1000))
    whom = types_pb2.Actor(id=actor.id, issuer=actor.issuer, kind=actor.kind) if actor else None
    return admin_pb2.CreateGrantRequest(
        actor=whom,
        role=role,
        capability_id=capability_id,
        tag=tag,
        constraint=constraint,
        expires_in=duration,
        max_uses=max_uses,
        amount=amount,
        max_total=max_total,
        note=note,
        from_approval_id=from_approval_id,
    )


def list_grants_request(
    statuses: Sequence[GrantStatus],
    capability_id: str,
    actor_id: str,
    page_size: int,
    page_token: str,
) -> Any:
    numbers: list[Any] = [s.to_proto() for s in statuses]
    return admin_pb2.ListGrantsRequest(
        statuses=numbers,
        capability_id=capability_id,
        actor_id=actor_id,
        page_size=page_size,
        page_token=page_token,
    )


def grant_of(r: Any) -> Grant:
    """The grant of a GrantResponse; raises its error."""
    if r.HasField("error"):
        raise CapgateError.from_proto(r.error)
    return grant_from_proto(r.grant)


def grants_page(r: Any) -> GrantPage:
    if r.HasField("error"):
        raise CapgateError.from_proto(r.error)
    return GrantPage(tuple(grant_from_proto(g) for g in r.grants), r.next_page_token)
