"""An existing MCP server that capgate governs (docs/upstreams.md "MCP upstreams"): a small
support desk written with the official MCP Python SDK, served over Streamable HTTP, speaking
both protocol eras (the SDK's session manager answers `initialize` sessions and stateless
`2026-07-28` requests alike). The demo and tests/upstream_mcp put capgate in front of it.

Tools:
- `search_tickets(query, limit)`: read-only, structured output.
- `close_ticket(ticket_id, reason)`: destructive; the config gates it behind an approval.
- `issue_credit(ticket_id, amount_cents)`: a write; a policy limits the amount.
- `broken()`: always fails (an `isError` result).
- `echo(text)`: plain text content.

`calls` counts the calls each tool received (what "exactly once" is measured against).

    python -m examples.mcp_upstream.server 127.0.0.1:8765
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

TICKETS = {
    "T-1": {"id": "T-1", "title": "Printer on fire", "status": "open", "email": "ann@example.com"},
    "T-2": {"id": "T-2", "title": "VPN drops hourly", "status": "open", "email": "bo@example.com"},
    "T-3": {
        "id": "T-3",
        "title": "Refund not received",
        "status": "open",
        "email": "cy@example.com",
    },
}


class Ticket(BaseModel):
    id: str
    title: str
    status: str
    email: str


class Found(BaseModel):
    tickets: list[Ticket]


class Closed(BaseModel):
    closed: str
    reason: str


class Credit(BaseModel):
    ticket_id: str
    amount_cents: int


def build(calls: Counter[str]) -> MCPServer:
    """The server; `calls` counts each tool's calls."""
    server: MCPServer = MCPServer("support-desk", version="1.0")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def search_tickets(
        query: str = Field(max_length=200), limit: int = Field(default=10, ge=1, le=100)
    ) -> Found:
        """Find tickets whose title contains the query."""
        calls["search_tickets"] += 1
        hits = [t for t in TICKETS.values() if query.lower() in t["title"].lower()]
        return Found(tickets=[Ticket(**t) for t in hits[:limit]])

    @server.tool(annotations=ToolAnnotations(destructiveHint=True))
    def close_ticket(ticket_id: str, reason: str) -> Closed:
        """Close a ticket for good."""
        calls["close_ticket"] += 1
        if ticket_id not in TICKETS:
            raise ToolError(f"There is no ticket {ticket_id}.")
        TICKETS[ticket_id]["status"] = "closed"
        return Closed(closed=ticket_id, reason=reason)

    @server.tool()
    def issue_credit(ticket_id: str, amount_cents: int) -> Credit:
        """Credit the customer of a ticket."""
        calls["issue_credit"] += 1
        return Credit(ticket_id=ticket_id, amount_cents=amount_cents)

    @server.tool()
    def broken() -> str:
        """Always fails."""
        calls["broken"] += 1
        raise ToolError("The desk database is\u202e unreachable:\n" + "x" * 2000)

    @server.tool(structured_output=False)
    def echo(text: str) -> str:
        """Say it back, as plain text."""
        calls["echo"] += 1
        return text

    return server


class _Recorder:
    """Keeps the headers of the last requests, and each one's HTTP method as `:method` (tests
    assert what capgate forwarded, and that it ended its session)."""

    def __init__(self, app: Any, seen: deque[dict[str, str]]) -> None:
        self.app, self.seen = app, seen

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            self.seen.append({":method": scope["method"], **headers})
        await self.app(scope, receive, send)


@dataclass
class Running:
    server: uvicorn.Server
    task: asyncio.Task[None]
    calls: Counter[str]
    headers: deque[dict[str, str]]  # of the last 100 requests

    @property
    def port(self) -> int:
        return int(self.server.servers[0].sockets[0].getsockname()[1])

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def stop(self) -> None:
        self.server.should_exit = True
        await self.task


async def serve(
    address: str = "127.0.0.1:0",
    *,
    json_response: bool = False,
    make: Callable[[Counter[str]], MCPServer] | None = None,
) -> Running:
    """Serve the desk (or what `make` builds) on `address` in this event loop (port 0: a free
    one)."""
    host, _, port = address.rpartition(":")
    calls: Counter[str] = Counter()
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*"],
        allowed_origins=[],
    )
    app = (make or build)(calls).streamable_http_app(
        json_response=json_response, transport_security=security, host=host
    )
    seen: deque[dict[str, str]] = deque(maxlen=100)
    config = uvicorn.Config(
        _Recorder(app, seen), host=host, port=int(port), log_level="warning", lifespan="on"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()  # raises why it could not start
        await asyncio.sleep(0.01)
    return Running(server, task, calls, seen)


def _main(argv: list[str]) -> Any:
    async def run() -> None:
        running = await serve(argv[1] if len(argv) > 1 else "127.0.0.1:8765")
        print(f"support desk MCP server on http://{running.address}/mcp", flush=True)
        await running.task

    asyncio.run(run())


if __name__ == "__main__":
    _main(sys.argv)
