"""The pipeline corpus (corpus.yaml) over the MCP listener (issue 25 item 5): the same gateway
config with an MCP listener whose surface mirrors the agents listener's exposure, each case a
stateless-era `tools/call` of the capability's tool, checked against the case's envelope, audit
events in order, denial reason and number of upstream calls, plus the invariant that every
execution ends in exactly one terminal event.

How an expectation reads on MCP (docs/mcp.md "Results"):
- CAPABILITY_NOT_FOUND is the concealed JSON-RPC `-32602 "Unknown tool."` (SI-8); the trail,
  found by its `capability.requested`, still says which refusal it was;
- approval required and completed are results with `isError: false` (`structuredContent` the
  output, or `status: approval_required`); failures are `isError: true` with `{code, stage,
  retryable, execution_state, issues}` and the public message as the first line of the text;
- what MCP results do not carry is read from the execution's terminal event, which does:
  `attempts` (`attempt`), `executed_before_failure`, and failed vs cancelled (`outcome`);
  `expose_to_model` has no MCP counterpart (the text is always the public message) and is not
  checked here.
Cases with `mcp_skip` are requests MCP cannot express; each one's reason is checked by sending
the request MCP would have to send (`test_a_skipped_case_cannot_be_a_tool_call`).
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest
import yaml

from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.config.mcpnames import default_tool_name
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import Env, subset, terminal_events
from tests.gateway.test_corpus import CASES, _raw
from tests.mcp.mcpkit import ACCEPT, AUDIENCE, McpEnv, bearer

pytestmark = pytest.mark.integration

VERSION = "2026-07-28"
RUN = [c for c in CASES if "mcp_skip" not in c]
SKIPPED = [c for c in CASES if "mcp_skip" in c]
_MCP_LISTENER = {
    "name": "mcp",
    "address": "127.0.0.1:0",
    "surface": "mcp",
    "protocol": "mcp",
    "auth": "jwt",
    "jwt": {
        "issuers": ["test-idp"],
        "audience": AUDIENCE,
        "keys": [{"kid": "hs1", "alg": "HS256", "secret": "{{ env.TEST_JWT_SECRET }}"}],
    },
}


@pytest.fixture(scope="module")
async def mcp_corpus(
    orders_upstream: str, redis_server: RedisProcess
) -> AsyncIterator[tuple[Env, McpEnv]]:
    """tests/gateway/gateway.yaml plus an MCP listener; `expose.mcp` is `expose.agent`."""
    tmp = Path(tempfile.mkdtemp(prefix="cg-corpus-mcp-"))
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(HERE / "../../examples/orders/orders.pb")
    data["policies"]["paths"] = [str(HERE / "../../examples/policies")]
    data["listeners"].append(_MCP_LISTENER)
    for capability in data["capabilities"]:
        capability["expose"]["mcp"] = capability["expose"].get("agent", False)
    data["redis"]["key_prefix"] = "capgate-corpus-mcp"
    config = tmp / "gateway.yaml"
    config.write_text(yaml.safe_dump(data))
    environ = gateway_environ(orders_upstream, redis_server.url, str(tmp))
    memory = MemorySink()
    gw = await start(load_settings(config, environ=environ), extra_sinks=[memory])
    env = Env(gw=gw, audit=memory, orders_address=orders_upstream, socket_path=f"{tmp}/c.sock")
    yield env, McpEnv(gw=gw, audit=memory, orders_address=orders_upstream)
    for channel in env.channels.values():
        await channel.close()
    await gw.stop(0.5)


def _headers(tool: str, actor: str) -> dict[str, str]:
    return {
        "authorization": bearer(actor),
        "accept": ACCEPT,
        "content-type": "application/json",
        "mcp-protocol-version": VERSION,
        "mcp-method": "tools/call",
        "mcp-name": tool,
    }


def _message(tool: str, arguments: bytes) -> bytes:
    """A stateless-era `tools/call` whose `arguments` are these exact bytes."""
    meta = orjson.dumps(
        {
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    )
    head = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": '
    return (
        head + orjson.dumps(tool) + b', "arguments": ' + arguments + b', "_meta": ' + meta + b"}}"
    )


async def _post(mcp: McpEnv, tool: str, body: bytes, actor: str) -> dict[str, Any]:
    async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{mcp.port}", timeout=20) as http:
        response = await http.post("/mcp", content=body, headers=_headers(tool, actor))
    assert b"SENTINEL" not in response.content  # issue messages never echo values (SI-10)
    answer: dict[str, Any] = response.json()
    return answer


def _check(answer: dict[str, Any], ending: dict[str, Any], expect: dict[str, Any]) -> None:
    """The MCP answer and the execution's terminal event against the case's envelope."""
    outcome = expect["outcome"]
    if expect.get("code") == "CAPABILITY_NOT_FOUND":
        assert answer["error"] == {"code": -32602, "message": "Unknown tool."}, answer
        assert ending["code"] == "CAPABILITY_NOT_FOUND"
        return
    result = answer["result"]
    structured = result.get("structuredContent", {})
    if outcome == "completed":
        assert result["isError"] is False, result
        assert subset(expect.get("output", {}), structured), structured
        for key, prefix in expect.get("output_prefix", {}).items():
            assert str(structured[key]).startswith(prefix), structured
        return
    if outcome == "approval_required":
        assert result["isError"] is False and structured["status"] == "approval_required"
        assert structured["approval_id"]
        return
    assert result["isError"] is True, result
    assert structured["code"] == expect["code"], result
    assert ending["outcome"] == outcome  # failed or cancelled: the trail says which
    for key in ("stage", "retryable", "issues"):
        if key in expect:
            assert structured[key] == expect[key], (key, result)
    if "message" in expect:
        assert result["content"][0]["text"].split("\n")[0] == expect["message"]
    if "state" in expect:
        assert structured["execution_state"] == expect["state"]
    if "attempts" in expect:
        assert ending["attempt"] == expect["attempts"]
    if "executed_before_failure" in expect:
        assert ending.get("executed_before_failure", False) == expect["executed_before_failure"]


@pytest.mark.parametrize("case", RUN, ids=[c["name"] for c in RUN])
async def test_corpus_case_over_mcp(mcp_corpus: tuple[Env, McpEnv], case: dict[str, Any]) -> None:
    env, mcp = mcp_corpus
    await env.reset_upstream()
    tool = default_tool_name(case["capability"])
    mark = await mcp.mark()
    answer = await _post(mcp, tool, _message(tool, _raw(case)), case.get("actor", "alice"))
    executions = await mcp.executions_since(mark)
    assert len(executions) == 1, (answer, executions)  # every tool call is one audited execution
    [(execution_id, events)] = executions.items()
    if "result" in answer:
        assert answer["result"]["_meta"]["dev.capgate/executionId"] == execution_id
    assert [e["event"] for e in events].count("capability.requested") == 1
    ends = terminal_events(events)
    assert len(ends) == 1 and ends[0] is events[-1], [e["event"] for e in events]
    assert isinstance(ends[0]["stances"], list)
    assert {e["surface"] for e in events} == {"mcp"}
    _check(answer, ends[0], case["expect"])
    assert await env.upstream_calls() == case["upstream_calls"]
    if "events" in case:
        assert [e["event"] for e in events] == case["events"]
    if "reason" in case:
        denied = [e for e in events if e["event"] == "capability.denied"]
        assert denied and denied[-1]["reason"] == case["reason"]
    for event in events:
        blob = orjson.dumps(event)
        assert b"SENTINEL" not in blob and b"o-1001" not in blob  # never payloads (SI-10)


def test_every_case_runs_over_mcp_or_says_why_not() -> None:
    """The filter is data: each skipped case names its reason; the rest all run."""
    assert all(isinstance(c["mcp_skip"], str) and c["mcp_skip"].strip() for c in SKIPPED)
    assert RUN and len(RUN) + len(SKIPPED) == len(CASES)


@pytest.mark.parametrize(
    "case", [c for c in SKIPPED if "raw" in str(c["mcp_skip"])], ids=lambda c: c["name"]
)
async def test_a_skipped_case_cannot_be_a_tool_call(
    mcp_corpus: tuple[Env, McpEnv], case: dict[str, Any]
) -> None:
    """The skip reason holds: the message MCP would carry is refused with the JSON-RPC code
    the reason names, and no execution starts."""
    _, mcp = mcp_corpus
    named = re.search(r"\((-32\d{3})", str(case["mcp_skip"])) or re.search(
        r"(-32\d{3})", str(case["mcp_skip"])
    )
    assert named is not None, case["mcp_skip"]
    mark = await mcp.mark()
    tool = default_tool_name(case["capability"])
    answer = await _post(mcp, tool, _message(tool, _raw(case)), "alice")
    assert answer["error"]["code"] == int(named[1]), answer
    await mcp.gw.runtime.audit.flush()  # type: ignore[attr-defined]
    assert [e for e in mcp.audit.events[mark:] if e["event"] == "capability.requested"] == []
