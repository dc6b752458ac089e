"""`capgate serve` keeps gRPC core quiet by default (issue 14 follow-up E): a failed TLS
handshake — plain TCP bytes sent to a TLS listener, before any authentication — must not print
a line each on stderr. The real `capgate serve`, a real TLS listener, N raw connections; the
stderr it writes stays bounded whatever N is. An operator's own GRPC_VERBOSITY still wins."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from gateway.state.embedded import RedisProcess
from tests.clients.clientkit import make_tls
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import ready_ports

pytestmark = [pytest.mark.integration, pytest.mark.e2e]
ROOT = HERE.parent.parent
HANDSHAKES = 60


async def _serve_and_probe(
    tmp_path: Path, orders: str, redis_url: str, verbosity: str | None
) -> list[str]:
    """Start `capgate serve` with a TLS agents listener, send HANDSHAKES plaintext probes to
    it, stop it with SIGTERM and return its stderr lines."""
    for name, pem in zip(("ca.pem", "cert.pem", "key.pem"), make_tls(), strict=True):
        (tmp_path / name).write_bytes(pem)
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(ROOT / "examples/orders/orders.pb")
    data["policies"]["paths"] = [str(ROOT / "examples/policies")]
    data["listeners"] = [
        {
            **data["listeners"][0],
            "tls": {"cert_file": str(tmp_path / "cert.pem"), "key_file": str(tmp_path / "key.pem")},
        }
    ]
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(data))
    ready = tmp_path / "ready.json"
    env = gateway_environ(orders, redis_url, tempfile.mkdtemp(prefix="cg-"))
    env.pop("GRPC_VERBOSITY", None)
    env.pop("GRPC_TRACE", None)
    if verbosity is not None:
        env["GRPC_VERBOSITY"] = verbosity
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway.cli.main",
        "serve",
        *("--config", str(config), "--ready-file", str(ready), "--no-watch", "--grace", "0.2"),
        *("--workers", "1"),  # one process's stderr is counted
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        port = (await ready_ports(ready))["agents"]
        for i in range(HANDSHAKES):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + bytes([i]) * 64)
            await writer.drain()
            await asyncio.wait_for(reader.read(), 10)  # the server closes the connection
            writer.close()
        await asyncio.sleep(0.3)
        os.kill(proc.pid, signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 20) == 0
        assert proc.stderr is not None
        return (await proc.stderr.read()).decode(errors="replace").splitlines()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_failed_tls_handshakes_do_not_flood_stderr(
    orders_upstream: str, redis_server: RedisProcess, tmp_path: Path
) -> None:
    lines = await _serve_and_probe(tmp_path, orders_upstream, redis_server.url, None)
    handshake = [line for line in lines if "andshake" in line or "ssl_transport" in line]
    assert len(handshake) == 0, handshake[:3]
    assert len(lines) < HANDSHAKES // 2, lines[:5]  # start and stop lines only


async def test_an_operators_grpc_verbosity_is_kept(
    orders_upstream: str, redis_server: RedisProcess, tmp_path: Path
) -> None:
    lines = await _serve_and_probe(tmp_path, orders_upstream, redis_server.url, "INFO")
    handshake = [line for line in lines if "andshake" in line or "ssl_transport" in line]
    assert len(handshake) >= HANDSHAKES // 2, lines[:5]
