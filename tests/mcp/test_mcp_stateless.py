"""The stateless 2026-07-28 revision over raw HTTP: one self-contained POST per request, the
version and capabilities in `params._meta`, headers that must agree with the body, no session,
and the same governance as every other surface (gateway/transport/mcp/modern.py, ADR 0010)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests.mcp.mcpkit import ACCEPT, McpEnv, bearer

pytestmark = pytest.mark.integration

VERSION = "2026-07-28"
CAPS = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _body(
    method: str, params: dict[str, Any] | None = None, meta: Any = CAPS, rid: Any = 1
) -> dict[str, Any]:
    p = dict(params or {})
    if meta is not None:
        p["_meta"] = meta
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": p}
    if rid is not None:
        body["id"] = rid
    return body


def _headers(
    method: str, actor: str = "alice", name: str | None = None, **extra: str
) -> dict[str, str]:
    headers = {
        # Minted at collection for the parametrized cases: valid for the listener's longest
        # lifetime (1 h), not the harness's default 10 minutes a slow full run outlasts.
        "authorization": bearer(actor, lifetime=3600),
        "accept": ACCEPT,
        "mcp-protocol-version": VERSION,
        "mcp-method": method,
    }
    if name is not None:
        headers["mcp-name"] = name
    return {**headers, **extra}


async def _post(env: McpEnv, body: dict[str, Any], headers: dict[str, str]) -> Any:
    async with env.http() as http:
        return await http.post("/mcp", json=body, headers=headers)


async def test_discover_list_and_call_need_no_session(mcp_env: McpEnv) -> None:
    found = await _post(mcp_env, _body("server/discover"), _headers("server/discover"))
    assert found.status_code == 200
    discover = found.json()["result"]
    assert discover["supportedVersions"][0] == VERSION
    assert discover["resultType"] == "complete"
    assert discover["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "capgate"
    assert "mcp-session-id" not in found.headers
    listed = await _post(mcp_env, _body("tools/list"), _headers("tools/list"))
    tools = listed.json()["result"]
    assert {t["name"] for t in tools["tools"]} >= {"orders_get", "orders_refund"}
    assert (tools["resultType"], tools["ttlMs"], tools["cacheScope"]) == ("complete", 0, "private")
    assert "admin_orders_purge" not in {t["name"] for t in tools["tools"]}  # hidden by policy
    params = {"name": "orders_get", "arguments": {"order_id": "o-1001"}}
    called = await _post(
        mcp_env, _body("tools/call", params), _headers("tools/call", name="orders_get")
    )
    result = called.json()["result"]
    assert called.status_code == 200
    assert result["isError"] is False
    assert result["resultType"] == "complete"
    assert result["structuredContent"]["order_id"] == "o-1001"
    assert "mcp-session-id" not in called.headers


async def test_governance_is_the_same_in_the_stateless_era(mcp_env: McpEnv) -> None:
    before = await mcp_env.upstream_calls("/orders.v1.Orders/RefundOrder")
    params = {"name": "orders_refund", "arguments": {"order_id": "o-1001", "amount": 20000}}
    denied = await _post(
        mcp_env, _body("tools/call", params), _headers("tools/call", name="orders_refund")
    )
    result = denied.json()["result"]
    assert result["isError"] is True
    assert result["structuredContent"]["code"] == "POLICY_DENIED"
    # A bearer the listener does not accept is refused before anything is read.
    refused = await _post(
        mcp_env,
        _body("tools/call", params),
        {**_headers("tools/call", name="orders_refund"), "authorization": "Bearer nope"},
    )
    assert refused.status_code == 401
    assert await mcp_env.upstream_calls("/orders.v1.Orders/RefundOrder") == before


@pytest.mark.parametrize(
    ("body", "headers", "code"),
    [
        (_body("tools/list", meta=None), _headers("tools/list"), -32602),
        (
            _body("tools/list", meta={"io.modelcontextprotocol/protocolVersion": VERSION}),
            _headers("tools/list"),
            -32602,
        ),
        (_body("tools/list"), _headers("tools/call"), -32020),
        (
            _body("tools/call", {"name": "orders_get", "arguments": {"order_id": "o-1"}}),
            _headers("tools/call", name="orders_cancel"),
            -32020,
        ),
        (
            _body("tools/list"),
            {**_headers("tools/list"), "mcp-protocol-version": "2027-01-01"},
            -32020,
        ),
        (_body("initialize"), _headers("initialize"), -32601),
        (_body("ping"), _headers("ping"), -32601),
    ],
    ids=[
        "no-meta",
        "no-capabilities",
        "method-header",
        "name-header",
        "version-header",
        "initialize-is-gone",
        "ping-is-gone",
    ],
)
async def test_each_check_answers_with_its_code_and_status(
    mcp_env: McpEnv, body: dict[str, Any], headers: dict[str, str], code: int
) -> None:
    response = await _post(mcp_env, body, headers)
    assert response.status_code == (404 if code == -32601 else 400)
    error = response.json()["error"]
    assert error["code"] == code
    assert response.json()["id"] == 1
    assert "o-1" not in json.dumps(error)  # messages never echo caller values


async def test_an_unknown_version_is_told_which_ones_are_spoken(mcp_env: McpEnv) -> None:
    meta = {**CAPS, "io.modelcontextprotocol/protocolVersion": "2027-01-01"}
    response = await _post(
        mcp_env,
        _body("tools/list", meta=meta),
        {**_headers("tools/list"), "mcp-protocol-version": "2027-01-01"},
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32022
    assert error["data"] == {
        "supported": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"],
        "requested": "2027-01-01",
    }


async def test_notifications_are_accepted_and_a_base64_name_header_is_understood(
    mcp_env: McpEnv,
) -> None:
    note = _body("notifications/cancelled", {"requestId": 1}, rid=None)
    assert (await _post(mcp_env, note, _headers("notifications/cancelled"))).status_code == 202
    unknown = {**_headers("notifications/cancelled"), "mcp-protocol-version": "2027-01-01"}
    assert (await _post(mcp_env, note, unknown)).status_code == 400
    encoded = "=?base64?" + base64.b64encode(b"orders_get").decode() + "?="
    params = {"name": "orders_get", "arguments": {"order_id": "o-1001"}}
    called = await _post(mcp_env, _body("tools/call", params), _headers("tools/call", name=encoded))
    assert called.json()["result"]["isError"] is False


async def test_garbage_versions_are_not_echoed_and_repeated_routing_headers_are_refused(
    mcp_env: McpEnv,
) -> None:
    junk = "<script>alert(1)</script>"
    response = await _post(
        mcp_env,
        _body("tools/list", meta={**CAPS, "io.modelcontextprotocol/protocolVersion": junk}),
        {**_headers("tools/list"), "mcp-protocol-version": junk},
    )
    assert response.json()["error"]["code"] == -32022
    assert junk not in response.text
    params = {"name": "orders_get", "arguments": {"order_id": "o-1001"}}
    async with mcp_env.http() as http:
        headers = [
            *_headers("tools/call", name="orders_get").items(),
            ("mcp-name", "orders_cancel"),
        ]
        twice = await http.post("/mcp", json=_body("tools/call", params), headers=headers)
    assert twice.status_code == 400
    assert twice.json()["error"]["code"] == -32020
