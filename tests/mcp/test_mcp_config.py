"""Config of MCP listeners: what is refused at load, what the defaults are, and the tool-name
and session rules the listener relies on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.config import ConfigError, config_schema, load_settings, parse_duration
from gateway.config.mcpnames import APPROVAL_TOOL, build_table, default_tool_name
from gateway.config.settings import McpSettings
from gateway.state.mcp_sessions import LocalSessions, SessionsFull

SECRET = "mcp-test-secret-0123456789-0123456789"


def _jwt() -> dict[str, Any]:
    key = {"kid": "k1", "alg": "HS256", "secret": "{{ env.JWT_SECRET }}"}
    return {"issuers": ["https://idp.example.com"], "audience": "capgate-mcp", "keys": [key]}


def _capability(cap_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": cap_id,
        "description": "A thing.",
        "upstream": "proc",
        "side_effect": "read",
        "risk": "low",
        "input_schema": {"type": "object"},
        "expose": {"mcp": True},
        **fields,
    }


def config(listener: dict[str, Any] | None = None, **mcp: Any) -> dict[str, Any]:
    base = {
        "name": "mcp",
        "address": "127.0.0.1:7445",
        "surface": "mcp",
        "protocol": "mcp",
        "auth": "jwt",
        "jwt": _jwt(),
    }
    if mcp:
        base["mcp"] = mcp
    return {
        "version": 1,
        "listeners": [{**base, **(listener or {})}],
        "upstreams": {"proc": {"address": "127.0.0.1:50052", "kind": "procedure"}},
        "capabilities": [
            _capability("orders.get"),
            _capability("orders.list"),
            _capability("orders_get.x", expose={"agent": True}),
        ],
    }


def load(tmp_path: Path, data: dict[str, Any]) -> Any:
    path = tmp_path / "capgate.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_settings(path, environ={"JWT_SECRET": SECRET})


def problems(tmp_path: Path, data: dict[str, Any]) -> set[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, data)
    return {(p.path_in_file, p.message) for p in info.value.problems}


def test_an_mcp_listener_builds_its_settings(tmp_path: Path):
    settings = load(
        tmp_path,
        config(
            allowed_origins=["https://app.example.com"],
            tool_names={"orders.list": "list_orders"},
            session_idle_timeout="10m",
        ),
    )
    listener = settings.listeners[0]
    assert listener.protocol == "mcp"
    assert listener.mcp is not None
    assert listener.mcp.allowed_origins == ("https://app.example.com",)
    assert dict(listener.mcp.tool_names) == {"orders.list": "list_orders"}
    assert listener.mcp.session_idle_timeout_s == 600


REFUSALS: list[tuple[str, dict[str, Any], tuple[str, str]]] = [
    ("mtls", {"auth": "mtls", "jwt": None}, ("listeners[0].auth", "mcp listeners need auth: jwt")),
    ("none", {"auth": "none", "jwt": None}, ("listeners[0].auth", "mcp listeners need auth: jwt")),
    (
        "admin role",
        {"role": "admin"},
        ("listeners[0].role", "mcp listeners are caller listeners (ApprovalAdmin is gRPC)"),
    ),
    (
        "unix socket",
        {"address": "unix:///tmp/cg/mcp.sock"},
        ("listeners[0].address", "mcp listeners need a host:port address"),
    ),
    (
        "beyond loopback without hosts",
        {"address": "0.0.0.0:7445"},
        (
            "listeners[0].mcp",
            "a listener bound beyond loopback needs allowed_hosts or resource_url",
        ),
    ),
    (
        "an mcp block on a grpc listener",
        {"protocol": "grpc", "mcp": {"path": "/mcp"}},
        ("listeners[0].mcp", "only used with protocol: mcp"),
    ),
]


@pytest.mark.parametrize(("case", "change", "expected"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_listener_refusals(tmp_path: Path, case: str, change: dict[str, Any], expected):
    data = config(change)
    listener = data["listeners"][0]
    for key in [k for k, v in change.items() if v is None]:
        del listener[key]
    assert expected in problems(tmp_path, data)


def test_trusted_local_is_refused_on_an_mcp_listener(tmp_path: Path):
    data = config({"auth": "trusted-local", "address": "unix:///tmp/cg/mcp.sock"})
    del data["listeners"][0]["jwt"]
    found = problems(tmp_path, data)
    assert ("listeners[0].auth", "mcp listeners need auth: jwt") in found
    assert ("listeners[0].auth", "trusted-local is refused on mcp listeners") in found


def test_tool_name_collisions_are_load_errors(tmp_path: Path):
    clash = config(tool_names={"orders.list": "orders_get"})
    assert problems(tmp_path, clash) == {
        (
            "listeners[0].mcp.tool_names",
            "orders.get, orders.list share the tool name orders_get",
        )
    }
    reserved = config(tool_names={"orders.get": APPROVAL_TOOL})
    assert problems(tmp_path, reserved) == {
        (
            "listeners[0].mcp.tool_names",
            f"orders.get takes the reserved tool name {APPROVAL_TOOL}",
        )
    }
    unknown = config(tool_names={"orders.nope": "nope"})
    assert problems(tmp_path, unknown) == {
        ('listeners[0].mcp.tool_names["orders.nope"]', "no capability with this id"),
    }
    bad_name = config(tool_names={"orders.get": "get order"})
    where = {p for p, _ in problems(tmp_path, bad_name)}
    assert where == {'listeners[0].mcp.tool_names["orders.get"]'}


def test_a_name_shared_with_a_capability_not_on_this_surface_is_no_collision(tmp_path: Path):
    # orders_get.x (default name orders_get_x) is exposed on agent only; renaming orders.get to
    # it does not clash, since only capabilities exposed on the listener's surface get names.
    load(tmp_path, config(tool_names={"orders.get": "orders_get_x"}))


def test_without_approvals_the_reserved_name_is_free(tmp_path: Path):
    data = config(tool_names={"orders.get": APPROVAL_TOOL})
    data["approvals"] = {"enabled": False}
    assert load(tmp_path, data).listeners[0].mcp.tool_names["orders.get"] == APPROVAL_TOOL


def test_default_names_replace_what_model_apis_refuse():
    assert default_tool_name("orders.refund") == "orders_refund"
    assert default_tool_name("admin.orders.purge") == "admin_orders_purge"
    assert default_tool_name("a-b_c") == "a-b_c"


def test_a_runtime_collision_leaves_every_clashing_tool_out():
    table, clashes = build_table(["a.b", "a_b", "c"], {}, approval_tool=True)
    assert table.capability("a_b") is None
    assert table.capability("c") == "c"
    assert clashes == ["a.b, a_b share the tool name a_b"]


def test_documented_defaults_are_the_dataclass_defaults():
    schema = config_schema()["definitions"]["mcp"]["properties"]
    defaults = McpSettings()
    checked = 0
    for key, prop in schema.items():
        if "default" not in prop:
            continue
        name, value = key, prop["default"]
        if prop.get("$ref") == "#/definitions/duration":
            name, value = f"{key}_s", parse_duration(value)
        actual = getattr(defaults, name)
        actual = dict(actual) if isinstance(value, dict) else actual
        assert actual == (tuple(value) if isinstance(value, list) else value), key
        checked += 1
    assert checked == 7


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_local_sessions_expire_when_idle_and_belong_to_their_actor():
    clock = _Clock()
    store = LocalSessions(idle_timeout_s=60, max_sessions=4, per_actor=2, clock=clock)
    alice, bob = ("idp", "alice"), ("idp", "bob")
    session = await store.open(alice, "2025-11-25")
    assert await store.get(session.id, ("idp", "carol")) is None
    clock.now = 59
    assert await store.get(session.id, alice) is session  # use renews it
    clock.now = 59 + 61
    assert await store.get(session.id, alice) is None
    kept = await store.open(bob, "2025-11-25")
    first, second, third = [await store.open(alice, "2025-11-25") for _ in range(3)]
    assert await store.get(first.id, alice) is None  # alice's own least recently used first out
    assert await store.get(second.id, alice) is second
    assert await store.get(third.id, alice) is third
    assert await store.get(kept.id, bob) is kept  # never another actor's
    await store.open(bob, "2025-11-25")
    with pytest.raises(SessionsFull):  # full of live sessions: refused, nobody evicted
        await store.open(("idp", "dave"), "2025-11-25")
    assert len(store) == 4
    clock.now += 61  # all idle: room again
    await store.open(("idp", "dave"), "2025-11-25")
    assert len(store) == 1
