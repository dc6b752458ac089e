"""Hot reload compiles exactly the content that settled (issue 14 follow-up F), through the
real gateway, its real config watcher, the real example upstream and real CEL.

The watcher sees a new policy file settle and loads its settings (revision of that content);
an injected hook between that settle and the snapshot build then rewrites the file in place
and stops half-way, leaving a prefix that parses as an allow-only set. The build must not
compile that prefix (a fail-open window): the reload is refused, the old set keeps answering,
and the next settled content is the one that lands."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest
import yaml

from capgate.v1 import types_pb2
from gateway.audit.sinks import MemorySink
from gateway.config import ConfigWatcher, load_settings
from gateway.config.settings import Settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import Env
from tests.gateway.test_policy_reload_settle import gate

pytestmark = pytest.mark.integration


async def answer(env: Env) -> str:
    result = await env.invoke("orders.get", {"order_id": "o-1001"})
    if result.WhichOneof("outcome") == "failed":
        assert result.failed.code == types_pb2.ERROR_CODE_POLICY_DENIED, result
        return str(result.failed.message)
    return str(result.WhichOneof("outcome"))


async def test_an_edit_between_settle_and_build_is_not_compiled(
    orders_upstream: str, redis_server: RedisProcess, tmp_path: Path
) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    target = policies / "gate.yaml"
    target.write_text(gate("v1"))
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(HERE / "../../examples/orders/orders.pb")
    data["policies"]["paths"] = [str(policies)]
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(data))
    environ = gateway_environ(orders_upstream, redis_server.url, tempfile.mkdtemp(prefix="cg-"))
    settings = load_settings(config, environ=environ)
    gw = await start(settings, extra_sinks=[MemorySink()])
    env = Env(gw=gw, audit=MemorySink(), orders_address=orders_upstream, socket_path="")
    loaded: list[Settings] = []
    errors: list[Exception] = []
    watcher = ConfigWatcher(
        config,
        on_change=loaded.append,
        on_error=errors.append,
        environ=environ,
        initial=settings,
        settle_s=0.05,
    )
    try:
        assert await answer(env) == "closed-v1"
        target.write_text(gate("v2"))
        assert await asyncio.to_thread(watcher.poll), errors
        settled = loaded[-1]
        # The hook: a second, non-atomic edit lands after the settle, before the build.
        v3 = gate("v3")
        with target.open("w") as handle:
            handle.write(v3[: v3.index("  - name: z-gate")])  # parses: allow-only
        await gw.reload(settled)
        assert await answer(env) == "closed-v1"  # refused: neither the prefix nor a lost v2
        assert gw.holder.current.revision != settled.revision
        # The writer finishes; that content settles and lands.
        target.write_text(v3)
        assert await asyncio.to_thread(watcher.poll), errors
        await gw.reload(loaded[-1])
        assert await answer(env) == "closed-v3"
    finally:
        watcher.stop()
        for channel in env.channels.values():
            await channel.close()
        await gw.stop(0.2)
