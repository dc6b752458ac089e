"""Test harness: the real example upstream, the real gateway (in-process, real listeners on
loopback), a real Redis, and clients per listener. Shared by the corpus and the other tests."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import jwt
import orjson

from capgate.v1 import admin_pb2_grpc, gateway_pb2, gateway_pb2_grpc
from examples.orders import orders_pb2, orders_pb2_grpc
from gateway.audit.sinks import MemorySink
from gateway.process.serve import Gateway

JWT_SECRET = "test-secret-0123456789-0123456789-abcdef"

ACTORS: dict[str, dict[str, Any]] = {
    "alice": {"sub": "alice", "kind": "user", "roles": ["agent"]},
    "bob": {"sub": "bob", "kind": "user", "roles": ["manager", "approver"]},
    "carol": {"sub": "carol", "kind": "user", "roles": ["manager", "approver", "agent"]},
    "root": {"sub": "root", "kind": "user", "roles": ["admin", "manager"]},
    "bot": {"sub": "bot-7", "kind": "agent", "roles": []},
    "auditor": {"sub": "audrey", "kind": "user", "roles": ["auditor"]},
}


def token(
    name: str,
    *,
    audience: str = "capgate",
    lifetime: int = 600,
    key: Any = JWT_SECRET,
    alg: str = "HS256",
    kid: str = "hs1",
    **overrides: Any,
) -> str:
    now = int(time.time())
    claims = {**ACTORS[name], "iss": "test-idp", "aud": audience, "iat": now, "exp": now + lifetime}
    claims.update(overrides)
    return jwt.encode(claims, key, algorithm=alg, headers={"kid": kid})


async def ready_ports(ready: Path, timeout_s: float = 30) -> dict[str, int]:
    """The listener ports `capgate serve --ready-file` wrote, once it did."""
    deadline = time.monotonic() + timeout_s
    while not ready.exists() and time.monotonic() < deadline:  # noqa: ASYNC110, ASYNC240
        await asyncio.sleep(0.05)
    ports: dict[str, int] = json.loads(ready.read_text())["ports"]  # noqa: ASYNC240 - small
    return ports


def local_metadata(name: str | None) -> list[tuple[str, str]]:
    if name is None:
        return []
    a = ACTORS[name]
    return [
        ("x-capgate-actor-id", a["sub"]),
        ("x-capgate-actor-kind", a["kind"]),
        ("x-capgate-actor-roles", ",".join(a["roles"])),
    ]


@dataclass
class Env:
    gw: Gateway
    audit: MemorySink
    orders_address: str
    socket_path: str
    channels: dict[str, grpc.aio.Channel] = field(default_factory=dict)

    def port(self, listener: str) -> int:
        return self.gw.ports()[listener]

    def channel(self, listener: str) -> grpc.aio.Channel:
        if listener not in self.channels:
            target = (
                f"unix:{self.socket_path}"
                if listener == "local"
                else f"127.0.0.1:{self.port(listener)}"
            )
            self.channels[listener] = grpc.aio.insecure_channel(target)
        return self.channels[listener]

    def gateway(self, listener: str = "agents") -> gateway_pb2_grpc.CapabilityGatewayStub:
        return gateway_pb2_grpc.CapabilityGatewayStub(self.channel(listener))

    def admin(self) -> admin_pb2_grpc.ApprovalAdminStub:
        return admin_pb2_grpc.ApprovalAdminStub(self.channel("admin"))

    def policy_admin(self) -> admin_pb2_grpc.PolicyAdminStub:
        return admin_pb2_grpc.PolicyAdminStub(self.channel("admin"))

    def metadata(self, listener: str, actor: str | None) -> list[tuple[str, str]]:
        if listener == "local":
            return local_metadata(actor)
        if actor is None:
            return []
        audience = "capgate-admin" if listener == "admin" else "capgate"
        return [("authorization", f"Bearer {token(actor, audience=audience)}")]

    async def invoke(
        self,
        capability: str,
        input_value: Any = None,
        *,
        actor: str | None = "alice",
        listener: str = "agents",
        raw: bytes | None = None,
        rpc_timeout: float | None = 10,
        **fields: Any,
    ) -> gateway_pb2.ExecutionResult:
        body = (
            raw if raw is not None else (b"" if input_value is None else orjson.dumps(input_value))
        )
        request = gateway_pb2.InvokeRequest(capability_id=capability, input_json=body, **fields)
        return await self.gateway(listener).Invoke(
            request, metadata=self.metadata(listener, actor), timeout=rpc_timeout
        )

    async def resume(
        self, approval_id: str, *, actor: str = "alice", listener: str = "agents"
    ) -> gateway_pb2.ExecutionResult:
        return await self.gateway(listener).Resume(
            gateway_pb2.ResumeRequest(approval_id=approval_id),
            metadata=self.metadata(listener, actor),
        )

    async def stats(self) -> orders_pb2.Stats:
        async with grpc.aio.insecure_channel(self.orders_address) as ch:
            return await orders_pb2_grpc.ControlStub(ch).GetStats(orders_pb2.GetStatsRequest())

    async def reset_upstream(self) -> None:
        async with grpc.aio.insecure_channel(self.orders_address) as ch:
            await orders_pb2_grpc.ControlStub(ch).Reset(orders_pb2.ResetRequest())

    async def upstream_calls(self, method: str | None = None) -> int:
        """Calls the upstream received (all, or those whose key ends with `method`)."""
        stats = await self.stats()
        return sum(n for key, n in stats.calls.items() if method is None or key.endswith(method))

    async def events_for(self, execution_id: str, *, settle_s: float = 1.0) -> list[dict[str, Any]]:
        """Audit events of one execution, after the background drain caught up."""
        deadline = time.monotonic() + settle_s
        audit = self.gw.runtime.audit
        while time.monotonic() < deadline:
            await audit.flush()  # type: ignore[attr-defined]
            await asyncio.sleep(0.01)
            events = [e for e in self.audit.events if e.get("execution_id") == execution_id]
            if events and terminal_events(events[-1:]):
                return events
        return [e for e in self.audit.events if e.get("execution_id") == execution_id]


TERMINAL = frozenset(
    {
        "capability.completed",
        "capability.failed",
        "capability.cancelled",
        "capability.denied",
        "capability.approval_requested",
    }
)


def terminal_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events that end an execution: completed, failed, cancelled, denied, or a suspension
    for approval (`approval_requested`; an inline approval's is not one, the call goes on)."""
    return [
        e
        for e in events
        if e["event"] in TERMINAL
        and not (e["event"] == "capability.approval_requested" and e.get("inline"))
    ]


def subset(expected: Any, actual: Any) -> bool:
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(
            k in actual and subset(v, actual[k]) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(subset(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return bool(expected == actual)
