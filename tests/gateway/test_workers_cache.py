"""`capgate serve --workers 2` without `cache.key` (gateway/process/workers.py, docs/cache.md): the
supervisor draws one cache key for its workers, so an entry stored by one worker is a hit on the
other, through the real workers, a real upstream and a real Redis."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import orjson
import pytest

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, types_pb2
from examples.orders.server import State
from examples.orders.server import serve as serve_orders
from gateway.state.embedded import RedisProcess, free_port

ROOT = Path(__file__).resolve().parents[2]
CALLS = 24


@pytest.fixture
async def orders() -> AsyncIterator[tuple[str, State]]:
    state = State()
    server, port = await serve_orders("127.0.0.1:0", state=state)
    yield f"127.0.0.1:{port}", state
    await server.stop(0)


def _config(tmp: Path, redis_url: str, orders: str, port: int, metrics_port: int) -> Path:
    text = f"""
version: 1
listeners:
  - {{name: agents, address: "127.0.0.1:{port}", surface: agent, auth: none}}
upstreams:
  orders:
    address: "{orders}"
    kind: grpc
    descriptor_set: "{ROOT / "examples" / "orders" / "orders.pb"}"
capabilities:
  - id: orders.get
    description: Read one order.
    upstream: orders
    method: /orders.v1.Orders/GetOrder
    side_effect: read
    risk: low
    expose: {{agent: true}}
    cache: {{ttl: 5m, scope: shared}}
redis:
  url: {redis_url}
  key_prefix: capgate-workers-cache
telemetry:
  prometheus_address: "127.0.0.1:{metrics_port}"
"""
    path = tmp / "gateway.yaml"
    path.write_text(text)
    return path


def _supervisor(config: Path, ready: Path) -> subprocess.Popen[bytes]:
    argv = ["serve", "--config", str(config), "--workers", "2", "--ready-file", str(ready)]
    return subprocess.Popen(
        [sys.executable, "-m", "gateway.cli.main", *argv, "--no-watch", "--log-level", "WARNING"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _wait_ready(proc: subprocess.Popen[bytes], ready: Path) -> dict:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:  # say why: its stderr (ports taken, a refused config)
            why = proc.stderr.read().decode(errors="replace")[-2000:] if proc.stderr else ""
            raise AssertionError(f"supervisor exited early ({proc.returncode}): {why}")
        if ready.exists():
            try:
                return json.loads(ready.read_text())
            except ValueError:
                pass
        time.sleep(0.1)
    raise AssertionError("workers not ready")


def _lookups(metrics_port: int) -> dict[str, float]:
    """One worker's `capgate_cache_lookups_total` by result."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("capgate_cache_lookups_total{"):
            labels, _, value = line.rpartition(" ")
            result = labels.split('result="')[1].split('"')[0]
            out[result] = out.get(result, 0.0) + float(value)
    return out


async def _invoke_on_a_new_connection(port: int) -> gateway_pb2.ExecutionResult:
    """Each call on its own TCP connection: SO_REUSEPORT spreads them over the workers."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        request = gateway_pb2.InvokeRequest(
            capability_id="orders.get", input_json=orjson.dumps({"order_id": "o-1001"})
        )
        return await gateway_pb2_grpc.CapabilityGatewayStub(channel).Invoke(request, timeout=10)


@pytest.mark.integration
@pytest.mark.e2e
@pytest.mark.timeout(180)
async def test_two_workers_without_cache_key_share_their_entries(
    tmp_path: Path, redis_server: RedisProcess, orders: tuple[str, State]
) -> None:
    address, state = orders
    port, metrics_port = free_port(), free_port()
    ready = tmp_path / "ready.json"
    config = _config(tmp_path, redis_server.url, address, port, metrics_port)
    proc = _supervisor(config, ready)
    try:
        _wait_ready(proc, ready)
        for _ in range(CALLS):
            result = await _invoke_on_a_new_connection(port)
            assert result.execution_state == types_pb2.EXECUTION_STATE_COMPLETED, result
        per_worker = [_lookups(metrics_port), _lookups(metrics_port + 1)]
        served = [sum(x.values()) for x in per_worker]
        assert all(served), f"one worker served every call: {per_worker}"
        assert sum(served) == CALLS
        # One upstream call in all: the other worker's first lookup was a hit too.
        assert sum(state.recorder.calls.values()) == 1, (per_worker, state.recorder.calls)
        assert all(x.get("hit", 0) >= 1 for x in per_worker), per_worker
        assert not any(x.get("unopened") for x in per_worker), per_worker
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert b"does not open" not in err, err.decode(errors="replace")
