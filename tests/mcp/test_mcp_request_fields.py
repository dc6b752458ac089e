"""The request-field rule (issue 14, item 1; gateway/upstream/headers.py) on the MCP surface:
`_meta` correlation ids and idempotency keys that gRPC metadata cannot carry are a governed
INPUT_INVALID tool result naming the field, and nothing reaches the upstream."""

from __future__ import annotations

import pytest

from tests.gateway.test_request_fields import hostile_values
from tests.mcp.mcpkit import McpEnv, request, session_headers

pytestmark = pytest.mark.integration

GET = "/orders.v1.Orders/GetOrder"
META = {
    "correlation_id": "dev.capgate/correlationId",
    "idempotency_key": "dev.capgate/idempotencyKey",
}


async def test_hostile_meta_values_are_refused_before_the_upstream(mcp_env: McpEnv) -> None:
    before = await mcp_env.upstream_calls(GET)
    async with mcp_env.http() as http:
        session = await mcp_env.initialize(http)
        n = 0
        for _family, value in hostile_values(seed=28, per_family=2):
            if len(value) > 256:
                continue  # over 256 characters MCP answers invalid params first (docs/mcp.md)
            for field, meta_key in META.items():
                n += 1
                call = request(
                    n,
                    "tools/call",
                    {
                        "name": "orders_get",
                        "arguments": {"order_id": "o-1001"},
                        "_meta": {meta_key: value},
                    },
                )
                reply = (
                    await http.post("/mcp", json=call, headers=session_headers(session))
                ).json()
                result = reply["result"]
                assert result["isError"] is True, (value, reply)
                content = result["structuredContent"]
                assert content["code"] == "INPUT_INVALID"
                assert content["execution_state"] == "NOT_STARTED"
                assert [issue["path"] for issue in content["issues"]] == [field]
                assert value not in str(reply)
    assert n >= 20
    assert await mcp_env.upstream_calls(GET) == before
