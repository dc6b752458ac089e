"""Issue 25 item 10: when server reflection of a grpc upstream fails, `capgate config check`
and `capgate serve` name the upstream's `address` line (file:line), once, as for every other
upstream problem, not each capability's `upstream` line. Through the real console scripts."""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

pytestmark = [pytest.mark.integration]

CAPGATE = str(Path(sys.executable).parent / "capgate")

CONFIG = """\
version: 1
listeners:
  - name: local
    address: "unix://{run}/capgate.sock"
    surface: direct
    auth: trusted-local
upstreams:
  orders:
    kind: grpc
    address: {address}
capabilities:
  - id: orders.get
    description: Read one order.
    upstream: orders
    method: /orders.v1.Orders/GetOrder
    side_effect: read
    risk: low
    expose: {{direct: true}}
  - id: orders.list
    description: List orders.
    upstream: orders
    method: /orders.v1.Orders/ListOrders
    side_effect: read
    risk: low
    expose: {{direct: true}}
"""
ADDRESS_LINE = 10  # `    address: ...` under upstreams.orders in CONFIG


@pytest.fixture
async def without_reflection() -> AsyncIterator[str]:
    """A real gRPC server that serves no reflection service (answers UNIMPLEMENTED)."""
    server = grpc.aio.server()
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield f"127.0.0.1:{port}"
    await server.stop(None)


def _closed_port() -> str:
    """A loopback address nothing listens on (bound, never listening: refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def _config(tmp_path: Path, address: str) -> Path:
    path = tmp_path / "gateway.yaml"
    path.write_text(CONFIG.format(run=tmp_path, address=address))
    assert path.read_text().splitlines()[ADDRESS_LINE - 1].strip() == f"address: {address}"
    return path


async def _run(*args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        CAPGATE, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, out.decode()


def _assert_names_the_address_line(out: str, path: Path) -> None:
    problems = [line.strip() for line in out.splitlines() if f"{path}:" in line]
    assert len(problems) == 1, out  # one problem: the upstream's, not one per capability
    where = f"{path}:{ADDRESS_LINE}: upstreams.orders.address: "
    # Which capabilities needed it, then the reflection's own failure.
    why = "upstream orders (capabilities orders.get, orders.list): server reflection failed: "
    assert problems[0].startswith(where + why), out
    assert "capabilities[" not in out


@pytest.mark.parametrize("server", ["nothing listening", "no reflection service"])
async def test_config_check_names_the_upstream_address_line(
    server: str, without_reflection: str, tmp_path: Path
) -> None:
    address = _closed_port() if server == "nothing listening" else without_reflection
    path = _config(tmp_path, address)
    code, out = await _run("config", "check", "--resolve-reflection", str(path))
    assert code == 1, out
    _assert_names_the_address_line(out, path)


@pytest.mark.parametrize("server", ["nothing listening", "no reflection service"])
async def test_serve_names_the_upstream_address_line(
    server: str, without_reflection: str, tmp_path: Path
) -> None:
    address = _closed_port() if server == "nothing listening" else without_reflection
    path = _config(tmp_path, address)
    code, out = await _run("serve", "--config", str(path), "--no-watch")
    assert code == 2, out
    assert "cannot start" in out
    _assert_names_the_address_line(out, path)
