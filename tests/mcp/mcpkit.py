"""Helpers of the MCP tests: the official MCP Python SDK as the client over real HTTP, raw
HTTP requests for what the SDK never sends (bad Host, Origin, tokens), and the admin side."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import grpc
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from capgate.v1 import admin_pb2, admin_pb2_grpc
from examples.orders import orders_pb2, orders_pb2_grpc
from gateway.audit.sinks import MemorySink
from gateway.process.serve import Gateway
from tests.gateway.harness import terminal_events, token

AUDIENCE = "capgate-mcp"
PROTOCOL = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


def bearer(actor: str, **claims: Any) -> str:
    return f"Bearer {token(actor, audience=AUDIENCE, **claims)}"


@dataclass
class McpEnv:
    gw: Gateway
    audit: MemorySink
    orders_address: str
    _admin: grpc.aio.Channel | None = field(default=None)

    @property
    def port(self) -> int:
        return self.gw.ports()["mcp"]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @asynccontextmanager
    async def client(self, actor: str = "alice", mode: str = "auto") -> AsyncIterator[Client]:
        """The SDK's high-level client over Streamable HTTP with `actor`'s bearer token;
        `mode="auto"` adopts the stateless 2026-07-28 revision, `"legacy"` the handshake."""
        headers = {"authorization": bearer(actor)}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=20) as http,
            Client(streamable_http_client(self.url, http_client=http), mode=mode) as client,
        ):
            yield client

    @asynccontextmanager
    async def http(self) -> AsyncIterator[httpx2.AsyncClient]:
        async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{self.port}", timeout=20) as c:
            yield c

    async def initialize(self, http: httpx2.AsyncClient, actor: str = "alice") -> str:
        """A raw initialize; the session id it opened."""
        response = await http.post(
            "/mcp",
            json=initialize_body(),
            headers={"authorization": bearer(actor), "accept": ACCEPT},
        )
        assert response.status_code == 200, response.text
        return str(response.headers["mcp-session-id"])

    async def approve(self, approval_id: str, by: str = "bob") -> admin_pb2.DecideApprovalResponse:
        """An approver decides through ApprovalAdmin on the admin gRPC listener."""
        if self._admin is None:
            self._admin = grpc.aio.insecure_channel(f"127.0.0.1:{self.gw.ports()['admin']}")
        admin = admin_pb2_grpc.ApprovalAdminStub(self._admin)
        md = [("authorization", f"Bearer {token(by, audience='capgate-admin')}")]
        listed = await admin.ListApprovals(admin_pb2.ListApprovalsRequest(), metadata=md)
        seen = next(a for a in listed.approvals if a.id == approval_id)
        return await admin.DecideApproval(
            admin_pb2.DecideApprovalRequest(
                approval_id=approval_id,
                verdict=admin_pb2.VERDICT_APPROVE,
                note="ok",
                input_hash=seen.input_hash,
            ),
            metadata=md,
        )

    async def upstream_calls(self, method: str) -> int:
        async with grpc.aio.insecure_channel(self.orders_address) as ch:
            stats = await orders_pb2_grpc.ControlStub(ch).GetStats(orders_pb2.GetStatsRequest())
        return sum(n for key, n in stats.calls.items() if key.endswith(method))

    async def mark(self) -> int:
        """The trail's length once every event emitted so far has been written."""
        await self.gw.runtime.audit.flush()  # type: ignore[attr-defined]
        return len(self.audit.events)

    async def executions_since(
        self, mark: int, *, settle_s: float = 5.0
    ) -> dict[str, list[dict[str, Any]]]:
        """Events of every execution whose `capability.requested` came after event `mark`,
        once each has its terminal event (or `settle_s` passed: the caller asserts)."""
        deadline = time.monotonic() + settle_s
        while True:
            await self.gw.runtime.audit.flush()  # type: ignore[attr-defined]
            new = self.audit.events[mark:]
            ids = [e["execution_id"] for e in new if e["event"] == "capability.requested"]
            found = {i: [e for e in new if e.get("execution_id") == i] for i in ids}
            settled = all(terminal_events(events) for events in found.values())
            if (ids and settled) or time.monotonic() > deadline:
                return found
            await asyncio.sleep(0.01)  # the audit writer is a background task

    async def close(self) -> None:
        if self._admin is not None:
            await self._admin.close()


def initialize_body(version: str = PROTOCOL) -> dict[str, Any]:
    """A raw handshake-era `initialize` request."""
    params = {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    }
    return request(1, "initialize", params)


def request(message_id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": message_id, "method": method, "params": params or {}}


def session_headers(session_id: str, actor: str = "alice", **extra: str) -> dict[str, str]:
    return {
        "authorization": bearer(actor),
        "accept": ACCEPT,
        "mcp-session-id": session_id,
        "mcp-protocol-version": PROTOCOL,
        **extra,
    }
