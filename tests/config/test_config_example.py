"""The demo config in examples/config loads with its documented environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import ConfigError, load_settings

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "config" / "gateway.yaml"
NEEDS = [ROOT / "examples" / "orders" / "orders.pb", ROOT / "examples" / "policies"]

pytestmark = pytest.mark.skipif(
    not all(p.exists() for p in NEEDS),
    reason="examples/orders/orders.pb and examples/policies/ are written by other parts",
)


@pytest.fixture
def demo_env(tmp_path):
    return {
        "CAPGATE_DEMO_JWT_SECRET": "demo-secret-demo-secret-demo-secret!",
        "CAPGATE_AUDIT_HMAC_KEY": "demo-hmac-key-demo-hmac-key-demo-hmac",
        "CAPGATE_RUN_DIR": str(tmp_path),
        "CAPGATE_ORDERS_ADDR": "127.0.0.1:50051",
    }


def test_the_example_config_loads(demo_env, tmp_path):
    settings = load_settings(EXAMPLE, environ=demo_env)
    assert [(lst.name, lst.surface, lst.role, lst.auth) for lst in settings.listeners] == [
        ("agents", "agent", "caller", "jwt"),
        ("local", "direct", "caller", "trusted-local"),
        ("mcp", "mcp", "caller", "jwt"),
        ("admin", "admin", "admin", "jwt"),
    ]
    assert settings.listeners[1].address == f"unix://{tmp_path}/capgate.sock"
    caps = {c.id: c for c in settings.capabilities}
    assert set(caps) == {
        "orders.get",
        "orders.list",
        "orders.refund",
        "orders.cancel",
        "admin.orders.purge",
    }
    assert caps["orders.refund"].exposed_on("agent")
    assert caps["orders.refund"].exposed_on("direct")
    purge = caps["admin.orders.purge"]
    assert purge.exposed_on("agent")
    assert not purge.exposed_on("direct")
    assert purge.method == "/capgate.v1.Procedure/Invoke"
    assert settings.upstreams["orders"].address == "127.0.0.1:50051"


def test_the_example_needs_its_variables(demo_env):
    del demo_env["CAPGATE_ORDERS_ADDR"]
    with pytest.raises(ConfigError) as info:
        load_settings(EXAMPLE, environ=demo_env)
    assert {p.message for p in info.value.problems} == {
        "environment variable CAPGATE_ORDERS_ADDR is not set"
    }
    assert len(info.value.problems) == 2  # both upstreams
