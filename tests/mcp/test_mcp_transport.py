"""Streamable HTTP as a client that is not the SDK would meet it: DNS-rebinding protection,
the bearer challenge and RFC 9728 metadata, sessions, protocol versions, content negotiation."""

from __future__ import annotations

import json

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.mcp.mcpkit import ACCEPT, McpEnv, bearer, request, session_headers

pytestmark = pytest.mark.integration


def initialize(version: str = "2025-11-25") -> dict[str, object]:
    return request(
        1,
        "initialize",
        {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    )


async def test_a_disallowed_origin_is_refused_before_anything_runs(mcp_env: McpEnv):
    async with mcp_env.http() as http:
        refused = await http.post(
            "/mcp",
            json=initialize(),
            headers={
                "authorization": bearer("alice"),
                "accept": ACCEPT,
                "origin": "https://evil.example",
            },
        )
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == -32600
        assert "mcp-session-id" not in refused.headers
        allowed = await http.post(
            "/mcp",
            json=initialize(),
            headers={
                "authorization": bearer("alice"),
                "accept": ACCEPT,
                "origin": "https://app.example.com",
            },
        )
        assert allowed.status_code == 200
        assert allowed.headers["access-control-allow-origin"] == "https://app.example.com"
        assert "mcp-session-id" in allowed.headers["access-control-expose-headers"]
        preflight = await http.options(
            "/mcp",
            headers={"origin": "https://app.example.com", "access-control-request-method": "POST"},
        )
        assert preflight.status_code == 204
        assert "authorization" in preflight.headers["access-control-allow-headers"]


async def test_a_host_name_not_served_here_is_refused(mcp_env: McpEnv):
    # A DNS-rebinding page reaches 127.0.0.1 under the attacker's host name.
    async with mcp_env.http() as http:
        rebound = await http.post(
            "/mcp",
            json=initialize(),
            headers={
                "host": f"attacker.example:{mcp_env.port}",
                "authorization": bearer("alice"),
                "accept": ACCEPT,
            },
        )
        assert rebound.status_code == 421
        local = await http.post(
            "/mcp",
            json=initialize(),
            headers={
                "host": f"localhost:{mcp_env.port}",
                "authorization": bearer("alice"),
                "accept": ACCEPT,
            },
        )
        assert local.status_code == 200


async def test_a_missing_token_gets_the_challenge_and_the_resource_metadata(mcp_env: McpEnv):
    async with mcp_env.http() as http:
        missing = await http.post("/mcp", json=initialize(), headers={"accept": ACCEPT})
        assert missing.status_code == 401
        metadata_url = f"http://127.0.0.1:{mcp_env.port}/.well-known/oauth-protected-resource/mcp"
        assert missing.headers["www-authenticate"] == f'Bearer resource_metadata="{metadata_url}"'
        document = (await http.get(metadata_url)).json()
        root = (await http.get("/.well-known/oauth-protected-resource")).json()
    assert document == root
    assert document["resource"] == mcp_env.url
    assert document["authorization_servers"] == ["https://idp.example.com"]
    assert document["bearer_methods_supported"] == ["header"]


@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        ({"aud": "capgate"}, "wrong audience"),  # a token for the gRPC listener
        ({"iss": "other-idp"}, "issuer not allowed"),
        ({"exp": 1_000_000, "iat": 999_000}, "token expired"),
    ],
)
async def test_an_invalid_token_is_refused_like_on_grpc_listeners(mcp_env: McpEnv, claims, reason):
    async with mcp_env.http() as http:
        refused = await http.post(
            "/mcp",
            json=initialize(),
            headers={"authorization": bearer("alice", **claims), "accept": ACCEPT},
        )
    assert refused.status_code == 401
    challenge = refused.headers["www-authenticate"]
    assert challenge.startswith('Bearer resource_metadata="http://127.0.0.1:')
    assert f'error="invalid_token", error_description="{reason}"' in challenge


async def test_the_sdk_cannot_connect_with_a_bad_token(mcp_env: McpEnv):
    headers = {"authorization": bearer("alice", aud="capgate")}
    async with httpx2.AsyncClient(headers=headers, timeout=20) as http:
        with pytest.raises(BaseException) as info:  # the SDK wraps the error in a group
            async with Client(streamable_http_client(mcp_env.url, http_client=http)):
                pass
    errors = list(_leaves(info.value))
    assert errors
    assert all(isinstance(e, MCPError) for e in errors)
    assert {str(e) for e in errors} == {"Unauthorized: wrong audience."}


def _leaves(exc: BaseException):
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


async def test_requests_need_the_callers_own_live_session(mcp_env: McpEnv):
    ping = request(2, "ping")
    async with mcp_env.http() as http:
        session = await mcp_env.initialize(http, "alice")
        ok = await http.post("/mcp", json=ping, headers=session_headers(session))
        assert ok.status_code == 200
        assert ok.json() == {"jsonrpc": "2.0", "id": 2, "result": {}}
        headers = session_headers(session)
        del headers["mcp-session-id"]
        assert (await http.post("/mcp", json=ping, headers=headers)).status_code == 400
        unknown = session_headers("no-such-session")
        assert (await http.post("/mcp", json=ping, headers=unknown)).status_code == 404
        # Another actor presenting alice's session id learns nothing more than "not found".
        carol = session_headers(session, actor="carol")
        assert (await http.post("/mcp", json=ping, headers=carol)).status_code == 404
        closed = await http.delete("/mcp", headers=session_headers(session))
        assert closed.status_code == 204
        gone = await http.post("/mcp", json=ping, headers=session_headers(session))
        assert gone.status_code == 404


async def test_server_discover_lists_both_eras(mcp_env: McpEnv):
    async with mcp_env.http() as http:
        found = await http.post(
            "/mcp",
            json=request(4, "server/discover"),
            headers={"authorization": bearer("alice"), "accept": ACCEPT},
        )
    assert found.status_code == 200
    result = found.json()["result"]
    assert result["supportedVersions"] == ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"]
    assert result["capabilities"] == {"tools": {"listChanged": False}}


async def test_the_answer_is_one_sse_event_when_the_client_prefers_it(mcp_env: McpEnv):
    async with mcp_env.http() as http:
        session = await mcp_env.initialize(http)
        headers = session_headers(session, accept="text/event-stream, application/json;q=0.5")
        response = await http.post("/mcp", json=request(5, "tools/list"), headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    event, data, end = response.text.split("\n", 2)
    assert event == "event: message"
    assert end == "\n"
    names = [t["name"] for t in json.loads(data.removeprefix("data: "))["result"]["tools"]]
    assert "orders_refund" in names


async def test_malformed_traffic_gets_transport_errors(mcp_env: McpEnv):
    async with mcp_env.http() as http:
        session = await mcp_env.initialize(http)
        headers = session_headers(session)
        no_session = {k: v for k, v in headers.items() if k != "mcp-session-id"}
        assert (await http.get("/mcp", headers=no_session)).status_code == 400  # GET: a session
        batch = await http.post("/mcp", json=[request(6, "ping")], headers=headers)
        assert batch.status_code == 400
        assert batch.json()["error"]["code"] == -32600
        duplicate = await http.post(
            "/mcp",
            content=b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}',
            headers={**headers, "content-type": "application/json"},
        )
        assert duplicate.status_code == 400
        assert duplicate.json()["error"]["code"] == -32700
        unknown = await http.post("/mcp", json=request(8, "resources/list"), headers=headers)
        assert unknown.json()["error"]["code"] == -32601
        html = {**headers, "accept": "text/html"}
        assert (await http.post("/mcp", json=request(9, "ping"), headers=html)).status_code == 406
        text = await http.post(
            "/mcp", content=b"ping", headers={**headers, "content-type": "text/plain"}
        )
        assert text.status_code == 415
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        accepted = await http.post("/mcp", json=note, headers=headers)
        assert accepted.status_code == 202
        assert accepted.content == b""
        bad_args = await http.post(
            "/mcp",
            json=request(10, "tools/call", {"name": "orders_get", "arguments": ["o-1001"]}),
            headers=headers,
        )
        assert bad_args.json()["error"] == {"code": -32602, "message": "Invalid params."}
