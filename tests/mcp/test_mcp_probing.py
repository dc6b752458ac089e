"""Probing on the MCP surface is audited like on gRPC (issue 25 item 5b, issue 30 item 4): an
unknown, unexposed or hidden tool name and an unknown approval id enter the pipeline, so stage 2
records `capability.requested` and the refusal ends it with the code gRPC's Invoke or Resume
gives, while the caller sees one concealed answer (SI-8). The doc's claim is read from
docs/mcp.md, so that the sentence and the behaviour change together."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import grpc
import pytest

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, types_pb2
from tests.gateway.harness import terminal_events, token
from tests.mcp.mcpkit import McpEnv, request, session_headers

pytestmark = pytest.mark.integration

DOC = Path(__file__).parents[2] / "docs" / "mcp.md"

# tool name -> (the capability id gRPC's Invoke is asked for, the trail's denial reason)
PROBES = {
    "no_such_tool": ("orders.nope", "unknown"),
    "orders_unexposed": ("orders.unexposed", "not-exposed"),
    "admin_orders_purge": ("admin.orders.purge", "hidden"),
}


def _method_row(method: str) -> str:
    """The cell docs/mcp.md's method table gives `method`."""
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0] == f"`{method}`":
            return cells[1]
    raise AssertionError(f"docs/mcp.md has no row for {method}")


async def _grpc_invoke(env: McpEnv, capability: str) -> gateway_pb2.ExecutionResult:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{env.gw.ports()['agents']}") as channel:
        return await gateway_pb2_grpc.CapabilityGatewayStub(channel).Invoke(
            gateway_pb2.InvokeRequest(capability_id=capability, input_json=b"{}"),
            metadata=[("authorization", f"Bearer {token('alice')}")],
        )


async def _grpc_resume(env: McpEnv, approval_id: str) -> gateway_pb2.ExecutionResult:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{env.gw.ports()['agents']}") as channel:
        return await gateway_pb2_grpc.CapabilityGatewayStub(channel).Resume(
            gateway_pb2.ResumeRequest(approval_id=approval_id),
            metadata=[("authorization", f"Bearer {token('alice')}")],
        )


def _ending(events: list[dict[str, Any]]) -> dict[str, Any]:
    assert [e["event"] for e in events].count("capability.requested") == 1
    ends = terminal_events(events)
    assert len(ends) == 1 and ends[0] is events[-1], [e["event"] for e in events]
    return ends[0]


def test_the_doc_says_tools_call_runs_the_pipeline_with_audit_events() -> None:
    row = _method_row("tools/call")
    assert re.search(r"stages 2.15", row) and "audit events" in row, row


async def test_every_probed_tool_name_is_audited_as_grpc_audits_its_id(mcp_env: McpEnv) -> None:
    async with mcp_env.http() as http:
        session = await mcp_env.initialize(http)
        answers = []
        for name, (capability, reason) in PROBES.items():
            mark = await mcp_env.mark()
            body = request(1, "tools/call", {"name": name, "arguments": {"order_id": "o-1001"}})
            response = await http.post("/mcp", json=body, headers=session_headers(session))
            answers.append(response.json())
            found = await mcp_env.executions_since(mark)
            assert len(found) == 1, (name, found)
            [mcp_events] = found.values()
            denied = _ending(mcp_events)
            mark = await mcp_env.mark()
            over_grpc = await _grpc_invoke(mcp_env, capability)
            [grpc_events] = (await mcp_env.executions_since(mark)).values()
            expected = _ending(grpc_events)
            assert over_grpc.failed.code == types_pb2.ERROR_CODE_CAPABILITY_NOT_FOUND
            for key in ("event", "code", "reason", "execution_state"):
                assert denied[key] == expected[key], (name, key, denied, expected)
            assert denied["event"] == "capability.denied" and denied["reason"] == reason
            assert denied["surface"] == "mcp"
    # One concealed answer for all of them (SI-8): same code, message and data.
    assert all(a == {"jsonrpc": "2.0", "id": 1, "error": answers[0]["error"]} for a in answers)
    assert answers[0]["error"] == {"code": -32602, "message": "Unknown tool."}


async def test_an_unknown_tool_name_is_audited_as_the_name_sent(mcp_env: McpEnv) -> None:
    async with mcp_env.http() as http:
        session = await mcp_env.initialize(http)
        mark = await mcp_env.mark()
        body = request(1, "tools/call", {"name": "orders_list", "arguments": {}})
        await http.post("/mcp", json=body, headers=session_headers(session))
    [events] = (await mcp_env.executions_since(mark)).values()
    # orders.list is a tool under its configured name only: the default name is unknown.
    assert {e["capability_id"] for e in events} == {"orders_list"}
    assert _ending(events)["reason"] == "unknown"


async def test_an_unknown_approval_id_is_audited_as_grpc_resume_audits_it(mcp_env: McpEnv) -> None:
    async with mcp_env.http() as http:
        session = await mcp_env.initialize(http)
        mark = await mcp_env.mark()
        arguments = {"approval_id": "apr-does-not-exist"}
        body = request(1, "tools/call", {"name": "capgate_approval_status", "arguments": arguments})
        response = await http.post("/mcp", json=body, headers=session_headers(session))
        [mcp_events] = (await mcp_env.executions_since(mark)).values()
        mark = await mcp_env.mark()
        over_grpc = await _grpc_resume(mcp_env, "apr-does-not-exist")
        [grpc_events] = (await mcp_env.executions_since(mark)).values()
        # resume: false only reads the status, as GetApproval does: no execution.
        mark = await mcp_env.mark()
        peek = {**arguments, "resume": False}
        body = request(2, "tools/call", {"name": "capgate_approval_status", "arguments": peek})
        peeked = await http.post("/mcp", json=body, headers=session_headers(session))
    result = response.json()["result"]
    assert result["isError"] is True
    assert result["structuredContent"]["code"] == "APPROVAL_NOT_FOUND"
    assert over_grpc.failed.code == types_pb2.ERROR_CODE_APPROVAL_NOT_FOUND
    ended, expected = _ending(mcp_events), _ending(grpc_events)
    for key in ("event", "code", "reason", "execution_state", "approval_id"):
        assert ended[key] == expected[key], (key, ended, expected)
    assert peeked.json()["result"]["structuredContent"]["code"] == "APPROVAL_NOT_FOUND"
    await mcp_env.gw.runtime.audit.flush()  # type: ignore[attr-defined]
    assert mcp_env.audit.events[mark:] == []
