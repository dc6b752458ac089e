"""What `capgate serve` says when it cannot start or cannot reach what it needs (issue 27):
the real console script, a real config, real sockets."""

from __future__ import annotations

import asyncio
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import HERE, gateway_environ

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
