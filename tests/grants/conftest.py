"""Fixtures of the standing-grant tests: tests/grants/gateway.yaml through the real loader and
the real gateway (in-process, real loopback listeners), a real Redis, and the example upstream,
which verifies every forwarded actor token with the gateway's JWKS and keeps its claims here.

Grants are created through the gateway's own store (`gw.runtime.grants`): what this package
tests is their use on the call path, not the admin service that creates them (tests/grantadmin).
"""

from __future__ import annotations

import secrets
import socket
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
import yaml

from capgate.v1 import types_pb2
from examples.orders.server import State, actor_verifier
from examples.orders.server import serve as serve_orders
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.config.settings import Settings
from gateway.model import Actor
from gateway.process.serve import start
from gateway.state.approvals.grants import GrantRecord
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import Env

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
PREFIX = "capgate-grant-use-test"
ALICE = Actor(id="alice", kind="user", issuer="test-idp", roles=("agent",))
FINANCE = Actor(id="fiona", kind="user", issuer="test-idp", roles=("finance", "approver"))


class Clock:
    """The gateway's wall clock, moved by the test (grant expiry is read from it)."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Claims:
    """The example upstream's verifier, keeping the claims of every token it accepted."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seen: list[dict[str, Any]] = []

    def verify(self, token: str) -> dict[str, Any]:
        claims: dict[str, Any] = self.inner.verify(token)
        self.seen.append(claims)
        return claims


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def config_file(tmp_dir: Path) -> Path:
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    for upstream in data["upstreams"].values():
        upstream["descriptor_set"] = str(ROOT / "examples/orders/orders.pb")
    data["policies"]["paths"] = [str(HERE / "policies.yaml")]
    path = tmp_dir / "gateway.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def environ(orders: str, redis_url: str, run_dir: str) -> dict[str, str]:
    return {
        **gateway_environ(orders, redis_url, run_dir),
        "TEST_GONE_ADDR": f"127.0.0.1:{closed_port()}",
    }


def grant_settings(orders: str, redis_url: str, tmp_dir: Path) -> Settings:
    run_dir = tempfile.mkdtemp(prefix="cg-")
    return load_settings(config_file(tmp_dir), environ=environ(orders, redis_url, run_dir))


def new_grant(now: float, **fields: Any) -> GrantRecord:
    """A grant for alice on pay.refund made by a finance approver, for an hour (overridable)."""
    base: dict[str, Any] = {
        "id": secrets.token_hex(8),
        "created_at": now,
        "expires_at": now + 3600,
        "created_by": FINANCE,
        "actor": ALICE,
        "capability_id": "pay.refund",
        "approver_roles": ("approver", "finance"),
    }
    base.update(fields)
    return GrantRecord(**base)


def outcome(result: Any) -> str:
    kind = result.WhichOneof("outcome")
    if kind in ("failed", "cancelled"):
        error = getattr(result, kind)
        return str(types_pb2.ErrorCode.Name(error.code).removeprefix("ERROR_CODE_"))
    return str(kind)


@pytest.fixture(scope="module")
async def upstream() -> AsyncIterator[tuple[str, State]]:
    state = State()
    server, port = await serve_orders("127.0.0.1:0", state=state)
    yield f"127.0.0.1:{port}", state
    await server.stop(0)


@pytest.fixture(scope="module")
async def grants_gateway(
    upstream: tuple[str, State],
    redis_server: RedisProcess,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[Env, Claims]]:
    address, state = upstream
    memory = MemorySink()
    settings = grant_settings(address, redis_server.url, tmp_path_factory.mktemp("grants"))
    gw = await start(settings, extra_sinks=[memory])
    assert gw.runtime.signer is not None
    claims = Claims(actor_verifier(gw.runtime.signer.jwks(), issuer="capgate", audience="orders"))
    state.recorder.verifier = claims
    env = Env(gw=gw, audit=memory, orders_address=address, socket_path="")
    yield env, claims
    for channel in env.channels.values():
        await channel.close()
    await gw.stop(0.5)


@pytest.fixture
async def env(grants_gateway: tuple[Env, Claims], redis_server: RedisProcess) -> AsyncIterator[Env]:
    """The module's gateway with no grant, approval or limit state, an empty trail and upstream
    log, and a clock of the test's own."""
    gateway, claims = grants_gateway
    client = aioredis.from_url(redis_server.url)
    async for key in client.scan_iter(match=f"{PREFIX}:*"):
        await client.delete(key)
    await client.aclose()
    await gateway.reset_upstream()
    claims.seen.clear()
    gateway.audit.events.clear()
    saved = gateway.gw.runtime.wall
    gateway.gw.runtime.wall = Clock()
    yield gateway
    gateway.gw.runtime.wall = saved


@pytest.fixture
def claims(grants_gateway: tuple[Env, Claims]) -> Claims:
    return grants_gateway[1]


@pytest.fixture
def clock(env: Env) -> Clock:
    wall = env.gw.runtime.wall
    assert isinstance(wall, Clock)
    return wall
