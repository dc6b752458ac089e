"""docs/mcp.md's claims, read from the page and checked against the real listener (issue 30
items 1 and 4): a sentence and its behaviour change together or the test fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mcp.mcpkit import ACCEPT, McpEnv, bearer, initialize_body, request, session_headers

pytestmark = pytest.mark.integration

DOC = " ".join((Path(__file__).parents[2] / "docs" / "mcp.md").read_text().split())


def test_the_doc_says_only_2025_03_26_sessions_may_batch() -> None:
    assert (
        "`POST /mcp` carries one JSON-RPC message, or a batch (`[...]`) from a `2025-03-26` "
        "session (handshake era, below); any other batch is refused with `400`." in DOC
    )
    assert "Batches (`[...]`) are refused" not in DOC


async def test_batches_are_served_exactly_where_the_doc_says(mcp_env: McpEnv) -> None:
    batch = [request(1, "tools/list"), request(2, "ping")]
    async with mcp_env.http() as http:
        opened = await http.post(
            "/mcp",
            json=initialize_body("2025-03-26"),
            headers={"authorization": bearer("alice"), "accept": ACCEPT},
        )
        old = session_headers(opened.headers["mcp-session-id"])
        del old["mcp-protocol-version"]
        served = await http.post("/mcp", json=batch, headers=old)
        refused = {}
        for version in ("2025-06-18", "2025-11-25"):
            opened = await http.post(
                "/mcp",
                json=initialize_body(version),
                headers={"authorization": bearer("alice"), "accept": ACCEPT},
            )
            headers = session_headers(opened.headers["mcp-session-id"])
            headers["mcp-protocol-version"] = version
            refused[version] = await http.post("/mcp", json=batch, headers=headers)
        stateless = await http.post(
            "/mcp",
            json=batch,
            headers={
                "authorization": bearer("alice"),
                "accept": ACCEPT,
                "mcp-protocol-version": "2026-07-28",
            },
        )
    assert served.status_code == 200
    assert [a["id"] for a in served.json()] == [1, 2]
    for response in (*refused.values(), stateless):
        assert response.status_code == 400, response.text
