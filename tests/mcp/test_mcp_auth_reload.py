"""A reload applies new JWT keys to the MCP listener too (and to the gRPC listeners beside
it), without restarting it: the old secret's tokens get 401, the new one's are served."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from dataclasses import replace

import httpx2
import pytest

from examples.orders.server import serve as serve_orders
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import Gateway, start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import token
from tests.mcp.conftest import HERE
from tests.mcp.mcpkit import ACCEPT, AUDIENCE, initialize_body

NEW_SECRET = "rotated-secret-0123456789-0123456789-xyz"


def _bearer(secret: str) -> str:
    return "Bearer " + token("alice", audience=AUDIENCE, key=secret)


async def _status(port: int, authorization: str) -> int:
    async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=20) as http:
        response = await http.post(
            "/mcp",
            json=initialize_body(),
            headers={"authorization": authorization, "accept": ACCEPT},
        )
        return response.status_code


@pytest.fixture
async def served(redis_server: RedisProcess) -> AsyncIterator[tuple[Gateway, dict[str, str]]]:
    """A gateway from tests/mcp/gateway.yaml (MCP listener included) and its environment."""
    orders, orders_port = await serve_orders("127.0.0.1:0")
    environ = gateway_environ(
        f"127.0.0.1:{orders_port}", redis_server.url, tempfile.mkdtemp(prefix="cg-")
    )
    gw = await start(
        load_settings(HERE / "gateway.yaml", environ=environ), extra_sinks=[MemorySink()]
    )
    yield gw, environ
    await gw.stop(0.2)
    await orders.stop(0)


async def test_a_reload_rotates_the_mcp_listeners_keys(
    served: tuple[Gateway, dict[str, str]],
) -> None:
    gw, environ = served
    old_secret = environ["TEST_JWT_SECRET"]
    port = gw.ports()["mcp"]
    assert await _status(port, _bearer(old_secret)) == 200
    assert await _status(port, _bearer(NEW_SECRET)) == 401
    rotated = load_settings(
        HERE / "gateway.yaml", environ={**environ, "TEST_JWT_SECRET": NEW_SECRET}
    )
    await gw.reload(rotated)
    assert gw.ports()["mcp"] == port  # the same listener, not a restart
    assert await _status(port, _bearer(NEW_SECRET)) == 200
    assert await _status(port, _bearer(old_secret)) == 401
    listeners = {item.listener.name: item.listener for item in gw.servers.items}
    assert listeners["agents"].jwt == rotated.listeners[0].jwt  # gRPC listeners too


async def test_a_key_rotation_applies_even_when_the_snapshot_is_refused_and_the_newest_wins(
    served: tuple[Gateway, dict[str, str]],
) -> None:
    """A revoked key must stop verifying even if the rest of the reload cannot be applied (an
    upstream that cannot be resolved right now), and of two reloads the newer one lands last."""
    gw, environ = served
    old_secret = environ["TEST_JWT_SECRET"]
    port = gw.ports()["mcp"]
    revision = gw.holder.current.revision
    rotated = load_settings(
        HERE / "gateway.yaml", environ={**environ, "TEST_JWT_SECRET": NEW_SECRET}
    )
    broken = replace(
        rotated,
        capabilities=tuple(replace(c, policies=("no-such-policy",)) for c in rotated.capabilities),
    )
    await gw.reload(broken)  # the snapshot is refused...
    assert gw.holder.current.revision == revision
    assert await _status(port, _bearer(NEW_SECRET)) == 200  # ...the keys are not
    assert await _status(port, _bearer(old_secret)) == 401
    original = load_settings(HERE / "gateway.yaml", environ=environ)
    await asyncio.gather(gw.reload(original), gw.reload(rotated))
    assert await _status(port, _bearer(NEW_SECRET)) == 200  # the later one, not the first
    assert await _status(port, _bearer(old_secret)) == 401
