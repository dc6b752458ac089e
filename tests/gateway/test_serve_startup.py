"""What `capgate serve` says when it cannot start or cannot reach what it needs (issue 27):
the real console script, a real config, real sockets."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import ready_ports

pytestmark = [pytest.mark.integration, pytest.mark.e2e]
ROOT = HERE.parent.parent
CAPGATE = str(Path(sys.executable).parent / "capgate")


def write_config(tmp_path: Path, change: Any = None) -> Path:
    """tests/gateway/gateway.yaml with absolute paths, changed by `change(data)`."""
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(ROOT / "examples/orders/orders.pb")
    data["policies"]["paths"] = [str(ROOT / "examples/policies")]
    if change is not None:
        change(data)
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(data))
    return config


async def run_capgate(*args: str, env: dict[str, str], wait_s: float = 60) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        CAPGATE,
        *args,
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), wait_s)
    assert proc.returncode is not None
    return proc.returncode, out.decode(errors="replace")


async def test_a_taken_port_names_the_listener_and_address_and_exits_2(
    tmp_path: Path, orders_upstream: str, redis_server: RedisProcess
) -> None:
    """Defect 2: a second gateway on a busy port: one line, exit 2, no traceback."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]

        def busy(data: dict[str, Any]) -> None:
            data["listeners"][0]["address"] = f"127.0.0.1:{port}"

        config = write_config(tmp_path, busy)
        env = gateway_environ(orders_upstream, redis_server.url, tempfile.mkdtemp(prefix="cg-"))
        code, out = await run_capgate("serve", "--config", str(config), "--no-watch", env=env)
    assert code == 2, out
    assert "Traceback" not in out
    assert f"capgate: cannot start: listener 'agents' cannot listen on 127.0.0.1:{port}: " in out, (
        out
    )
    assert "another process may be listening there" in out


async def test_an_unreachable_redis_is_said_once_at_start_with_what_it_affects(
    tmp_path: Path, orders_upstream: str
) -> None:
    """Defect 3: serve still starts (Redis may come up later), but says at start, once, which
    URL it cannot reach (no password) and which features that affects."""
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]  # nothing listens there once closed
    url = f"redis://:not-for-logs@127.0.0.1:{port}/0"
    config = write_config(tmp_path)
    ready = tmp_path / "ready.json"
    env = gateway_environ(orders_upstream, url, tempfile.mkdtemp(prefix="cg-"))
    proc = await asyncio.create_subprocess_exec(
        CAPGATE,
        *("serve", "--config", str(config), "--ready-file", str(ready), "--no-watch"),
        *("--workers", "1", "--grace", "0.2"),
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await ready_ports(ready)
        proc.send_signal(signal.SIGTERM)
        assert proc.stderr is not None
        out = (await asyncio.wait_for(proc.stderr.read(), 30)).decode(errors="replace")
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    said = [line for line in out.splitlines() if "cannot reach Redis" in line]
    assert len(said) == 1, out
    assert f"redis.url at redis://127.0.0.1:{port}/0 cannot be reached" in said[0]
    assert "approvals (APPROVAL_UNAVAILABLE)" in said[0] and "idempotency keys" in said[0]
    assert "not-for-logs" not in out


async def test_config_check_connect_names_what_does_not_answer_and_exits_3(
    tmp_path: Path, orders_upstream: str, redis_server: RedisProcess
) -> None:
    """Defect 3: `capgate config check --connect` asks Redis and each upstream once."""
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    url = f"redis://:not-for-logs@127.0.0.1:{port}/0"

    def one_upstream_down(data: dict[str, Any]) -> None:
        data["upstreams"]["orders-procedure"]["address"] = f"127.0.0.1:{port}"

    config = write_config(tmp_path, one_upstream_down)
    env = gateway_environ(orders_upstream, url, tempfile.mkdtemp(prefix="cg-"))
    code, out = await run_capgate("config", "check", "--connect", str(config), env=env)
    assert code == 3, out
    assert f"unreachable: redis.url at redis://127.0.0.1:{port}/0 cannot be reached" in out
    assert f"unreachable: upstream orders-procedure at 127.0.0.1:{port} cannot be reached" in out
    assert "upstream orders " not in out  # the one that listens
    assert "not-for-logs" not in out

    env = gateway_environ(orders_upstream, redis_server.url, tempfile.mkdtemp(prefix="cg-"))
    code, out = await run_capgate(
        "config", "check", "--connect", str(write_config(tmp_path)), env=env
    )
    assert code == 0, out
    assert out.splitlines()[-1] == "0 unreachable", out
