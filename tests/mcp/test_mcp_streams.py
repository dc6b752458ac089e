"""`GET /mcp` notification streams through the real MCP listener (gateway/transport/mcp/streams.py):
bounded per session (409) and per actor (429), their slots given back when a stream ends, and
ended cleanly by the drain when the gateway shuts down (gateway/pipeline/drain.py)."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest

from examples.orders.server import serve as serve_orders
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from gateway.transport.mcp.streams import PER_ACTOR, PER_SESSION
from tests.gateway.conftest import gateway_environ
from tests.mcp.mcpkit import McpEnv, bearer, initialize_body, session_headers

pytestmark = pytest.mark.integration
HERE = Path(__file__).parent
SSE = "text/event-stream"


def _headers(session: str | None, actor: str) -> dict[str, str]:
    """`actor` is a subject of its own (alice's token with another `sub`)."""
    headers = {**session_headers(session or "x"), "authorization": bearer("alice", sub=actor)}
    if session is None:
        del headers["mcp-session-id"]
    return headers


@contextlib.asynccontextmanager
async def _stream(
    http: httpx2.AsyncClient, session: str, actor: str = "alice"
) -> AsyncIterator[httpx2.Response]:
    """One open GET stream; entered once the answer's head arrived."""
    headers = {**_headers(session, actor), "accept": SSE}
    async with http.stream("GET", "/mcp", headers=headers) as response:
        yield response


async def _open(
    stack: contextlib.AsyncExitStack, http: httpx2.AsyncClient, session: str, actor: str
) -> httpx2.Response:
    response = await stack.enter_async_context(_stream(http, session, actor))
    assert response.status_code == 200
    return response


async def _status_once_free(http: httpx2.AsyncClient, session: str, actor: str) -> int:
    """The status of a new GET once the server noticed the closed stream (bounded)."""
    for _ in range(100):
        async with _stream(http, session, actor) as response:
            if response.status_code == 200:
                return 200
        await asyncio.sleep(0.05)
    return response.status_code


async def _initialize(http: httpx2.AsyncClient, actor: str) -> str:
    body = initialize_body()
    response = await http.post("/mcp", json=body, headers=_headers(None, actor))
    assert response.status_code == 200, response.text
    return str(response.headers["mcp-session-id"])


async def test_a_session_holds_at_most_its_streams_and_gets_its_slot_back(
    mcp_env: McpEnv,
) -> None:
    async with mcp_env.http() as http, contextlib.AsyncExitStack() as stack:
        session = await _initialize(http, "dora")
        for _ in range(PER_SESSION):
            await _open(stack, http, session, "dora")
        async with _stream(http, session, "dora") as refused:
            assert refused.status_code == 409
            body = (await refused.aread()).decode()
            assert "already open" in body
        await stack.aclose()  # the client closes its streams: the slots come back
        assert await _status_once_free(http, session, "dora") == 200


async def test_an_actor_holds_at_most_its_streams_over_all_sessions(mcp_env: McpEnv) -> None:
    async with mcp_env.http() as http, contextlib.AsyncExitStack() as stack:
        sessions = [await _initialize(http, "erin") for _ in range(PER_ACTOR + 1)]
        for session in sessions[:PER_ACTOR]:
            await _open(stack, http, session, "erin")
        async with _stream(http, sessions[-1], "erin") as refused:
            assert refused.status_code == 429
            assert refused.headers["retry-after"] == "1"
        # Another actor is not refused for erin's streams.
        other = await _initialize(http, "fred")
        await _open(stack, http, other, "fred")
        await stack.aclose()
        assert await _status_once_free(http, sessions[-1], "erin") == 200


async def test_the_drain_ends_an_open_stream_cleanly(redis_server: RedisProcess) -> None:
    orders, orders_port = await serve_orders("127.0.0.1:0")
    environ = gateway_environ(
        f"127.0.0.1:{orders_port}", redis_server.url, tempfile.mkdtemp(prefix="cg-")
    )
    gw = await start(load_settings(HERE / "gateway.yaml", environ=environ))
    try:
        base = f"http://127.0.0.1:{gw.ports()['mcp']}"
        async with httpx2.AsyncClient(base_url=base, timeout=30) as http:
            session = await _initialize(http, "gina")
            async with _stream(http, session, "gina") as response:
                assert response.status_code == 200
                lines = response.aiter_lines()
                assert (await anext(lines)).startswith("id: ")  # the priming event arrived
                stopping = asyncio.ensure_future(gw.stop(10.0))
                # The stream ends as the shutdown begins: the body completes, no read error.
                rest = [line async for line in lines]
            await stopping
        assert not any(line.startswith("data: {") for line in rest)  # nothing was announced
    finally:
        if not gw._stopped:  # the test stopped it already when it got that far
            await gw.stop(0.5)
        await orders.stop(0)
