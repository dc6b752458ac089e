"""docs/mcp.md's method table against the listener's own table (issue 30): every request
method the listener serves is in the doc's table, every method the table names is served (or,
for `notifications/cancelled`, acted on), and a method outside the table is METHOD_NOT_FOUND
on the real listener. The next drift fails here."""

from __future__ import annotations

import re
from pathlib import Path

from gateway.transport.mcp.protocol import CANCELLED, METHODS
from tests.mcp.mcpkit import ACCEPT, McpEnv, bearer, initialize_body, request, session_headers

DOC = (Path(__file__).resolve().parents[2] / "docs" / "mcp.md").read_text()


def _table_methods() -> set[str]:
    """The JSON-RPC method names in the first column of the page's first table."""
    lines = DOC.split("| MCP | capgate |", 1)[1].split("\n\n", 1)[0].splitlines()
    names: set[str] = set()
    for line in lines[2:]:  # after the header and its rule
        names |= set(re.findall(r"`([^`]+)`", line.split("|")[1]))
    return names - NOT_METHODS


# The table's other rows: a tool of capgate's own, and a listener setting.
NOT_METHODS = {"capgate_approval_status", "surface"}


def test_the_doc_table_names_exactly_the_methods_the_listener_serves() -> None:
    assert _table_methods() == {*METHODS, CANCELLED}


async def test_every_method_of_the_table_is_served_and_no_other(mcp_env: McpEnv) -> None:
    async with mcp_env.http() as http:
        opened = await http.post(
            "/mcp",
            json=initialize_body("2025-11-25"),
            headers={"authorization": bearer("alice"), "accept": ACCEPT},
        )
        headers = session_headers(opened.headers["mcp-session-id"])
        answers = {}
        for i, method in enumerate(("ping", "server/discover", "tools/list")):
            body = request(i + 10, method, {})
            answers[method] = (await http.post("/mcp", json=body, headers=headers)).json()
        tool = answers["tools/list"]["result"]["tools"][0]["name"]
        body = request(20, "tools/call", {"name": tool, "arguments": {"order_id": "o-1001"}})
        answers["tools/call"] = (await http.post("/mcp", json=body, headers=headers)).json()
        other = await http.post("/mcp", json=request(99, "resources/list"), headers=headers)
    # Each method answers what it is for (a method in the table without its own handler
    # would not).
    assert all("result" in answer for answer in answers.values()), answers
    results = {method: answer["result"] for method, answer in answers.items()}
    assert results["ping"] == {}
    assert "2025-11-25" in results["server/discover"]["supportedVersions"]
    assert results["tools/list"]["tools"]
    assert "content" in results["tools/call"], results["tools/call"]  # a tool's result
    assert opened.json()["result"]["protocolVersion"] == "2025-11-25"  # initialize
    assert set(answers) | {"initialize"} == set(METHODS)
    assert other.json()["error"]["code"] == -32601
