"""Version negotiation for every version a current client may send (2024-11-05, 2025-03-26,
2025-06-18, 2025-11-25, 2026-07-28), in both eras: the official Python SDK where it speaks the
version (its handshake asks for `LATEST_HANDSHAKE_VERSION`, set per test), raw HTTP for the
rest and for the spec's errors (400 for an invalid or unsupported `MCP-Protocol-Version` on a
session, -32022 with the supported versions in the stateless era)."""

from __future__ import annotations

import json
from typing import Any

import mcp.client.session as sdk_session
import pytest

from tests.mcp.mcpkit import ACCEPT, McpEnv, bearer, initialize_body, request, session_headers

pytestmark = pytest.mark.integration

HANDSHAKE = ("2025-11-25", "2025-06-18", "2025-03-26")
MODERN = "2026-07-28"
EVERY = ("2024-11-05", *HANDSHAKE, MODERN)
SPOKEN_ON_SESSIONS = list(HANDSHAKE)
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.mark.parametrize(
    ("asked", "negotiated"),
    [("2024-11-05", "2025-11-25"), *[(v, v) for v in HANDSHAKE]],
)
async def test_the_sdk_negotiates_each_handshake_version_and_calls_a_tool(
    mcp_env: McpEnv, monkeypatch: pytest.MonkeyPatch, asked: str, negotiated: str
) -> None:
    # After the handshake the SDK sends the negotiated version in MCP-Protocol-Version on every
    # request of the session: 2025-03-26 used to take the stateless path and get a 400.
    monkeypatch.setattr(sdk_session, "LATEST_HANDSHAKE_VERSION", asked)
    async with mcp_env.client(mode="legacy") as client:
        assert client.protocol_version == negotiated
        names = {t.name for t in (await client.list_tools()).tools}
        assert "orders_get" in names
        called = await client.call_tool("orders_get", {"order_id": "o-1001"})
        assert called.is_error is False


async def test_the_sdk_in_auto_mode_adopts_the_stateless_revision(mcp_env: McpEnv) -> None:
    async with mcp_env.client(mode="auto") as client:
        assert client.protocol_version == MODERN
        called = await client.call_tool("orders_get", {"order_id": "o-1001"})
        assert called.is_error is False


@pytest.mark.parametrize("asked", EVERY)
async def test_initialize_echoes_a_spoken_version_else_answers_the_newest(
    mcp_env: McpEnv, asked: str
) -> None:
    async with mcp_env.http() as http:
        response = await http.post(
            "/mcp",
            json=initialize_body(asked),
            headers={"authorization": bearer("alice"), "accept": ACCEPT},
        )
    assert response.status_code == 200
    assert response.json()["result"]["protocolVersion"] == (
        asked if asked in HANDSHAKE else "2025-11-25"
    )


@pytest.mark.parametrize("negotiated", HANDSHAKE)
@pytest.mark.parametrize("header", [*EVERY, None])
async def test_a_session_request_names_a_version_spoken_on_sessions_or_gets_400(
    mcp_env: McpEnv, negotiated: str, header: str | None
) -> None:
    async with mcp_env.http() as http:
        opened = await http.post(
            "/mcp",
            json=initialize_body(negotiated),
            headers={"authorization": bearer("alice"), "accept": ACCEPT},
        )
        session = opened.headers["mcp-session-id"]
        headers = session_headers(session)
        if header is None:
            del headers["mcp-protocol-version"]  # absent: the session's version applies
        else:
            headers["mcp-protocol-version"] = header
        response = await http.post("/mcp", json=request(2, "tools/list"), headers=headers)
    if header is None or header in HANDSHAKE:
        assert response.status_code == 200, response.text
        assert "orders_get" in {t["name"] for t in response.json()["result"]["tools"]}
    else:  # 2024-11-05 (no Streamable HTTP) and 2026-07-28 (no sessions) are not spoken here
        assert response.status_code == 400
        assert response.json()["error"]["code"] == -32600
        assert response.json()["error"]["data"] == {"supported": SPOKEN_ON_SESSIONS}


@pytest.mark.parametrize("header", ["1999-01-01", "2099-01-01", "not-a-version", "<b>x</b>"])
async def test_invalid_or_unknown_versions_on_a_session_are_400_and_never_echoed(
    mcp_env: McpEnv, header: str
) -> None:
    async with mcp_env.http() as http:
        session = await mcp_env.initialize(http)
        headers = {**session_headers(session), "mcp-protocol-version": header}
        response = await http.post("/mcp", json=request(2, "ping"), headers=headers)
        unknown = {**headers, "mcp-session-id": "no-such-session"}
        before_lookup = await http.post("/mcp", json=request(3, "ping"), headers=unknown)
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "Bad Request: unsupported MCP-Protocol-Version."
    assert header not in response.text
    # The header is checked before the session is looked up.
    assert before_lookup.status_code == 400


@pytest.mark.parametrize("version", ["2024-11-05", *HANDSHAKE, "2027-01-01"])
async def test_without_a_session_only_the_stateless_version_is_served(
    mcp_env: McpEnv, version: str
) -> None:
    meta = {**META, "io.modelcontextprotocol/protocolVersion": version}
    body = {**request(5, "tools/list"), "params": {"_meta": meta}}
    headers = {
        "authorization": bearer("alice"),
        "accept": ACCEPT,
        "mcp-protocol-version": version,
        "mcp-method": "tools/list",
    }
    async with mcp_env.http() as http:
        response = await http.post("/mcp", json=body, headers=headers)
        modern = {**headers, "mcp-protocol-version": MODERN}
        served = await http.post("/mcp", json={**body, "params": {"_meta": META}}, headers=modern)
    assert served.status_code == 200
    assert served.json()["result"]["resultType"] == "complete"
    assert response.status_code == 400
    if version in HANDSHAKE:  # the handshake era: a session is needed
        assert response.json()["error"]["message"] == "Bad Request: Mcp-Session-Id header required."
    else:  # the stateless era's own answer, with every version spoken here
        error = response.json()["error"]
        assert error["code"] == -32022
        assert error["data"]["supported"] == [MODERN, *HANDSHAKE]
        assert error["data"]["requested"] == version


async def test_a_2025_03_26_session_may_send_batches_and_later_ones_may_not(
    mcp_env: McpEnv,
) -> None:
    async with mcp_env.http() as http:
        opened = await http.post(
            "/mcp",
            json=initialize_body("2025-03-26"),
            headers={"authorization": bearer("alice"), "accept": ACCEPT},
        )
        old = {**session_headers(opened.headers["mcp-session-id"]), "accept": "application/json"}
        del old["mcp-protocol-version"]
        batch: list[Any] = [
            request(1, "tools/list"),
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            request(2, "ping"),
            {"jsonrpc": "2.0", "id": 3},  # neither a request nor a response
            request(4, "initialize", initialize_body()["params"]),
            request(5, "tools/call", {"name": "orders_get", "arguments": {"order_id": "o-1001"}}),
        ]
        answered = await http.post("/mcp", json=batch, headers=old)
        notes = [{"jsonrpc": "2.0", "method": "notifications/initialized"}]
        only_notes = await http.post("/mcp", json=notes, headers=old)
        empty = await http.post("/mcp", json=[], headers=old)
        sse = await http.post(
            "/mcp", json=batch[:3], headers={**old, "accept": "text/event-stream"}
        )
        newer = await mcp_env.initialize(http)
        refused = await http.post("/mcp", json=batch[:1], headers=session_headers(newer))
    assert answered.status_code == 200
    answers = answered.json()
    assert [a["id"] for a in answers] == [1, 2, 3, 4, 5]
    assert "orders_get" in {t["name"] for t in answers[0]["result"]["tools"]}
    assert answers[1]["result"] == {}
    assert answers[2]["error"]["code"] == -32600
    assert answers[3]["error"] == {"code": -32600, "message": "initialize cannot be batched."}
    assert answers[4]["result"]["isError"] is False
    assert (only_notes.status_code, only_notes.content) == (202, b"")
    assert empty.status_code == 400
    events = [e for e in sse.text.split("\n\n") if e]
    assert [json.loads(e.split("data: ", 1)[1])["id"] for e in events] == [1, 2]
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == "Batched messages are not supported."


async def test_server_discover_lists_every_version_spoken(mcp_env: McpEnv) -> None:
    async with mcp_env.http() as http:
        found = await http.post(
            "/mcp",
            json=request(4, "server/discover"),
            headers={"authorization": bearer("alice"), "accept": ACCEPT},
        )
    assert found.json()["result"]["supportedVersions"] == [MODERN, *HANDSHAKE]
