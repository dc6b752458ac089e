"""Handshake-era sessions in Redis: any gateway process serves any session, each actor holds a
bounded number of them, and one actor opening many never ends another actor's session."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import redis.asyncio as aioredis

from gateway.state.embedded import RedisProcess, free_port
from gateway.state.mcp_sessions import MAX_SESSIONS_PER_ACTOR
from gateway.transport.mcp.server import envelope_limits, start_mcp_listener
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import ready_ports
from tests.mcp.mcpkit import ACCEPT, McpEnv, bearer, initialize_body, request, session_headers

pytestmark = pytest.mark.integration

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
PREFIX = "capgate-mcp-test"
SSE = "text/event-stream"


@pytest.fixture
async def two_gateways(
    mcp_env: McpEnv, redis_server: RedisProcess
) -> AsyncIterator[tuple[str, str]]:
    """Two `capgate serve` processes on one config and one Redis; their MCP base URLs."""
    run = Path(tempfile.mkdtemp(prefix="cgm-"))
    environ = gateway_environ(mcp_env.orders_address, redis_server.url, str(run))
    procs: list[subprocess.Popen[bytes]] = []
    urls: list[str] = []
    try:
        for n in range(2):
            ready = run / f"ready-{n}.json"
            argv = [sys.executable, "-m", "gateway.cli.main", "serve", "--config"]
            argv += [str(HERE / "gateway.yaml"), "--ready-file", str(ready), "--no-watch"]
            with open(run / f"serve-{n}.log", "ab") as log:  # noqa: ASYNC230 - at setup
                procs.append(
                    subprocess.Popen(  # noqa: ASYNC220 - started once, reaped off-loop
                        argv, cwd=ROOT, env=environ, stdout=log, stderr=subprocess.STDOUT
                    )
                )
            ports = await ready_ports(ready, timeout_s=60)
            urls.append(f"http://127.0.0.1:{ports['mcp']}")
        yield urls[0], urls[1]
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                await asyncio.to_thread(proc.wait, 20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


async def test_two_gateway_processes_serve_one_session_alternately(
    two_gateways: tuple[str, str],
) -> None:
    first, second = two_gateways
    async with httpx2.AsyncClient(timeout=20) as http:
        opened = await http.post(
            f"{first}/mcp",
            json=initialize_body(),
            headers={"authorization": bearer("alice"), "accept": ACCEPT},
        )
        assert opened.status_code == 200
        session = opened.headers["mcp-session-id"]
        for n, base in enumerate([second, first, second, first]):
            listed = await http.post(
                f"{base}/mcp", json=request(10 + n, "tools/list"), headers=session_headers(session)
            )
            assert listed.status_code == 200, (base, listed.text)
            assert "orders_get" in {t["name"] for t in listed.json()["result"]["tools"]}
        called = await http.post(
            f"{second}/mcp",
            json=request(
                20, "tools/call", {"name": "orders_get", "arguments": {"order_id": "o-1001"}}
            ),
            headers=session_headers(session),
        )
        assert called.json()["result"]["isError"] is False
        # Still the session's own actor only, on either process.
        stranger = await http.post(
            f"{second}/mcp", json=request(21, "ping"), headers=session_headers(session, "bob")
        )
        assert stranger.status_code == 404
        closed = await http.delete(f"{second}/mcp", headers=session_headers(session))
        assert closed.status_code == 204
        gone = await http.post(
            f"{first}/mcp", json=request(22, "ping"), headers=session_headers(session)
        )
        assert gone.status_code == 404


async def test_one_actor_opening_many_sessions_never_ends_another_actors(
    mcp_env: McpEnv, redis_server: RedisProcess
) -> None:
    async with mcp_env.http() as http:
        alices = await mcp_env.initialize(http, "alice")
        bobs = [await mcp_env.initialize(http, "bob") for _ in range(MAX_SESSIONS_PER_ACTOR + 5)]

        async def status(session: str, actor: str) -> int:
            response = await http.post(
                "/mcp", json=request(1, "ping"), headers=session_headers(session, actor)
            )
            return response.status_code

        assert await status(alices, "alice") == 200
        # Bob's own least recently used sessions made room for his newest ones.
        assert [await status(s, "bob") for s in bobs[:5]] == [404] * 5
        assert [await status(s, "bob") for s in bobs[5:]] == [200] * MAX_SESSIONS_PER_ACTOR
    client = aioredis.Redis.from_url(redis_server.url)
    try:
        indexes = [k async for k in client.scan_iter(f"{PREFIX}:mcp:mcp:*:a")]
        sizes = sorted([await client.zcard(k) for k in indexes])
        assert sizes[-1] == MAX_SESSIONS_PER_ACTOR  # bob's, bounded
        for key in [k async for k in client.scan_iter(f"{PREFIX}:mcp:mcp:*:s:*")]:
            assert 0 < await client.pttl(key) <= 3600 * 1000  # the idle timeout (default 1h)
    finally:
        await client.aclose()


async def test_a_session_id_of_another_shape_is_unknown_without_a_lookup(mcp_env: McpEnv) -> None:
    async with mcp_env.http() as http:
        for junk in ["x", "a" * 65, "../../etc", "id with spaces"]:
            response = await http.post(
                "/mcp",
                json=request(1, "ping"),
                headers={**session_headers("placeholder"), "mcp-session-id": junk},
            )
            assert response.status_code == 404, junk


async def _listener(mcp_env: McpEnv, name: str, redis: Any) -> Any:
    gw = mcp_env.gw
    plain = next(x for x in gw.settings.listeners if x.name == "mcp")
    listener = dataclasses.replace(plain, name=name)
    return await start_mcp_listener(
        listener,
        lambda: gw.holder.current,
        gw.runtime,
        limits=envelope_limits(gw.settings),
        redis=redis,
    )


async def test_an_unreachable_redis_is_a_retryable_503_and_the_listener_keeps_serving(
    mcp_env: McpEnv,
) -> None:
    dead = aioredis.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=0.5)
    served = await _listener(mcp_env, "mcp-dead-redis", dead)
    try:
        async with httpx2.AsyncClient(timeout=20) as http:
            base = f"http://127.0.0.1:{served.port}/mcp"
            headers = {"authorization": bearer("alice"), "accept": ACCEPT}
            for _ in range(2):
                refused = await http.post(base, json=initialize_body(), headers=headers)
                assert refused.status_code == 503
                assert refused.headers["retry-after"] == "1"
                assert refused.json()["error"]["code"] == -32600
            lookup = await http.post(
                base, json=request(2, "ping"), headers=session_headers("a" * 32)
            )
            assert lookup.status_code == 503
            metadata = await http.get(
                f"http://127.0.0.1:{served.port}/.well-known/oauth-protected-resource"
            )
            assert metadata.status_code == 200  # the rest of the listener is unaffected
    finally:
        await served.stop(0.5)
        await dead.aclose()


async def test_without_redis_sessions_stay_in_the_process_with_the_same_per_actor_rule(
    mcp_env: McpEnv,
) -> None:
    served = await _listener(mcp_env, "mcp-no-redis", None)
    try:
        async with httpx2.AsyncClient(timeout=20) as http:
            base = f"http://127.0.0.1:{served.port}/mcp"

            async def opened(actor: str) -> str:
                response = await http.post(
                    base,
                    json=initialize_body(),
                    headers={"authorization": bearer(actor), "accept": ACCEPT},
                )
                return str(response.headers["mcp-session-id"])

            async def status(session: str, actor: str) -> int:
                response = await http.post(
                    base, json=request(1, "ping"), headers=session_headers(session, actor)
                )
                return response.status_code

            alices = await opened("alice")
            bobs = [await opened("bob") for _ in range(MAX_SESSIONS_PER_ACTOR + 2)]
            assert await status(alices, "alice") == 200
            assert [await status(s, "bob") for s in bobs[:2]] == [404, 404]
            assert await status(bobs[-1], "bob") == 200
            stream = await http.get(base, headers={**session_headers(alices), "accept": SSE})
            assert stream.status_code == 405  # no notification stream without Redis
    finally:
        await served.stop(0.5)
