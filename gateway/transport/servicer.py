"""`CapabilityGateway` over gRPC: stage 1 (transport authentication, the listener's fixed
surface) and hand-off to the pipelines. It never names a governed status code: governed failures
come back inside the envelope with RPC status OK; gRPC statuses are for transport faults only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, types_pb2
from gateway.config.settings import Listener
from gateway.errors import CapabilityError, Code
from gateway.model import Actor
from gateway.pipeline import discovery
from gateway.pipeline import runner as pipeline
from gateway.pipeline.call import Call, Runtime
from gateway.pipeline.snapshot import Snapshot
from gateway.state.approvals.convert import error_to_proto, to_proto
from gateway.transport.auth.base import AuthenticationFailed, Authenticator
from gateway.transport.auth.listeners import build_authenticator

_MAX_WAIT_S = 30.0


def metadata_value(context: grpc.aio.ServicerContext[Any, Any], key: str) -> str:
    for k, v in context.invocation_metadata() or ():
        if k == key:
            return v if isinstance(v, str) else v.decode("utf-8", "replace")
    return ""


class Stage1:
    """Stage 1 — the listener: transport auth, actor from the authenticated identity (SI-3),
    surface fixed by the listener (SI-2)."""

    def __init__(self, listener: Listener, authenticator: Authenticator):
        self.listener = listener
        self._auth = authenticator
        # Only certificate authentication reads the TLS auth context; building it per call
        # costs, so other listeners pass an empty one.
        self._tls_identity = listener.auth == "mtls"

    def rebind(self, listener: Listener) -> None:
        """Take the authenticator of `listener`: the same listener with new key material or
        claim settings (a reload). Raises ValueError, as `build_authenticator`, and then keeps
        the running one. Calls in flight finish with the authenticator they started with."""
        self._auth = build_authenticator(listener)
        self.listener = listener

    async def actor(self, context: grpc.aio.ServicerContext[Any, Any]) -> Actor:
        auth_context = context.auth_context() if self._tls_identity else {}
        try:
            return self._auth.authenticate(
                tuple(context.invocation_metadata() or ()), auth_context, context.peer()
            )
        except AuthenticationFailed as exc:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, str(exc))
            raise  # unreachable: abort raises


class CapabilityGatewayServicer(gateway_pb2_grpc.CapabilityGatewayServicer):  # type: ignore[misc]  # generated base is untyped
    def __init__(self, stage1: Stage1, snapshot: Callable[[], Snapshot], runtime: Runtime):
        self._stage1 = stage1
        self._surface = stage1.listener.surface
        self._snapshot = snapshot
        self._rt = runtime

    def _call(self, context: Any, actor: Actor, **kw: Any) -> Call:
        return Call(
            snapshot=self._snapshot(),  # one snapshot from start to end (§12)
            surface=self._surface,
            actor=actor,
            caller_remaining_s=context.time_remaining(),
            traceparent=metadata_value(context, "traceparent"),
            **kw,
        )

    async def Invoke(
        self, request: gateway_pb2.InvokeRequest, context: Any
    ) -> gateway_pb2.ExecutionResult:
        actor = await self._stage1.actor(context)
        call = self._call(
            context,
            actor,
            capability_id=request.capability_id,
            raw_input=request.input_json,
            idempotency_key=request.idempotency_key,
            correlation_id=request.correlation_id,
            metadata=dict(request.metadata),
        )
        return await pipeline.run(call, self._rt, pipeline.INVOKE)

    async def Resume(
        self, request: gateway_pb2.ResumeRequest, context: Any
    ) -> gateway_pb2.ExecutionResult:
        actor = await self._stage1.actor(context)
        call = self._call(
            context,
            actor,
            capability_id="",
            raw_input=b"",
            correlation_id=request.correlation_id,
            approval_id=request.approval_id,
        )
        return await pipeline.run(call, self._rt, pipeline.RESUME)

    async def Describe(
        self, request: gateway_pb2.DescribeRequest, context: Any
    ) -> gateway_pb2.DescribeResponse:
        actor = await self._stage1.actor(context)
        return discovery.describe(
            self._snapshot(),
            self._rt,
            surface=self._surface,
            actor=actor,
            ids=list(request.capability_ids),
        )

    async def Check(
        self, request: gateway_pb2.CheckRequest, context: Any
    ) -> gateway_pb2.CheckResponse:
        actor = await self._stage1.actor(context)
        return await discovery.check(
            self._snapshot(),
            self._rt,
            surface=self._surface,
            actor=actor,
            capability_id=request.capability_id,
            input_json=request.input_json,
            metadata=dict(request.metadata),
            full=False,
        )

    async def _own_approval(self, approval_id: str, actor: Actor) -> Any:
        store = self._rt.approvals
        if store is None:
            raise CapabilityError(Code.APPROVAL_NOT_FOUND, reason="no approval store")
        # Ownership first, inside Redis: another's approval costs what an unknown id costs (SI-8).
        record = await store.get_own(approval_id, requester=actor, surface=self._surface)
        if record is None:
            raise CapabilityError(Code.APPROVAL_NOT_FOUND, reason="unknown or not the requester's")
        return record

    def _requester_view(self, record: Any) -> types_pb2.Approval:
        """No input; an edit's patch after the capability's `redact.approval_input` (ADR 0040)."""
        redactor = self._snapshot().approval_redactor(record.capability_id)
        return to_proto(record, include_input=False, redactor=redactor)

    async def GetApproval(
        self, request: gateway_pb2.GetApprovalRequest, context: Any
    ) -> gateway_pb2.GetApprovalResponse:
        actor = await self._stage1.actor(context)
        try:
            record = await self._own_approval(request.approval_id, actor)
        except CapabilityError as err:
            return gateway_pb2.GetApprovalResponse(error=error_to_proto(err))
        return gateway_pb2.GetApprovalResponse(approval=self._requester_view(record))

    async def WaitApproval(
        self, request: gateway_pb2.WaitApprovalRequest, context: Any
    ) -> gateway_pb2.GetApprovalResponse:
        actor = await self._stage1.actor(context)
        try:
            record = await self._own_approval(request.approval_id, actor)
            if record.status == "pending":
                wait = (
                    request.timeout.ToTimedelta().total_seconds()
                    if request.HasField("timeout")
                    else _MAX_WAIT_S
                )
                remaining = context.time_remaining()
                if remaining is not None:
                    wait = min(wait, max(remaining - 0.05, 0.0))
                # A shutdown ends the wait with the approval's state as it is then (drain.py).
                waited = await self._rt.drain.or_closing(
                    self._rt.approvals.wait(request.approval_id, min(wait, _MAX_WAIT_S))
                )
                if waited is None and self._rt.drain.closing:
                    waited = await self._own_approval(request.approval_id, actor)
                record = waited or record
        except CapabilityError as err:
            return gateway_pb2.GetApprovalResponse(error=error_to_proto(err))
        return gateway_pb2.GetApprovalResponse(approval=self._requester_view(record))
