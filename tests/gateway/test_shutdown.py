"""Graceful shutdown of the real `capgate serve` process: SIGTERM drains the calls in flight
(they complete), then the process exits 0."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import grpc
import pytest
import yaml

from capgate.v1 import gateway_pb2, gateway_pb2_grpc
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import ready_ports, token

pytestmark = [pytest.mark.integration, pytest.mark.e2e]
ROOT = HERE.parent.parent


async def test_sigterm_drains_calls_in_flight_then_exits_cleanly(
    orders_upstream: str, redis_server: RedisProcess, tmp_path: Path
) -> None:
    ready = tmp_path / "ready.json"
    env = gateway_environ(orders_upstream, redis_server.url, tempfile.mkdtemp(prefix="cg-"))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway.cli.main",
        "serve",
        "--config",
        str(HERE / "gateway.yaml"),
        "--ready-file",
        str(ready),
        "--no-watch",
        "--grace",
        "10",
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        port = (await ready_ports(ready))["agents"]
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = gateway_pb2_grpc.CapabilityGatewayStub(channel)
            md = [("authorization", f"Bearer {token('alice')}")]
            slow = asyncio.ensure_future(
                stub.Invoke(
                    gateway_pb2.InvokeRequest(
                        capability_id="orders.get", input_json=b'{"order_id": "slow-1200"}'
                    ),
                    metadata=md,
                    timeout=20,
                )
            )
            await asyncio.sleep(0.4)  # the call is now waiting on the upstream
            os.kill(proc.pid, signal.SIGTERM)
            result = await slow
            assert result.WhichOneof("outcome") == "completed", result
        assert await asyncio.wait_for(proc.wait(), 20) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_policies_that_do_not_compile_never_start_the_server(
    orders_upstream: str, redis_server: RedisProcess, tmp_path: Path
) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "broken.yaml").write_text(
        "policies:\n  - name: broken\n    rules:\n"
        "      - when: input.amount >\n        effect: deny\n"
    )
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(ROOT / "examples/orders/orders.pb")
    data["policies"]["paths"] = [str(policies)]
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(data))
    env = gateway_environ(orders_upstream, redis_server.url, tempfile.mkdtemp(prefix="cg-"))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway.cli.main",
        "serve",
        "--config",
        str(config),
        "--no-watch",
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 2
    text = stderr.decode()
    assert "cannot start" in text and "broken.yaml:4" in text
    assert "Traceback" not in text


async def test_stop_returns_promptly_however_the_background_tasks_are_caught(
    orders_upstream: str, redis_server: RedisProcess
) -> None:
    """Regression: stopping while the Redis health task was inside a command used to hang for
    ever (redis-py turns the cancellation into a connection error, which the task suppressed,
    and stop() awaited it without a bound). Each stop must return within seconds; before the
    fix roughly one in three hung."""
    for _ in range(8):
        environ = gateway_environ(orders_upstream, redis_server.url, tempfile.mkdtemp(prefix="cg-"))
        gw = await start(
            load_settings(HERE / "gateway.yaml", environ=environ), extra_sinks=[MemorySink()]
        )
        await asyncio.sleep(0)  # the health task is now inside its first ping / sweep
        started = time.monotonic()
        await asyncio.wait_for(gw.stop(0.2), 10)
        assert time.monotonic() - started < 5
        assert all(task.done() for task in gw.tasks)
