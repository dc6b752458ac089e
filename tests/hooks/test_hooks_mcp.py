"""Governance hooks on the MCP surface (Streamable HTTP, the official MCP client): the same
pipeline rows run for tools/call — the standing hook's context asks for an approval, a hook's
deny is an error result the model can read, and nothing reaches the upstream."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml
from capgate_client.hook import PreInvokeResult

from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.hooks.conftest import ROOT
from tests.hooks.script import Script
from tests.mcp.mcpkit import McpEnv

pytestmark = pytest.mark.integration

REFUND = "RefundOrder"


def _config(tmp: Path, hooks_address: str) -> Path:
    data = yaml.safe_load((ROOT / "tests/mcp/gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(ROOT / "examples/orders/orders.pb")
    data["upstreams"]["hooks"] = {"address": hooks_address, "kind": "grpc"}
    data["hooks"] = [
        {
            "name": "standing",
            "upstream": "hooks",
            "calls": ["pre_invoke"],
            "capabilities": ["orders.refund"],
            "context": {"in_arrears": "boolean", "tier": "string"},
        },
        {"name": "guard", "upstream": "hooks", "calls": ["pre_invoke"], "tags": ["orders"]},
    ]
    data["policies"]["paths"] = [str(ROOT / "examples/hooks/policies")]
    path = tmp / "gateway.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
async def mcp_hooked(
    orders: str,
    hook_server: str,
    redis_server: RedisProcess,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[McpEnv]:
    config = _config(tmp_path_factory.mktemp("mcp-hooked"), hook_server)
    environ = gateway_environ(orders, redis_server.url, tempfile.mkdtemp(prefix="cg-"))
    memory = MemorySink()
    gw = await start(load_settings(config, environ=environ), extra_sinks=[memory])
    env = McpEnv(gw=gw, audit=memory, orders_address=orders)
    yield env
    await env.close()
    await gw.stop(0.2)


async def test_a_tool_call_meets_the_hooks(mcp_hooked: McpEnv, script: Script) -> None:
    before = await mcp_hooked.upstream_calls(REFUND)
    async with mcp_hooked.client("alice") as client:
        asked = await client.call_tool("orders_refund", {"order_id": "o-1003", "amount": 5})
        assert asked.is_error is False
        assert asked.structured_content is not None
        assert asked.structured_content["status"] == "approval_required"
        # Now the guard denies (MCP calls here carry no correlation id: its key is "").
        script.pre[""] = PreInvokeResult(decision="deny", message="Not this order.")
        try:
            denied = await client.call_tool("orders_refund", {"order_id": "o-1001", "amount": 5})
        finally:
            del script.pre[""]
    assert denied.is_error is True
    assert denied.content[0].text == "Not this order."  # type: ignore[union-attr]
    assert denied.structured_content == {
        "code": "HOOK_DENIED",
        "stage": "hook",
        "retryable": False,
        "execution_state": "NOT_STARTED",
    }
    assert await mcp_hooked.upstream_calls(REFUND) == before
