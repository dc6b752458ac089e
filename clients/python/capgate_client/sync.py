"""The blocking facade: `Client` and `AdminClient`, the same methods as the async clients over a
plain grpc channel (for scripts and threads; prefer the async clients in asyncio code)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, ClassVar, Self

import grpc

from capgate_client import _json, calls
from capgate_client._proto import admin_pb2, admin_pb2_grpc, gateway_pb2, gateway_pb2_grpc
from capgate_client.calls import ApprovalPage, CheckResult, GrantPage, JsonDumps
from capgate_client.connection import LocalActor, Settings, Tls, Token
from capgate_client.envelope import (
    Actor,
    Approval,
    ApprovalStatus,
    Catalog,
    Grant,
    GrantStatus,
    JsonLoads,
    Outcome,
    catalog_from_proto,
    outcome_from_proto,
)
from capgate_client.errors import CapgateError


class _SyncBase:
    _stub_class: ClassVar[Any]

    def __init__(
        self,
        target: str,
        *,
        token: Token | None = None,
        local_actor: LocalActor | None = None,
        tls: Tls | bool = False,
        timeout: float | None = None,
        json_loads: JsonLoads = _json.loads,
        json_dumps: JsonDumps = _json.dumps,
    ) -> None:
        self._settings = Settings.of(
            target, token=token, local_actor=local_actor, tls=tls, timeout=timeout
        )
        self._channel = self._settings.sync_channel()
        self._stub = self._stub_class(self._channel)
        self._loads = json_loads
        self._dumps = json_dumps

    def _call(self, method: Any, request: Any, timeout: float | None) -> Any:
        try:
            return method(
                request,
                metadata=self._settings.credentials(),
                timeout=self._settings.timeout if timeout is None else timeout,
            )
        except grpc.RpcError as exc:
            raise CapgateError.from_rpc_error(exc) from exc

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Client(_SyncBase):
    """Blocking twin of `AsyncClient` (same arguments, same results)."""

    _stub_class = gateway_pb2_grpc.CapabilityGatewayStub

    def describe(
        self, capability_ids: Sequence[str] = (), *, timeout: float | None = None
    ) -> Catalog:
        request = gateway_pb2.DescribeRequest(capability_ids=list(capability_ids))
        return catalog_from_proto(self._call(self._stub.Describe, request, timeout), self._loads)

    def invoke(
        self,
        capability_id: str,
        input: Any = None,
        *,
        idempotency_key: str = "",
        correlation_id: str = "",
        metadata: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Outcome:
        request = calls.invoke_request(
            capability_id,
            input,
            self._dumps,
            idempotency_key=idempotency_key,
            correlation_id=correlation_id,
            metadata=metadata,
        )
        return outcome_from_proto(self._call(self._stub.Invoke, request, timeout), self._loads)

    def resume(
        self, approval_id: str, *, correlation_id: str = "", timeout: float | None = None
    ) -> Outcome:
        request = gateway_pb2.ResumeRequest(approval_id=approval_id, correlation_id=correlation_id)
        return outcome_from_proto(self._call(self._stub.Resume, request, timeout), self._loads)

    def check(
        self,
        capability_id: str,
        input: Any = None,
        *,
        metadata: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> CheckResult:
        request = calls.check_request(capability_id, input, self._dumps, metadata)
        return calls.check_result(self._call(self._stub.Check, request, timeout))

    def get_approval(self, approval_id: str, *, timeout: float | None = None) -> Approval:
        request = gateway_pb2.GetApprovalRequest(approval_id=approval_id)
        return calls.approval_of(self._call(self._stub.GetApproval, request, timeout), self._loads)

    def wait_for_approval(
        self, approval_id: str, *, timeout: float = calls.DEFAULT_WAIT_S, poll_interval: float = 1.0
    ) -> Approval:
        """Block until the approval leaves PENDING or `timeout` seconds pass; return it."""
        deadline = time.monotonic() + timeout
        long_poll = True
        while True:
            approval: Approval | None = None
            if long_poll:
                wait_s = min(max(0.0, deadline - time.monotonic()), calls.WAIT_CAP_S)
                request = calls.wait_request(approval_id, wait_s)
                try:
                    answer = self._call(
                        self._stub.WaitApproval, request, wait_s + calls.WAIT_SLACK_S
                    )
                    approval = calls.approval_of(answer, self._loads)
                except CapgateError as exc:
                    if exc.grpc_status is not grpc.StatusCode.UNIMPLEMENTED:
                        raise
                    long_poll = False
            if approval is None:
                approval = self.get_approval(approval_id)
            left = deadline - time.monotonic()
            if approval.decided or left <= 0:
                return approval
            if not long_poll:
                time.sleep(min(poll_interval, left))


class AdminClient(_SyncBase):
    """Blocking twin of `AsyncAdminClient`."""

    _stub_class = admin_pb2_grpc.ApprovalAdminStub

    def list_approvals(
        self,
        *,
        statuses: Sequence[ApprovalStatus] = (),
        capability_id: str = "",
        requester_id: str = "",
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> ApprovalPage:
        request = calls.list_request(statuses, capability_id, requester_id, page_size, page_token)
        return calls.approvals_page(
            self._call(self._stub.ListApprovals, request, timeout), self._loads
        )

    def approve(
        self,
        approval_id: str,
        input_hash: str,
        *,
        note: str = "",
        edited_input: Any = None,
        timeout: float | None = None,
    ) -> Approval:
        request = calls.decide_request(
            approval_id, True, input_hash, note, calls.encode(edited_input, self._dumps)
        )
        return calls.approval_of(
            self._call(self._stub.DecideApproval, request, timeout), self._loads
        )

    def reject(
        self, approval_id: str, input_hash: str, *, note: str = "", timeout: float | None = None
    ) -> Approval:
        request = calls.decide_request(approval_id, False, input_hash, note)
        return calls.approval_of(
            self._call(self._stub.DecideApproval, request, timeout), self._loads
        )

    def create_grant(
        self,
        *,
        expires_in: timedelta | float,
        actor: Actor | None = None,
        role: str = "",
        capability_id: str = "",
        tag: str = "",
        constraint: str = "",
        max_uses: int = 0,
        amount: str = "",
        max_total: float = 0.0,
        note: str = "",
        from_approval_id: str = "",
        timeout: float | None = None,
    ) -> Grant:
        request = calls.create_grant_request(
            expires_in=expires_in,
            actor=actor,
            role=role,
            capability_id=capability_id,
            tag=tag,
            constraint=constraint,
            max_uses=max_uses,
            amount=amount,
            max_total=max_total,
            note=note,
            from_approval_id=from_approval_id,
        )
        return calls.grant_of(self._call(self._stub.CreateGrant, request, timeout))

    def list_grants(
        self,
        *,
        statuses: Sequence[GrantStatus] = (),
        capability_id: str = "",
        actor_id: str = "",
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> GrantPage:
        request = calls.list_grants_request(
            statuses, capability_id, actor_id, page_size, page_token
        )
        return calls.grants_page(self._call(self._stub.ListGrants, request, timeout))

    def get_grant(self, grant_id: str, *, timeout: float | None = None) -> Grant:
        request = admin_pb2.GetGrantRequest(grant_id=grant_id)
        return calls.grant_of(self._call(self._stub.GetGrant, request, timeout))

    def revoke_grant(self, grant_id: str, *, note: str = "", timeout: float | None = None) -> Grant:
        request = admin_pb2.RevokeGrantRequest(grant_id=grant_id, note=note)
        return calls.grant_of(self._call(self._stub.RevokeGrant, request, timeout))
