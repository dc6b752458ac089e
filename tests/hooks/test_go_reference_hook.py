"""The Go reference hooks (clients/go/examples/hook, on the clients/go/hook helper), built with
`go build` and run as a real process: the standing context reaches a policy, the DLP post-hook
replaces the output, through the real gateway."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator

import orjson
import pytest
import yaml

from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import Env
from tests.hooks.conftest import ROOT

pytestmark = pytest.mark.integration

GO_MODULE = ROOT / "clients" / "go"
MARK = "[removed by dlp]"


@pytest.fixture(scope="module")
async def go_hook(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    binary = tmp_path_factory.mktemp("gohook") / "hook"
    build = await asyncio.create_subprocess_exec(
        "go", "build", "-o", str(binary), "./examples/hook", cwd=GO_MODULE
    )
    assert await asyncio.wait_for(build.wait(), 300) == 0
    process = await asyncio.create_subprocess_exec(
        str(binary), "-address", "127.0.0.1:0", stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 30)
    yield f"127.0.0.1:{int(line.split()[1])}"
    process.terminate()
    await asyncio.wait_for(process.wait(), 10)


@pytest.fixture(scope="module")
async def go_hooked(
    orders: str, go_hook: str, redis_server: RedisProcess, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Env]:
    tmp = tmp_path_factory.mktemp("gohooked")
    data = yaml.safe_load((ROOT / "tests/gateway/gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(ROOT / "examples/orders/orders.pb")
    data["upstreams"]["gohooks"] = {"address": go_hook, "kind": "grpc"}
    data["hooks"] = [
        {
            "name": "standing",
            "upstream": "gohooks",
            "calls": ["pre_invoke"],
            "capabilities": ["orders.refund"],
            "context": {"in_arrears": "boolean", "tier": "string"},
        },
        {"name": "dlp", "upstream": "gohooks", "calls": ["post_invoke"], "tags": ["orders"]},
    ]
    data["policies"]["paths"] = [str(ROOT / "examples/hooks/policies")]
    config = tmp / "gateway.yaml"
    config.write_text(yaml.safe_dump(data))
    run_dir = tempfile.mkdtemp(prefix="cg-")
    settings = load_settings(config, environ=gateway_environ(orders, redis_server.url, run_dir))
    gw = await start(settings, extra_sinks=[MemorySink()])
    env = Env(gw=gw, audit=MemorySink(), orders_address=orders, socket_path=f"{run_dir}/x.sock")
    yield env
    for channel in env.channels.values():
        await channel.close()
    await gw.stop(0.2)


async def test_the_go_standing_hooks_context_reaches_the_example_policy(go_hooked: Env) -> None:
    late = await go_hooked.invoke("orders.refund", {"order_id": "o-1003", "amount": 5})
    assert late.WhichOneof("outcome") == "approval_required", late
    assert list(late.approval_required.approval.reasons) == ["Refund to a customer in arrears."]
    good = await go_hooked.invoke("orders.refund", {"order_id": "o-1001", "amount": 5})
    assert good.WhichOneof("outcome") == "completed", good


async def test_the_go_dlp_hook_replaces_the_output(go_hooked: Env) -> None:
    result = await go_hooked.invoke("orders.get", {"order_id": "o-1001"})
    assert result.WhichOneof("outcome") == "completed", result
    output = orjson.loads(result.completed.output_json)
    assert output["customer_email"] == MARK  # alice@example.com was in the upstream's answer
    assert output["order_id"] == "o-1001"


def test_the_reference_policy_loads_only_with_the_hook_declared() -> None:
    """examples/hooks/policies reads hooks.standing: a config without the hook refuses it."""
    from policy import PolicyLoadError, load_policy_set  # noqa: PLC0415

    paths = [ROOT / "examples/hooks/policies/standing.yaml"]
    declared = {"standing": {"in_arrears": "boolean", "tier": "string"}}
    assert load_policy_set(paths, hooks=declared).policy_names == ("refunds-in-arrears",)
    with pytest.raises(PolicyLoadError) as raised:
        load_policy_set(paths)
    assert "hooks" in str(raised.value)
    with pytest.raises(PolicyLoadError):  # a wrong attribute type is a load error too
        load_policy_set(paths, hooks={"standing": {"in_arrears": "string"}})
