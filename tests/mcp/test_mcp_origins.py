"""Origin checks of the MCP listener (DNS-rebinding protection): the listener's own origin and,
on a loopback listener, the loopback equivalents at its port are accepted without being listed;
every foreign origin is refused with 403 before anything runs."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from gateway.config.settings import McpSettings
from gateway.transport.mcp.server import envelope_limits, start_mcp_listener
from tests.mcp.mcpkit import ACCEPT, McpEnv, bearer, initialize_body

pytestmark = pytest.mark.integration

LOOPBACK = ("localhost", "127.0.0.1", "[::1]")


async def _post(mcp_env: McpEnv, port: int, host: str, origin: str) -> tuple[int, dict[str, str]]:
    async with mcp_env.http() as http:
        response = await http.post(
            f"http://127.0.0.1:{port}/mcp",
            json=initialize_body(),
            headers={
                "host": host,
                "origin": origin,
                "authorization": bearer("alice"),
                "accept": ACCEPT,
            },
        )
    return response.status_code, dict(response.headers)


async def test_the_listeners_own_origin_and_its_loopback_equivalents_are_accepted(
    mcp_env: McpEnv,
):
    port = mcp_env.port
    for host_name, origin_name in itertools.product(LOOPBACK, LOOPBACK):
        origin = f"http://{origin_name}:{port}"
        status, headers = await _post(mcp_env, port, f"{host_name}:{port}", origin)
        assert status == 200, (host_name, origin)
        assert headers["access-control-allow-origin"] == origin
        assert "mcp-session-id" in headers
    # Case does not make an origin foreign.
    status, _ = await _post(mcp_env, port, f"localhost:{port}", f"HTTP://LocalHost:{port}")
    assert status == 200


@pytest.mark.parametrize(
    "origin",
    [
        "https://evil.example",
        "http://localhost:{other}",  # another port on this machine is another origin
        "http://127.0.0.1",  # port 80
        "https://localhost:{port}",  # another scheme
        "http://localhost:{port}.evil.example",
        "http://evil.example@localhost:{port}",  # not an origin serialization
        "http://localhost:{port}/mcp",
        "null",  # sandboxed or opaque origins
        "",
        "http://[::2]:{port}",
        "http://10.0.0.1:{port}",
    ],
)
async def test_foreign_origins_are_refused_before_anything_runs(mcp_env: McpEnv, origin: str):
    port = mcp_env.port
    before = len(mcp_env.audit.events)
    value = origin.format(port=port, other=port + 1 if port < 65535 else port - 1)
    status, headers = await _post(mcp_env, port, f"localhost:{port}", value)
    assert status == 403
    assert "mcp-session-id" not in headers
    assert "access-control-allow-origin" not in headers
    assert len(mcp_env.audit.events) == before


async def test_the_resource_urls_origin_is_the_listeners_own(mcp_env: McpEnv):
    """A listener named by `resource_url` (as behind a proxy) accepts that origin and the
    request's own (`scheme://Host`), and still refuses the others."""
    gw = mcp_env.gw
    plain = next(x for x in gw.settings.listeners if x.name == "mcp")
    mcp = dataclasses.replace(
        plain.mcp or McpSettings(),
        allowed_origins=(),
        allowed_hosts=("capgate.example.com",),
        resource_url="https://capgate.example.com/mcp",
    )
    listener = dataclasses.replace(plain, name="mcp-origins", mcp=mcp)
    served = await start_mcp_listener(
        listener, lambda: gw.holder.current, gw.runtime, limits=envelope_limits(gw.settings)
    )
    try:
        port = served.port
        accepted = [
            ("capgate.example.com", "https://capgate.example.com"),
            ("capgate.example.com", "https://capgate.example.com:443"),
            ("capgate.example.com:8080", "http://capgate.example.com:8080"),  # scheme://Host
            (f"localhost:{port}", f"http://127.0.0.1:{port}"),
        ]
        for host, origin in accepted:
            status, _ = await _post(mcp_env, port, host, origin)
            assert status == 200, (host, origin)
        refused = [
            ("capgate.example.com", "http://capgate.example.com:8080"),
            ("capgate.example.com", "https://capgate.example.com:8443"),
            ("capgate.example.com", "https://app.example.com"),
            ("capgate.example.com:8080", "http://capgate.example.com:8081"),
        ]
        for host, origin in refused:
            status, _ = await _post(mcp_env, port, host, origin)
            assert status == 403, (host, origin)
    finally:
        await served.stop(0.5)
