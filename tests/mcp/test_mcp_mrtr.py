"""Approvals the 2026-07-28 way: a stateless-era call that needs approval, from a client that
declares elicitation, is `input_required` with an integrity-protected `requestState`; the
client's retry with that proof runs the approved call once (gateway/transport/mcp/mrtr.py). Clients
without elicitation keep the approval-required result and the status tool."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import httpx2
import mcp.types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.mcp.mcpkit import ACCEPT, McpEnv, bearer

pytestmark = pytest.mark.integration

REFUND = "/orders.v1.Orders/RefundOrder"
VERSION = "2026-07-28"
ELICIT = {"elicitation": {"form": {}}}


def _approval_id(message: str) -> str:
    found = re.search(r"approval id ([^,]+),", message)
    assert found is not None, message
    return found[1]


async def test_a_compliant_client_waits_for_the_approver_and_retries_with_proof(
    mcp_env: McpEnv,
) -> None:
    before = await mcp_env.upstream_calls(REFUND)
    asked: list[str] = []

    async def on_elicit(_: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        if len(asked) == 2:  # the first "continue" came too early; now a person decides
            await mcp_env.approve(_approval_id(params.message), by="bob")
        return types.ElicitResult(action="accept")

    async with (
        httpx2.AsyncClient(headers={"authorization": bearer("alice")}, timeout=20) as http,
        Client(
            streamable_http_client(mcp_env.url, http_client=http), elicitation_callback=on_elicit
        ) as client,
    ):
        assert client.protocol_version == VERSION
        result = await client.call_tool("orders_refund", {"order_id": "o-1003", "amount": 801})
    assert result.is_error is False, result
    assert result.structured_content is not None
    assert result.structured_content["order_id"] == "o-1003"
    assert len(asked) == 2  # asked; continued too early, so asked again; then decided
    assert len({_approval_id(m) for m in asked}) == 1
    assert "needs human approval" in asked[0]
    assert await mcp_env.upstream_calls(REFUND) == before + 1


def _headers(actor: str = "alice") -> dict[str, str]:
    return {
        "authorization": bearer(actor),
        "accept": ACCEPT,
        "mcp-protocol-version": VERSION,
        "mcp-method": "tools/call",
        "mcp-name": "orders_refund",
    }


def _call(arguments: dict[str, Any], caps: dict[str, Any], **extra: Any) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": caps,
    }
    params = {"name": "orders_refund", "arguments": arguments, "_meta": meta, **extra}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


async def _post(env: McpEnv, body: dict[str, Any], actor: str = "alice") -> httpx2.Response:
    async with env.http() as http:
        return await http.post("/mcp", json=body, headers=_headers(actor))


def _tampered(state: str) -> list[str]:
    version, body, tag = state.split(".")
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    forged_body = (
        base64.urlsafe_b64encode(json.dumps({**payload, "a": "someone-elses"}).encode())
        .decode()
        .rstrip("=")
    )
    return [
        f"{version}.{forged_body}.{tag}",  # another approval id under the old MAC
        f"{version}.{body}.{tag[:-2]}AA",  # a MAC that does not verify
        f"v2.{body}.{tag}",
        "not-a-state",
        "",
        "x" * 5000,
    ]


async def test_a_request_state_is_honoured_only_as_minted_for_this_call(mcp_env: McpEnv) -> None:
    before = await mcp_env.upstream_calls(REFUND)
    args = {"order_id": "o-1003", "amount": 802}
    first = (await _post(mcp_env, _call(args, ELICIT))).json()["result"]
    assert first["resultType"] == "input_required"
    request = first["inputRequests"]["capgate_approval"]
    assert request["method"] == "elicitation/create"
    assert request["params"]["requestedSchema"] == {"type": "object", "properties": {}}
    state = first["requestState"]
    await mcp_env.approve(_approval_id(request["params"]["message"]), by="bob")

    accept = {"capgate_approval": {"action": "accept"}}
    refused_bodies = [
        _call(args, ELICIT, requestState=s, inputResponses=accept) for s in _tampered(state)
    ]
    refused_bodies.append(
        _call({**args, "amount": 804}, ELICIT, requestState=state, inputResponses=accept)
    )
    for body in refused_bodies:
        refused = await _post(mcp_env, body)
        assert refused.status_code == 400
        assert refused.json()["error"] == {"code": -32602, "message": "Invalid requestState."}
    stranger = await _post(mcp_env, _call(args, ELICIT, requestState=state), actor="carol")
    assert stranger.json()["error"]["message"] == "Invalid requestState."
    assert await mcp_env.upstream_calls(REFUND) == before  # nothing ran

    declined = _call(
        args, ELICIT, requestState=state, inputResponses={"capgate_approval": {"action": "decline"}}
    )
    status = (await _post(mcp_env, declined)).json()["result"]
    assert status["resultType"] == "complete"
    assert status["structuredContent"]["status"] == "approved"  # told, not run
    assert await mcp_env.upstream_calls(REFUND) == before

    body = _call(args, ELICIT, requestState=state, inputResponses=accept)
    ran = (await _post(mcp_env, body)).json()["result"]
    assert (ran["resultType"], ran["isError"]) == ("complete", False), ran
    again = (await _post(mcp_env, body)).json()["result"]  # the stored result, not a rerun
    assert again["structuredContent"] == ran["structuredContent"]
    assert await mcp_env.upstream_calls(REFUND) == before + 1


async def test_clients_without_elicitation_keep_the_status_tool(mcp_env: McpEnv) -> None:
    for caps in ({}, {"elicitation": {"url": {}}}, {"elicitation": "yes"}):
        body = _call({"order_id": "o-1004", "amount": 803}, caps)
        result = (await _post(mcp_env, body)).json()["result"]
        assert result["resultType"] == "complete"
        assert result["structuredContent"]["status"] == "approval_required"
        assert "capgate_approval_status" in result["content"][0]["text"]
