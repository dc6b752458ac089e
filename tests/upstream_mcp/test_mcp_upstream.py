"""`kind: mcp` through the real gateway and the official MCP SDK's server (examples/mcp_upstream)
in both protocol eras: discovery and schema mapping, a policy on a tool's argument, an approval
resumed into a tool call exactly once, isError, redaction, what is forwarded."""

from __future__ import annotations

import jwt
import orjson
import pytest

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, types_pb2
from tests.gateway.harness import token
from tests.upstream_mcp.conftest import McpEnv

pytestmark = pytest.mark.integration

SEARCHES = ["desk.search", "desk.search_stateless", "desk.search_auto", "desk.search_2025_03"]


def _code(result: gateway_pb2.ExecutionResult) -> str:
    return types_pb2.ErrorCode.Name(result.failed.code)


@pytest.mark.parametrize("capability", SEARCHES)
async def test_a_tool_call_in_each_era_returns_its_structured_content(
    env: McpEnv, capability: str
) -> None:
    result = await env.invoke(capability, {"query": "printer"})
    assert result.WhichOneof("outcome") == "completed", result
    [ticket] = orjson.loads(result.completed.output_json)["tickets"]
    assert ticket["id"] == "T-1"
    assert result.execution_state == types_pb2.EXECUTION_STATE_COMPLETED
    assert env.desk.calls["search_tickets"] == 1


async def test_each_upstream_speaks_the_era_it_was_configured_for(env: McpEnv) -> None:
    await env.invoke("desk.search", {"query": "a"})
    await env.invoke("desk.search_stateless", {"query": "a"})
    await env.invoke("desk.search_2025_03", {"query": "a"})
    versions = [h.get("mcp-protocol-version") for h in env.desk.headers]
    sessions = [h.get("mcp-session-id") for h in env.desk.headers]
    assert versions == ["2025-11-25", "2026-07-28", "2025-03-26"]
    assert sessions[0] and sessions[2] and sessions[1] is None  # pooled sessions reused


async def test_redaction_applies_to_the_tools_output(env: McpEnv) -> None:
    result = await env.invoke("desk.search", {"query": "vpn"})
    [ticket] = orjson.loads(result.completed.output_json)["tickets"]
    assert ticket["email"] != "bo@example.com"


async def test_the_input_schema_is_the_tools_and_validated_before_the_call(env: McpEnv) -> None:
    stub = gateway_pb2_grpc.CapabilityGatewayStub(env.agents)
    listed = await stub.Describe(
        gateway_pb2.DescribeRequest(),
        metadata=[("authorization", f"Bearer {token('alice')}")],
    )
    by_id = {c.id: c for c in listed.capabilities}
    schema = orjson.loads(by_id["desk.search"].input_schema_json)
    assert schema["required"] == ["query"]
    assert schema["properties"]["limit"]["maximum"] == 100
    result = await env.invoke("desk.search", {"query": "x", "limit": 1000})
    assert _code(result) == "ERROR_CODE_INPUT_INVALID", result
    assert [i.path for i in result.failed.issues] == ["$.limit"]
    assert env.desk.calls["search_tickets"] == 0
    # The config's input_schema wins over the tool's (the config is authoritative).
    credit = orjson.loads(by_id["desk.credit"].input_schema_json)
    assert credit["properties"]["amount_cents"]["maximum"] == 100000
    result = await env.invoke("desk.credit", {"ticket_id": "not-a-ticket", "amount_cents": 5})
    assert _code(result) == "ERROR_CODE_INPUT_INVALID", result
    assert env.desk.calls["issue_credit"] == 0


async def test_a_policy_on_a_tool_argument_denies_before_the_call(env: McpEnv) -> None:
    for capability in ("desk.search", "desk.search_stateless"):
        denied = await env.invoke(capability, {"query": "x", "limit": 50})
        assert _code(denied) == "ERROR_CODE_POLICY_DENIED", denied
        assert denied.failed.message == "Search at most 20 tickets at a time."
    allowed = await env.invoke("desk.search", {"query": "x", "limit": 20})
    assert allowed.WhichOneof("outcome") == "completed", allowed
    assert env.desk.calls["search_tickets"] == 1


async def test_an_approval_resumes_into_the_tool_call_exactly_once(env: McpEnv) -> None:
    asked = await env.invoke("desk.close", {"ticket_id": "T-2", "reason": "duplicate"})
    assert asked.WhichOneof("outcome") == "approval_required", asked
    assert env.desk.calls["close_ticket"] == 0
    approval = asked.approval_required.approval
    await env.approve(approval)
    first = await env.resume(approval.id)
    assert first.WhichOneof("outcome") == "completed", first
    assert orjson.loads(first.completed.output_json) == {"closed": "T-2", "reason": "duplicate"}
    again = await env.resume(approval.id)
    assert again.completed.output_json == first.completed.output_json
    assert env.desk.calls["close_ticket"] == 1
    # The tool call carried the approval and the gateway-signed actor token.
    [call] = [h for h in env.desk.headers if h.get("x-capgate-approval-id")]
    assert call["x-capgate-approval-id"] == approval.id
    claims = jwt.decode(call["x-capgate-actor-token"], options={"verify_signature": False})
    assert claims["sub"] == "alice"


async def test_a_policy_approval_on_an_argument_then_one_call(env: McpEnv) -> None:
    small = await env.invoke("desk.credit", {"ticket_id": "T-1", "amount_cents": 500})
    assert small.WhichOneof("outcome") == "completed", small
    big = await env.invoke("desk.credit", {"ticket_id": "T-1", "amount_cents": 9000})
    assert big.WhichOneof("outcome") == "approval_required", big
    await env.approve(big.approval_required.approval)
    done = await env.resume(big.approval_required.approval.id)
    assert orjson.loads(done.completed.output_json)["amount_cents"] == 9000
    assert env.desk.calls["issue_credit"] == 2


async def test_an_is_error_result_is_exposed_sanitised_and_bounded(env: McpEnv) -> None:
    result = await env.invoke("desk.broken", {})
    assert _code(result) == "ERROR_CODE_EXECUTION_FAILED", result
    assert result.failed.expose_to_model
    message = result.failed.message
    # The SDK puts "Error executing tool <name>: " before a ToolError's text.
    assert message.startswith("Error executing tool broken: The desk database is unreachable: xx")
    assert len(message) == 500 and "\u202e" not in message and "\n" not in message
    assert result.execution_state == types_pb2.EXECUTION_STATE_COMPLETED
    assert env.desk.calls["broken"] == 1  # not retried: a definite answer


async def test_a_tool_error_is_the_tools_message(env: McpEnv) -> None:
    asked = await env.invoke("desk.close", {"ticket_id": "T-99", "reason": "x"})
    await env.approve(asked.approval_required.approval)
    result = await env.resume(asked.approval_required.approval.id)
    assert (_code(result), result.failed.message) == (
        "ERROR_CODE_EXECUTION_FAILED",
        "Error executing tool close_ticket: There is no ticket T-99.",
    )


async def test_plain_text_content_is_the_output(env: McpEnv) -> None:
    result = await env.invoke("desk.echo", {"text": "hello"})
    assert orjson.loads(result.completed.output_json) == "hello"
    result = await env.invoke("desk.echo", {"text": '{"a": 1}'})
    assert orjson.loads(result.completed.output_json) == {"a": 1}


async def test_static_credentials_and_forwarded_headers(env: McpEnv) -> None:
    result = await env.invoke("desk.search", {"query": "x"})
    [call] = [h for h in env.desk.headers if h.get("x-capgate-execution-id")]
    assert call["authorization"] == "Bearer desk-static-credential"
    assert call["x-capgate-execution-id"] == result.execution_id
    assert call["x-capgate-capability"] == "desk.search"
    assert "bearer" not in call.get("x-capgate-actor-token", "").lower()
    # The caller's own credential never travels upstream.
    assert all(token("alice") not in v for h in env.desk.headers for v in h.values())


async def test_map_input_builds_the_tools_arguments(env: McpEnv) -> None:
    result = await env.invoke("desk.quick_search", {"q": "o"})  # every ticket matches "o"
    assert result.WhichOneof("outcome") == "completed", result
    assert len(orjson.loads(result.completed.output_json)["tickets"]) == 1  # limit: 1
