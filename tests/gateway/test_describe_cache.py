"""Describe and MCP `tools/list` answered from the per-snapshot cache of descriptors (issue 29),
through the real server (in-process gateway, real loopback listeners, real Redis, real
upstream): the answers equal the uncached ones for every actor, before and after a reload, and
an actor attribute a discovery policy reads keeps two actors' entries apart."""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import httpx2
import pytest
import yaml

from capgate.v1 import gateway_pb2, gateway_pb2_grpc
from examples.orders.server import serve as serve_orders
from gateway.config.loader import load_settings
from gateway.pipeline import discovery
from gateway.process.serve import Gateway, start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import token
from tests.mcp.mcpkit import ACCEPT, PROTOCOL, initialize_body, request

pytestmark = pytest.mark.integration

MCP_HERE = Path(__file__).parent.parent / "mcp"
EXAMPLES = Path(__file__).parent.parent.parent / "examples" / "policies"
# orders.refund is shown only to tenant acme; the reload turns it to tenant globex.
TENANT_POLICY = """
policies:
  - name: refunds-for-one-tenant
    phases: [discovery]
    match: {{capabilities: [orders.refund]}}
    rules:
      - when: "!has(actor.attributes.tenant) || actor.attributes.tenant != '{tenant}'"
        effect: hide
"""
# (actor, extra claims): same id and roles, told apart only by the tenant attribute, and others.
ACTORS: list[tuple[str, dict[str, Any]]] = [
    ("alice", {"tenant": "acme"}),
    ("alice", {"tenant": "globex"}),
    ("alice", {}),
    ("bob", {"tenant": "acme"}),
    ("bot", {}),
    ("alice", {"tenant": "acme"}),  # a repeat: answered from the cache
]


def _write(tmp_path: Path, tenant: str) -> Path:
    (tmp_path / "policies").mkdir(exist_ok=True)
    (tmp_path / "policies" / "tenant.yaml").write_text(TENANT_POLICY.format(tenant=tenant))
    data = yaml.safe_load((MCP_HERE / "gateway.yaml").read_text())
    for listener in data["listeners"]:
        if listener.get("auth") == "jwt":
            listener["jwt"]["attribute_claims"] = ["tenant"]
    data["upstreams"]["orders"].pop("descriptor_set", None)
    data["policies"]["paths"] = [str(EXAMPLES), str(tmp_path / "policies")]
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
async def served(
    redis_server: RedisProcess, tmp_path: Path
) -> AsyncIterator[tuple[Gateway, Path, dict[str, str]]]:
    orders, port = await serve_orders("127.0.0.1:0")
    environ = gateway_environ(f"127.0.0.1:{port}", redis_server.url, tempfile.mkdtemp())
    path = _write(tmp_path, "acme")
    gw = await start(load_settings(path, environ=environ))
    try:
        yield gw, path, environ
    finally:
        await gw.stop(0.5)
        await orders.stop(0)


async def _describe(gw: Gateway, actor: str, claims: dict[str, Any]) -> bytes:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}") as channel:
        stub = gateway_pb2_grpc.CapabilityGatewayStub(channel)
        md = [("authorization", f"Bearer {token(actor, **claims)}")]
        response = await stub.Describe(gateway_pb2.DescribeRequest(), metadata=md)
    return bytes(response.SerializeToString(deterministic=True))


async def _tools(gw: Gateway, actor: str, claims: dict[str, Any]) -> list[Any]:
    auth = f"Bearer {token(actor, audience='capgate-mcp', **claims)}"
    base = f"http://127.0.0.1:{gw.ports()['mcp']}"
    async with httpx2.AsyncClient(base_url=base, timeout=20) as http:
        opened = await http.post(
            "/mcp", json=initialize_body(), headers={"authorization": auth, "accept": ACCEPT}
        )
        assert opened.status_code == 200, opened.text
        headers = {
            "authorization": auth,
            "accept": ACCEPT,
            "mcp-session-id": opened.headers["mcp-session-id"],
            "mcp-protocol-version": PROTOCOL,
        }
        listed = await http.post("/mcp", json=request(2, "tools/list"), headers=headers)
    assert listed.status_code == 200, listed.text
    text = listed.text
    if listed.headers["content-type"].startswith("text/event-stream"):
        text = next(line for line in text.splitlines() if line.startswith("data: "))[6:]
    tools: list[Any] = json.loads(text)["result"]["tools"]
    return tools


async def _answers(gw: Gateway) -> list[tuple[bytes, list[Any]]]:
    return [(await _describe(gw, a, c), await _tools(gw, a, c)) for a, c in ACTORS]


async def _uncached(gw: Gateway, monkeypatch: pytest.MonkeyPatch) -> list[tuple[bytes, list[Any]]]:
    with monkeypatch.context() as m:
        m.setattr(discovery, "_actor_paths", lambda reads: None)  # every answer computed
        m.setattr(discovery, "_caches", {})
        return await _answers(gw)


def _shows_refund(answer: tuple[bytes, list[Any]]) -> bool:
    response = gateway_pb2.DescribeResponse.FromString(answer[0])
    described = any(d.id == "orders.refund" for d in response.capabilities)
    listed = any(t["name"] == "orders_refund" for t in answer[1])
    assert described == listed
    return described


async def test_cached_answers_equal_uncached_ones_across_actors_and_a_reload(
    served: tuple[Gateway, Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    gw, path, environ = served
    expected = await _uncached(gw, monkeypatch)
    assert await _answers(gw) == expected  # filling the cache
    assert await _answers(gw) == expected  # answered from it
    assert [_shows_refund(a) for a in expected] == [True, False, False, True, False, True]
    # A reload is a new snapshot: the same actors get what the new policy says.
    _write(path.parent, "globex")
    await gw.reload(load_settings(path, environ=environ))
    after = await _uncached(gw, monkeypatch)
    assert [_shows_refund(a) for a in after] == [False, True, False, False, False, False]
    assert await _answers(gw) == after
    assert await _answers(gw) == after


async def test_an_attribute_a_discovery_policy_reads_separates_entries(
    served: tuple[Gateway, Path, dict[str, str]],
) -> None:
    gw, _, _ = served
    # Same id, kind, issuer and roles; only the tenant differs. Either order, cache warm.
    for first, second in (("acme", "globex"), ("globex", "acme"), ("acme", "globex")):
        a = await _describe(gw, "alice", {"tenant": first})
        b = await _describe(gw, "alice", {"tenant": second})
        ids_a = [d.id for d in gateway_pb2.DescribeResponse.FromString(a).capabilities]
        ids_b = [d.id for d in gateway_pb2.DescribeResponse.FromString(b).capabilities]
        assert ("orders.refund" in ids_a) == (first == "acme")
        assert ("orders.refund" in ids_b) == (second == "acme")
        tools = await _tools(gw, "alice", {"tenant": second})
        assert any(t["name"] == "orders_refund" for t in tools) == (second == "acme")


TIME_POLICY = """
policies:
  - name: refunds-until-2030
    phases: [discovery]
    match: {capabilities: [orders.refund]}
    rules:
      - when: "request.now > timestamp('2030-01-01T00:00:00Z')"
        effect: hide
"""


async def test_a_discovery_policy_reading_the_time_is_never_answered_from_the_cache(
    served: tuple[Gateway, Path, dict[str, str]],
) -> None:
    gw, path, environ = served
    (path.parent / "policies" / "time.yaml").write_text(TIME_POLICY)
    await gw.reload(load_settings(path, environ=environ))
    saved = gw.runtime.wall
    try:
        seen = []
        for wall in (1_800_000_000.0, 1_900_000_000.0, 1_800_000_000.0):  # 2027, 2030, 2027
            gw.runtime.wall = lambda wall=wall: wall
            answer = gateway_pb2.DescribeResponse.FromString(
                await _describe(gw, "alice", {"tenant": "acme"})
            )
            seen.append(any(d.id == "orders.refund" for d in answer.capabilities))
        assert seen == [True, False, True]
    finally:
        gw.runtime.wall = saved
