"""`PolicyAdmin.Explain` — full policy stances, only on admin listeners (§12)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from capgate.v1 import admin_pb2, admin_pb2_grpc, gateway_pb2
from gateway.model import Actor
from gateway.pipeline import discovery
from gateway.pipeline.call import Runtime
from gateway.pipeline.snapshot import Snapshot
from gateway.transport.servicer import Stage1
from policy import Phase


class PolicyAdminServicer(admin_pb2_grpc.PolicyAdminServicer):  # type: ignore[misc]  # generated base is untyped
    def __init__(self, stage1: Stage1, snapshot: Callable[[], Snapshot], runtime: Runtime):
        self._stage1 = stage1
        self._snapshot = snapshot
        self._rt = runtime

    async def Explain(
        self, request: admin_pb2.ExplainRequest, context: Any
    ) -> gateway_pb2.CheckResponse:
        await self._stage1.actor(context)  # any authenticated admin-listener identity
        a = request.actor
        actor = Actor(
            id=a.id or "anonymous",
            kind=a.kind or ("anonymous" if not a.id else "user"),
            issuer=a.issuer,
            roles=tuple(a.roles),
        )
        phase = request.phase or "invocation"
        if phase not in ("invocation", "discovery", "execution"):
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "phase must be invocation, discovery or execution"
            )
        if phase != "invocation":
            return await discovery.explain_phase(
                self._snapshot(),
                self._rt,
                phase=Phase(phase),
                surface=request.surface or "direct",
                actor=actor,
                capability_id=request.capability_id,
                input_json=request.input_json,
            )
        return await discovery.check(
            self._snapshot(),
            self._rt,
            surface=request.surface or "direct",
            actor=actor,
            capability_id=request.capability_id,
            input_json=request.input_json,
            metadata={},
            full=True,
        )
