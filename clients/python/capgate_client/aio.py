"""The async client (grpc.aio): `AsyncClient` for callers, `AsyncAdminClient` for approvers.

Methods return native values and raise only `CapgateError` (for transport faults, or when an
answer carries an error); governed failures of `invoke`/`resume` are returned as `Failed` /
`Cancelled` outcomes because the gateway returns them (DESIGN §2). Deadlines are `timeout=`
seconds; cancelling the awaiting task cancels the RPC (asyncio's CancelledError propagates).
"""

from __future__ import annotations

import asyncio
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


class _AsyncBase:
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
        self._channel = self._settings.aio_channel()
        self._stub = self._stub_class(self._channel)
        self._loads = json_loads
        self._dumps = json_dumps

    async def _call(self, method: Any, request: Any, timeout: float | None) -> Any:
        try:
            return await method(
                request,
                metadata=self._settings.credentials(),
                timeout=self._settings.timeout if timeout is None else timeout,
            )
        except grpc.aio.AioRpcError as exc:
            raise CapgateError.from_rpc_error(exc) from exc

    async def close(self) -> None:
        """Close the channel; calls in flight are cancelled."""
        await self._channel.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class AsyncClient(_AsyncBase):
    """A caller of capgate's CapabilityGateway (agents, services acting for a user).

    `target` is `host:port` or `unix:/path/to/capgate.sock`; pass `token` (a bearer JWT, or a
    function returning a fresh one per call) or, on a trusted-local unix socket, `local_actor`.
    """

    _stub_class = gateway_pb2_grpc.CapabilityGatewayStub

    async def describe(
        self, capability_ids: Sequence[str] = (), *, timeout: float | None = None
    ) -> Catalog:
        """The capabilities this caller may see on this listener's surface."""
        request = gateway_pb2.DescribeRequest(capability_ids=list(capability_ids))
        return catalog_from_proto(
            await self._call(self._stub.Describe, request, timeout), self._loads
        )

    async def invoke(
        self,
        capability_id: str,
        input: Any = None,
        *,
        idempotency_key: str = "",
        correlation_id: str = "",
        metadata: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Outcome:
        """Invoke a capability with a native input; returns the envelope as an `Outcome`."""
        request = calls.invoke_request(
            capability_id,
            input,
            self._dumps,
            idempotency_key=idempotency_key,
            correlation_id=correlation_id,
            metadata=metadata,
        )
        return outcome_from_proto(
            await self._call(self._stub.Invoke, request, timeout), self._loads
        )

    async def resume(
        self, approval_id: str, *, correlation_id: str = "", timeout: float | None = None
    ) -> Outcome:
        """Run an approved call (at most once); a repeat returns the stored envelope."""
        request = gateway_pb2.ResumeRequest(approval_id=approval_id, correlation_id=correlation_id)
        return outcome_from_proto(
            await self._call(self._stub.Resume, request, timeout), self._loads
        )

    async def check(
        self,
        capability_id: str,
        input: Any = None,
        *,
        metadata: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> CheckResult:
        """Dry run up to the policies; reveals only what `invoke` would."""
        request = calls.check_request(capability_id, input, self._dumps, metadata)
        return calls.check_result(await self._call(self._stub.Check, request, timeout))

    async def get_approval(self, approval_id: str, *, timeout: float | None = None) -> Approval:
        """The requester's view of its approval (APPROVAL_NOT_FOUND for anyone else's)."""
        request = gateway_pb2.GetApprovalRequest(approval_id=approval_id)
        return calls.approval_of(
            await self._call(self._stub.GetApproval, request, timeout), self._loads
        )

    async def wait_for_approval(
        self, approval_id: str, *, timeout: float = calls.DEFAULT_WAIT_S, poll_interval: float = 1.0
    ) -> Approval:
        """Wait until the approval leaves PENDING or `timeout` seconds pass, then return it
        (check `.status`). Long-polls WaitApproval; polls GetApproval on gateways without it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        long_poll = True
        while True:
            approval: Approval | None = None
            if long_poll:
                wait_s = min(max(0.0, deadline - loop.time()), calls.WAIT_CAP_S)
                request = calls.wait_request(approval_id, wait_s)
                try:
                    answer = await self._call(
                        self._stub.WaitApproval, request, wait_s + calls.WAIT_SLACK_S
                    )
                    approval = calls.approval_of(answer, self._loads)
                except CapgateError as exc:
                    if exc.grpc_status is not grpc.StatusCode.UNIMPLEMENTED:
                        raise
                    long_poll = False
            if approval is None:
                approval = await self.get_approval(approval_id)
            left = deadline - loop.time()
            if approval.decided or left <= 0:
                return approval
            if not long_poll:
                await asyncio.sleep(min(poll_interval, left))


class AsyncAdminClient(_AsyncBase):
    """An approver's client of ApprovalAdmin (admin listeners only). Deciding executes nothing."""

    _stub_class = admin_pb2_grpc.ApprovalAdminStub

    async def list_approvals(
        self,
        *,
        statuses: Sequence[ApprovalStatus] = (),
        capability_id: str = "",
        requester_id: str = "",
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> ApprovalPage:
        """Approvals this approver may decide (default: pending), with their redacted input."""
        request = calls.list_request(statuses, capability_id, requester_id, page_size, page_token)
        answer = await self._call(self._stub.ListApprovals, request, timeout)
        return calls.approvals_page(answer, self._loads)

    async def approve(
        self,
        approval_id: str,
        input_hash: str,
        *,
        note: str = "",
        edited_input: Any = None,
        timeout: float | None = None,
    ) -> Approval:
        """Approve; `input_hash` is the hash the approver saw (a mismatch is refused). With
        `edited_input` (capabilities with approval.editable), approve that input instead: the
        gateway validates and governs it as the requester's call before storing anything. Under
        a quorum the answer may still be PENDING: see `progress`."""
        request = calls.decide_request(
            approval_id, True, input_hash, note, calls.encode(edited_input, self._dumps)
        )
        answer = await self._call(self._stub.DecideApproval, request, timeout)
        return calls.approval_of(answer, self._loads)

    async def reject(
        self, approval_id: str, input_hash: str, *, note: str = "", timeout: float | None = None
    ) -> Approval:
        request = calls.decide_request(approval_id, False, input_hash, note)
        answer = await self._call(self._stub.DecideApproval, request, timeout)
        return calls.approval_of(answer, self._loads)

    async def create_grant(
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
        """Create a standing grant: whom (`actor` or `role`), what (`capability_id` or `tag`),
        a CEL `constraint` over `input`, `expires_in` (seconds or a timedelta), optional caps.
        With `from_approval_id`, whom and what default to that approval's requester and
        capability (the approval itself is not decided)."""
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
        return calls.grant_of(await self._call(self._stub.CreateGrant, request, timeout))

    async def list_grants(
        self,
        *,
        statuses: Sequence[GrantStatus] = (),
        capability_id: str = "",
        actor_id: str = "",
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> GrantPage:
        """Grants (default: active), newest first, one page at a time."""
        request = calls.list_grants_request(
            statuses, capability_id, actor_id, page_size, page_token
        )
        return calls.grants_page(await self._call(self._stub.ListGrants, request, timeout))

    async def get_grant(self, grant_id: str, *, timeout: float | None = None) -> Grant:
        request = admin_pb2.GetGrantRequest(grant_id=grant_id)
        return calls.grant_of(await self._call(self._stub.GetGrant, request, timeout))

    async def revoke_grant(
        self, grant_id: str, *, note: str = "", timeout: float | None = None
    ) -> Grant:
        """Revoke at once, on every replica; calls it covered wait for approvals again."""
        request = admin_pb2.RevokeGrantRequest(grant_id=grant_id, note=note)
        return calls.grant_of(await self._call(self._stub.RevokeGrant, request, timeout))
