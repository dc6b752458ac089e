"""Fixtures of the hooks tests: the example upstream, a real Redis, the tests' hook server
(capgate_client.hook on loopback, serving the reference `standing` hook and the scripted
`guard`), a crashing hook process, and the real gateway with tests/hooks/gateway.yaml merged
into tests/gateway/gateway.yaml."""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from capgate_client.hook import PreInvoke, PreInvokeResult, serve_hooks

from examples.hooks import reference
from examples.orders.server import serve as serve_orders
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.config.conftest import base, config_dir, env, write
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import Env
from tests.hooks.script import Script

__all__ = ["base", "config_dir", "env", "write"]  # the config tests' fixtures, for ours

HERE = Path(__file__).parent
ROOT = HERE.parent.parent


async def _patient(_: PreInvoke) -> PreInvokeResult:
    await asyncio.sleep(60)
    return PreInvokeResult()


def _broken(_: PreInvoke) -> PreInvokeResult:
    raise RuntimeError("the optional hook is broken")


@pytest.fixture(scope="module")
def script() -> Script:
    return Script()


@pytest.fixture(scope="module")
async def hook_server(script: Script) -> AsyncIterator[str]:
    server, port = await serve_hooks(
        "127.0.0.1:0",
        pre_invoke={
            "standing": reference.standing,
            "guard": script.pre_invoke,
            "patient": _patient,
            "optional": _broken,
        },
        post_invoke={"guard": script.post_invoke},
        post_failure={"guard": script.post_failure},
    )
    yield f"127.0.0.1:{port}"
    await server.stop(0)


@pytest.fixture(scope="module")
async def crasher() -> AsyncIterator[str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE / "crasher.py"),
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 30)
    port = int(line.split()[1])
    yield f"127.0.0.1:{port}"
    if process.returncode is None:
        process.kill()
    await process.wait()


def hooked_config(tmp: Path, extra: dict[str, Any] | None = None) -> Path:
    """tests/gateway/gateway.yaml with the hooks, their policies and three capabilities that
    list capability-scoped hooks (copies of orders.get)."""
    data = yaml.safe_load((ROOT / "tests/gateway/gateway.yaml").read_text())
    hooks = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(ROOT / "examples/orders/orders.pb")
    data["upstreams"].update(hooks["upstreams"])
    data["hooks"] = hooks["hooks"]
    (tmp / "policies").mkdir(exist_ok=True)
    (tmp / "policies" / "hooks.yaml").write_text((HERE / "policies.yaml").read_text())
    data["policies"]["paths"] = [str(tmp / "policies")]
    get = next(c for c in data["capabilities"] if c["id"] == "orders.get")
    for cap_id, hook in (
        ("orders.patient", "patient"),
        ("orders.crashy", "crasher"),
        ("orders.optional", "optional"),
    ):
        data["capabilities"].append({**get, "id": cap_id, "hooks": [hook]})
    data.update(extra or {})
    config = tmp / "gateway.yaml"
    config.write_text(yaml.safe_dump(data))
    return config


@pytest.fixture(scope="module")
async def orders() -> AsyncIterator[str]:
    server, port = await serve_orders("127.0.0.1:0")
    yield f"127.0.0.1:{port}"
    await server.stop(0)


@pytest.fixture(scope="module")
async def hooked(
    orders: str,
    hook_server: str,
    crasher: str,
    redis_server: RedisProcess,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Env]:
    run_dir = tempfile.mkdtemp(prefix="cg-")
    config = hooked_config(tmp_path_factory.mktemp("hooks"))
    environ = {
        **gateway_environ(orders, redis_server.url, run_dir),
        "TEST_HOOKS_ADDR": hook_server,
        "TEST_CRASHER_ADDR": crasher,
    }
    settings = load_settings(config, environ=environ)
    memory = MemorySink()
    gw = await start(settings, extra_sinks=[memory])
    env = Env(gw=gw, audit=memory, orders_address=orders, socket_path=f"{run_dir}/capgate.sock")
    yield env
    for channel in env.channels.values():
        await channel.close()
    await gw.stop(0.2)
