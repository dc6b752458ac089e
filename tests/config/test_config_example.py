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
        "orders.mine",
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


def test_the_example_lists_the_capability_scoped_policy_its_policies_describe(demo_env):
    """examples/policies/20-refunds.yaml says support-staff-only is listed by orders.refund and
    orders.cancel: the example config does list it there (and only there)."""
    settings = load_settings(EXAMPLE, environ=demo_env)
    listed = {c.id: c.policies for c in settings.capabilities if c.policies}
    assert listed == {
        "orders.refund": ("support-staff-only",),
        "orders.cancel": ("support-staff-only",),
    }


async def test_the_example_config_denies_a_refund_by_a_non_support_actor(demo_env, tmp_path):
    """What `make demo` shows, through the real gateway built from the example config itself
    (its policies, its descriptor set, the real example upstream): a refund by an agent
    without the support role is denied by support-staff-only; with the role it completes."""
    import dataclasses  # noqa: PLC0415
    import time  # noqa: PLC0415

    import grpc  # noqa: PLC0415
    import jwt  # noqa: PLC0415
    import orjson  # noqa: PLC0415

    from capgate.v1 import gateway_pb2, gateway_pb2_grpc, types_pb2  # noqa: PLC0415
    from examples.orders.server import serve as serve_orders  # noqa: PLC0415
    from gateway.process.serve import start  # noqa: PLC0415

    orders, port = await serve_orders("127.0.0.1:0")
    environ = {**demo_env, "CAPGATE_ORDERS_ADDR": f"127.0.0.1:{port}"}
    settings = load_settings(EXAMPLE, environ=environ)
    agents = dataclasses.replace(settings.listeners[0], address="127.0.0.1:0")
    # Only the agents listener, on a free port; approvals and idempotency need Redis, which
    # these calls (a deny and a small refund) never reach.
    settings = dataclasses.replace(
        settings,
        listeners=(agents,),
        approvals=dataclasses.replace(settings.approvals, enabled=False),
        idempotency=dataclasses.replace(settings.idempotency, enabled=False),
        actor_token=dataclasses.replace(settings.actor_token, jwks_out=None),
    )
    gw = await start(settings)
    try:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}")
        stub = gateway_pb2_grpc.CapabilityGatewayStub(channel)

        async def refund(roles: list[str]) -> gateway_pb2.ExecutionResult:
            now = int(time.time())
            claims = {"sub": "dave", "kind": "user", "roles": roles, "iss": "demo-idp"}
            claims |= {"aud": "capgate", "iat": now, "exp": now + 300}
            secret = demo_env["CAPGATE_DEMO_JWT_SECRET"]
            bearer = jwt.encode(claims, secret, algorithm="HS256", headers={"kid": "demo"})
            return await stub.Invoke(
                gateway_pb2.InvokeRequest(
                    capability_id="orders.refund",
                    input_json=orjson.dumps({"order_id": "o-1001", "amount": 25}),
                ),
                metadata=[("authorization", f"Bearer {bearer}")],
                timeout=10,
            )

        denied = await refund(["agent"])
        assert denied.WhichOneof("outcome") == "failed"
        assert denied.failed.code == types_pb2.ERROR_CODE_POLICY_DENIED
        assert denied.failed.message == "Only support staff can refund or cancel orders."
        allowed = await refund(["agent", "support"])
        assert allowed.WhichOneof("outcome") == "completed"
        await channel.close()
    finally:
        await gw.stop(0.1)
        await orders.stop(0)
