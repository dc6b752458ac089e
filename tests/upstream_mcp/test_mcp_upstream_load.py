"""`kind: mcp` at load and when the server goes away, through the real loader, gateway and the
official MCP SDK's server: unsupported schema features and unknown tools are refused at
file:line; an unreachable server at load is a load error; a server gone after load answers
UPSTREAM_UNAVAILABLE, NOT_STARTED."""

from __future__ import annotations

import asyncio
import io
from collections import Counter
from contextlib import redirect_stdout
from pathlib import Path

import grpc
import pytest
from mcp.server.mcpserver import MCPServer

from capgate.v1 import types_pb2
from examples.mcp_upstream.server import serve
from gateway.audit.sinks import MemorySink
from gateway.cli.config import main as config_main
from gateway.config.loader import load_settings
from gateway.pipeline.snapshot import SnapshotError, build_snapshot, check_snapshot
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from gateway.upstream.channels import ChannelPool
from tests.upstream_mcp.conftest import HERE, McpEnv, environ

pytestmark = pytest.mark.integration

CONFIG = """version: 1
listeners:
  - {name: agents, address: "127.0.0.1:0", surface: agent, auth: none}
upstreams:
  odd: {kind: mcp, address: "{{ env.TEST_DESK_ADDR }}"}
capabilities:
  - id: odd.pair
    description: A tool whose schema uses prefixItems.
    upstream: odd
    tool: pair
    side_effect: read
    risk: low
  - id: odd.missing
    description: No such tool.
    upstream: odd
    tool: nowhere
    side_effect: read
    risk: low
"""


def odd_server(calls: Counter[str]) -> MCPServer:
    server: MCPServer = MCPServer("odd")

    @server.tool()
    def pair(p: tuple[int, str]) -> str:  # pydantic: prefixItems (JSON Schema 2020-12)
        calls["pair"] += 1
        return str(p)

    return server


async def test_unsupported_schemas_and_unknown_tools_are_refused_at_load(
    tmp_path: Path, redis_server: RedisProcess
) -> None:
    odd = await serve(make=odd_server)
    try:
        path = tmp_path / "gateway.yaml"
        path.write_text(CONFIG)
        settings = load_settings(path, environ=environ(odd, redis_server.url))
        pool = ChannelPool()
        with pytest.raises(SnapshotError) as info:
            await build_snapshot(settings, pool)
        await pool.close()
    finally:
        await odd.stop()
    messages = {(p.parts, p.message) for p in info.value.problems}
    assert (
        ("capabilities", 0),
        "upstream odd (capability odd.pair): tool pair inputSchema/properties/p/prefixItems: "
        "prefixItems is not supported (capgate validates JSON Schema draft 7)",
    ) in messages, messages
    assert (
        ("capabilities", 1),
        "upstream odd (capability odd.missing): the server lists no tool named 'nowhere'",
    ) in messages, messages


async def test_an_unreachable_server_at_load_is_a_load_error(
    tmp_path: Path, redis_server: RedisProcess
) -> None:
    odd = await serve(make=odd_server)
    env = environ(odd, redis_server.url)
    await odd.stop()
    path = tmp_path / "gateway.yaml"
    path.write_text(CONFIG.replace("tool: pair", "tool: pair\n    input_schema: {type: object}"))
    pool = ChannelPool()
    with pytest.raises(SnapshotError) as info:
        await build_snapshot(load_settings(path, environ=env), pool)
    await pool.close()
    assert all("cannot list the server's tools" in p.message for p in info.value.problems)


async def test_a_server_gone_after_load_never_started_the_call(
    redis_server: RedisProcess,
) -> None:
    desk = await serve()
    settings = load_settings(HERE / "gateway.yaml", environ=environ(desk, redis_server.url))
    gw = await start(settings, extra_sinks=[MemorySink()])
    agents = grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}")
    admin = grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['admin']}")
    env = McpEnv(gw, desk, MemorySink(), agents, admin)
    try:
        assert (await env.invoke("desk.search", {"query": "x"})).WhichOneof(
            "outcome"
        ) == "completed"
        await desk.stop()
        for capability in ("desk.search", "desk.search_stateless"):
            result = await env.invoke(capability, {"query": "x"})
            code = types_pb2.ErrorCode.Name(result.failed.code)
            assert code == "ERROR_CODE_UPSTREAM_UNAVAILABLE", result
            assert result.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
    finally:
        await agents.close()
        await admin.close()
        await gw.stop(0.5)


async def test_config_check_without_resolving_contacts_no_server(
    tmp_path: Path, redis_server: RedisProcess
) -> None:
    odd = await serve(make=odd_server)
    env = environ(odd, redis_server.url)
    await odd.stop()  # nothing listens: a check that connected would fail
    path = tmp_path / "gateway.yaml"
    path.write_text(CONFIG)
    pool = ChannelPool()
    checked = await check_snapshot(load_settings(path, environ=env), pool, resolve_reflection=False)
    await pool.close()
    assert checked.unresolved == ("odd.pair", "odd.missing")


async def test_a_session_the_server_forgot_is_renewed_once(redis_server: RedisProcess) -> None:
    desk = await serve()
    address = desk.address
    settings = load_settings(HERE / "gateway.yaml", environ=environ(desk, redis_server.url))
    gw = await start(settings, extra_sinks=[MemorySink()])
    agents = grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}")
    admin = grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['admin']}")
    restarted = None
    try:
        env = McpEnv(gw, desk, MemorySink(), agents, admin)
        assert (await env.invoke("desk.search", {"query": "x"})).WhichOneof(
            "outcome"
        ) == "completed"
        await desk.stop()
        restarted = await serve(address)  # a new process of the server: no sessions
        env.desk = restarted
        result = await env.invoke("desk.search", {"query": "printer"})
        assert result.WhichOneof("outcome") == "completed", result
        assert restarted.calls["search_tickets"] == 1
        sessions = [h.get("mcp-session-id") for h in restarted.headers]
        # The call with the forgotten session (404), initialize, initialized, the call again.
        assert sessions[0] is not None and sessions[1] is None
        assert len(set(sessions[2:])) == 1 and sessions[0] not in sessions[2:]
    finally:
        await agents.close()
        await admin.close()
        await gw.stop(0.5)
        if restarted is not None:
            await restarted.stop()


async def test_config_check_reports_an_unsupported_tool_schema_at_file_line(
    tmp_path: Path, redis_server: RedisProcess
) -> None:
    odd = await serve(make=odd_server)
    path = tmp_path / "gateway.yaml"
    path.write_text(CONFIG.replace("{{ env.TEST_DESK_ADDR }}", odd.address))
    out = io.StringIO()
    try:
        with redirect_stdout(out):
            code = await asyncio.to_thread(
                config_main, ["check", str(path), "--resolve-reflection"]
            )
    finally:
        await odd.stop()
    assert code == 1
    lines = out.getvalue().splitlines()
    assert any(
        line.startswith(f"{path}:7: capabilities[0]: upstream odd (capability odd.pair): ")
        and "prefixItems is not supported" in line
        for line in lines
    ), lines
