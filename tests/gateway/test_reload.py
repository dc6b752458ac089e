"""Reloads through the real gateway: a config that cannot be applied yet is tried again."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest
import yaml

from examples.orders.server import serve as serve_orders
from gateway.config.loader import load_settings
from gateway.process import serve as serve_module
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess, free_port
from tests.gateway.conftest import HERE, gateway_environ

pytestmark = pytest.mark.integration


async def test_a_refused_reload_is_tried_again_until_its_upstream_answers(
    orders_upstream: str,
    redis_server: RedisProcess,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A config whose new upstream cannot be resolved yet (server reflection, nothing
    listening) is refused, then tried again with backoff, and lands once the upstream is up."""
    monkeypatch.setattr(serve_module, "RELOAD_RETRY_S", 0.2)
    port = free_port()
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(HERE / "../../examples/orders/orders.pb")
    data["policies"]["paths"] = [str(HERE / "../../examples/policies")]
    run_dir = tempfile.mkdtemp(prefix="cg-")
    environ = gateway_environ(orders_upstream, redis_server.url, run_dir)
    (tmp_path / "gateway.yaml").write_text(yaml.safe_dump(data))
    gw = await start(load_settings(tmp_path / "gateway.yaml", environ=environ))
    later = None
    try:
        data["upstreams"]["later"] = {"address": f"127.0.0.1:{port}", "kind": "grpc"}
        get = next(c for c in data["capabilities"] if c["id"] == "orders.get")
        data["capabilities"].append({**get, "id": "later.get", "upstream": "later"})
        (tmp_path / "gateway.yaml").write_text(yaml.safe_dump(data))
        await gw.reload(load_settings(tmp_path / "gateway.yaml", environ=environ))
        assert "later.get" not in gw.holder.current.capabilities  # refused: nobody answers
        later, _ = await serve_orders(f"127.0.0.1:{port}")
        deadline = asyncio.get_running_loop().time() + 30
        while "later.get" not in gw.holder.current.capabilities:
            assert asyncio.get_running_loop().time() < deadline, "the retry never landed"
            await asyncio.sleep(0.1)
    finally:
        await gw.stop(0.2)
        if later is not None:
            await later.stop(0)


async def test_no_retry_outlives_stop(
    orders_upstream: str,
    redis_server: RedisProcess,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(serve_module, "RELOAD_RETRY_S", 0.1)
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(HERE / "../../examples/orders/orders.pb")
    data["policies"]["paths"] = [str(HERE / "../../examples/policies")]
    environ = gateway_environ(orders_upstream, redis_server.url, tempfile.mkdtemp(prefix="cg-"))
    (tmp_path / "gateway.yaml").write_text(yaml.safe_dump(data))
    gw = await start(load_settings(tmp_path / "gateway.yaml", environ=environ))
    data["upstreams"]["later"] = {"address": f"127.0.0.1:{free_port()}", "kind": "grpc"}
    get = next(c for c in data["capabilities"] if c["id"] == "orders.get")
    data["capabilities"].append({**get, "id": "later.get", "upstream": "later"})
    (tmp_path / "gateway.yaml").write_text(yaml.safe_dump(data))
    await gw.reload(load_settings(tmp_path / "gateway.yaml", environ=environ))
    assert any(t.get_name() == "reload-retry" and not t.done() for t in gw.tasks)
    await gw.stop(0.1)
    await asyncio.sleep(0.5)  # several retry periods
    assert all(t.done() for t in gw.tasks)
    assert all(t.get_name() != "reload-retry" for t in asyncio.all_tasks())


async def test_a_policy_refused_on_reload_is_reported_once_and_not_tried_again(
    orders_upstream: str,
    redis_server: RedisProcess,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 27 defect 4: a policy that does not compile is bad content, not a passing cause:
    the reload is refused and logged once, the running snapshot stays, and nothing tries the
    same content again (docs/config.md "Reload"); the next content is the watcher's."""
    monkeypatch.setattr(serve_module, "RELOAD_RETRY_S", 0.05)
    policies = tmp_path / "policies"
    policies.mkdir()
    for source in (HERE / "../../examples/policies").glob("*.yaml"):
        (policies / source.name).write_text(source.read_text())
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(HERE / "../../examples/orders/orders.pb")
    data["policies"]["paths"] = [str(policies)]
    environ = gateway_environ(orders_upstream, redis_server.url, tempfile.mkdtemp(prefix="cg-"))
    (tmp_path / "gateway.yaml").write_text(yaml.safe_dump(data))
    gw = await start(load_settings(tmp_path / "gateway.yaml", environ=environ))
    try:
        revision = gw.holder.current.revision
        bad = {
            "policies": [
                {
                    "name": "broken",
                    "match": {"capabilities": ["orders.get"]},
                    "rules": [{"when": "input.order_id > 3 &&", "effect": "deny"}],
                }
            ]
        }
        (policies / "broken.yaml").write_text(yaml.safe_dump(bad))
        with caplog.at_level("ERROR", logger="capgate"):
            await gw.reload(load_settings(tmp_path / "gateway.yaml", environ=environ))
        refusals = [r for r in caplog.records if "reload refused" in r.getMessage()]
        assert len(refusals) == 1, refusals
        assert "broken.yaml" in refusals[0].getMessage()
        assert "trying again" not in refusals[0].getMessage()
        assert gw.holder.current.revision == revision  # the running snapshot stays
        assert not any(t.get_name() == "reload-retry" and not t.done() for t in gw.tasks)
    finally:
        await gw.stop(0.2)
