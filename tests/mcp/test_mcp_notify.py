"""A handshake-era session's GET stream: a pending approval asked for on the session is
announced once decided, any gateway process serves the stream, and `Last-Event-ID` resumes it
(gateway/transport/mcp/notify.py)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import pytest

from tests.mcp.mcpkit import McpEnv, request, session_headers
from tests.mcp.test_mcp_sessions import two_gateways  # noqa: F401 - the fixture

pytestmark = pytest.mark.integration

SSE = "text/event-stream"


async def _events(
    http: httpx2.AsyncClient, base: str, session: str, *, last: str | None, until: int
) -> list[dict[str, Any]]:
    """The events of one GET stream (the priming one included) until `until` have arrived or
    the server ends the stream; bounded by the client timeout."""
    headers = {**session_headers(session), "accept": SSE}
    if last is not None:
        headers["last-event-id"] = last
    found: list[dict[str, Any]] = []
    async with http.stream("GET", f"{base}/mcp", headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith(SSE)
        block: dict[str, Any] = {}
        async for line in response.aiter_lines():
            if line == "":
                if block:
                    found.append(block)
                    block = {}
                if len(found) >= until:
                    break
                continue
            name, _, value = line.partition(": ")
            block[name.rstrip(":")] = value
    return found


async def _ask_approval(http: httpx2.AsyncClient, base: str, session: str, amount: int) -> str:
    args = {"order_id": "o-1003", "amount": amount}
    asked = await http.post(
        f"{base}/mcp",
        json=request(7, "tools/call", {"name": "orders_refund", "arguments": args}),
        headers=session_headers(session),
    )
    structured = asked.json()["result"]["structuredContent"]
    assert structured["status"] == "approval_required"
    return str(structured["approval_id"])


async def test_a_decided_approval_is_announced_and_the_stream_resumes(mcp_env: McpEnv) -> None:
    async with mcp_env.http() as http:
        base = ""  # the client's base URL: this gateway's listener
        session = await mcp_env.initialize(http)
        approval_id = await _ask_approval(http, base, session, 901)
        listening = asyncio.create_task(_events(http, base, session, last=None, until=2))
        await asyncio.sleep(0.2)
        await mcp_env.approve(approval_id, by="bob")
        priming, announced = await asyncio.wait_for(listening, 15)
        assert priming["data"] == "" and priming["retry"] == "2000"
        note = json.loads(announced["data"])
        assert note == {
            "jsonrpc": "2.0",
            "method": "notifications/capgate/approval_decided",
            "params": {"approval_id": approval_id, "status": "approved"},
        }
        # Resumed after the priming event: the announcement again, with its id.
        (_, replayed) = await _events(http, base, session, last=priming["id"], until=2)
        assert replayed["id"] == announced["id"]
        assert replayed["data"] == announced["data"]
        # Resumed after the announcement: nothing again, never twice.
        later = asyncio.create_task(_events(http, base, session, last=announced["id"], until=2))
        done, _ = await asyncio.wait({later}, timeout=2.5)
        assert not done  # only the priming event within two polls
        later.cancel()
        # Another actor cannot open this session's stream.
        stranger = await http.get(
            f"{base}/mcp", headers={**session_headers(session, "bob"), "accept": SSE}
        )
        assert stranger.status_code == 404
        json_only = await http.get(
            f"{base}/mcp", headers={**session_headers(session), "accept": "application/json"}
        )
        assert json_only.status_code == 406


async def test_any_gateway_process_serves_the_stream(
    mcp_env: McpEnv,
    two_gateways: tuple[str, str],  # noqa: F811 - the fixture
) -> None:
    first, second = two_gateways
    async with httpx2.AsyncClient(timeout=20) as http:
        opened = await http.post(
            f"{first}/mcp",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            },
            headers={k: v for k, v in session_headers("x").items() if k != "mcp-session-id"},
        )
        session = opened.headers["mcp-session-id"]
        approval_id = await _ask_approval(http, first, session, 902)
        await mcp_env.approve(approval_id, by="bob")
        _, announced = await asyncio.wait_for(
            _events(http, second, session, last="0-0", until=2), 15
        )
        assert json.loads(announced["data"])["params"]["approval_id"] == approval_id
