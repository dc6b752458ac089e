"""Issue 14 item 9: a call still running when the drain's grace period ends gets a cancelled
envelope that tells the truth about the upstream (never an aborted RPC, UNAVAILABLE, which
gRPC clients treat as safe to retry), with its terminal audit event."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import tempfile
from pathlib import Path

import grpc
import pytest
import redis.asyncio as aioredis
import yaml

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, types_pb2
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.pipeline.drain import answer_at
from gateway.process.serve import Gateway, start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import ready_ports, token

pytestmark = [pytest.mark.integration, pytest.mark.e2e]
ROOT = HERE.parent.parent


def test_answers_before_the_grace_period_ends() -> None:
    assert answer_at(10) == 9.0
    assert answer_at(1) == 0.5
    assert answer_at(0) == 0.0
    assert all(0 <= answer_at(g) < g for g in (0.1, 0.5, 2, 30))


async def test_a_call_in_flight_at_the_end_of_the_grace_gets_a_cancelled_unknown_envelope(
    orders_upstream: str, redis_server: RedisProcess, tmp_path: Path
) -> None:
    """The real `capgate serve`: SIGTERM with a 1 s grace while an upstream call takes 20 s.
    Before the fix grpc.aio aborted the RPC at the end of the grace (UNAVAILABLE)."""
    audit_file = tmp_path / "audit.jsonl"
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(ROOT / "examples/orders/orders.pb")
    data["policies"]["paths"] = [str(ROOT / "examples/policies")]
    data["audit"]["sinks"] = ["file"]
    data["audit"]["file"] = str(audit_file)
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(data))
    ready = tmp_path / "ready.json"
    env = gateway_environ(orders_upstream, redis_server.url, tempfile.mkdtemp(prefix="cg-"))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway.cli.main",
        "serve",
        *("--config", str(config), "--ready-file", str(ready), "--no-watch", "--grace", "1"),
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
            request = gateway_pb2.InvokeRequest(
                capability_id="orders.get", input_json=b'{"order_id": "slow-20000"}'
            )
            slow = asyncio.ensure_future(stub.Invoke(request, metadata=md, timeout=30))
            await _upstream_started(audit_file)
            os.kill(proc.pid, signal.SIGTERM)
            result = await slow  # an envelope: an aborted RPC would raise AioRpcError here
        assert result.WhichOneof("outcome") == "cancelled", result
        assert result.cancelled.code == types_pb2.ERROR_CODE_CANCELLED
        assert result.execution_state == types_pb2.EXECUTION_STATE_UNKNOWN
        assert result.cancelled.execution_state == types_pb2.EXECUTION_STATE_UNKNOWN
        assert not result.cancelled.retryable  # the upstream may have run: not blindly again
        assert not result.cancelled.executed_before_failure
        assert "shutting down" in result.cancelled.message
        assert await asyncio.wait_for(proc.wait(), 20) == 0
        events = [
            e
            for e in map(json.loads, audit_file.read_text().splitlines())
            if e.get("execution_id") == result.execution_id
        ]
        terminal = [e for e in events if e["event"] == "capability.cancelled"]
        assert len(terminal) == 1, events
        assert terminal[0]["code"] == "CANCELLED"
        assert terminal[0]["reason"] == "gateway shutdown"
        assert events[-1] is terminal[0]
        stderr = (await proc.stderr.read()).decode() if proc.stderr else ""
        assert "answered as cancelled" in stderr
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def _upstream_started(audit_file: Path) -> None:
    """Until the file sink holds the call's `capability.started` (stage 10 is behind it)."""
    for _ in range(400):
        if audit_file.exists() and "capability.started" in audit_file.read_text():  # noqa: ASYNC240
            await asyncio.sleep(0.1)  # the call is now waiting on the upstream
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the call never reached the upstream")


async def test_a_call_cancelled_before_the_upstream_says_not_started_and_retryable(
    orders_upstream: str, tmp_path: Path
) -> None:
    """In-process gateway on its own Redis, paused for writes: an idempotent call waits in its
    claim (stage 10) when the drain cancels it. No request reached the upstream: NOT_STARTED,
    retryable, and the claim is released (a retry runs the call)."""
    store = RedisProcess(tmp_path / "redis").start()
    environ = gateway_environ(orders_upstream, store.url, tempfile.mkdtemp(prefix="cg-"))
    memory = MemorySink()
    gw = await start(load_settings(HERE / "gateway.yaml", environ=environ), extra_sinks=[memory])
    admin = aioredis.Redis.from_url(store.url)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}") as channel:
            stub = gateway_pb2_grpc.CapabilityGatewayStub(channel)
            md = [("authorization", f"Bearer {token('alice')}")]
            request = gateway_pb2.InvokeRequest(
                capability_id="orders.get",
                input_json=b'{"order_id": "o-1001"}',
                idempotency_key="drain-not-started",
            )
            await admin.execute_command("CLIENT", "PAUSE", "10000", "WRITE")
            call = asyncio.ensure_future(stub.Invoke(request, metadata=md, timeout=30))
            await _blocked_in_redis(admin, gw)
            assert len(gw.runtime.drain.cancel_running()) == 1
            await asyncio.sleep(0.05)
            await admin.execute_command("CLIENT", "UNPAUSE")
            result = await call
            assert result.WhichOneof("outcome") == "cancelled", result
            assert result.cancelled.code == types_pb2.ERROR_CODE_CANCELLED
            assert result.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
            assert result.cancelled.retryable
            events = [e for e in memory.events if e.get("execution_id") == result.execution_id]
            assert events[-1]["event"] == "capability.cancelled", events
            assert [e["event"] for e in events].count("capability.started") == 0
            # Nothing ran and the claim was released: the same key runs the call now.
            again = await stub.Invoke(request, metadata=md, timeout=30)
            assert again.WhichOneof("outcome") == "completed", again
            assert gw.runtime.drain.running == 0
    finally:
        await admin.execute_command("CLIENT", "UNPAUSE")
        await admin.aclose()
        await gw.stop(0.5)
        store.stop()


async def _blocked_in_redis(admin: aioredis.Redis, gw: Gateway) -> None:
    """Until the call runs stages and a client of the gateway waits in a write the pause
    holds. Nothing before stage 10's claim awaits anything, so that wait is the claim's."""
    for _ in range(400):
        clients = await admin.execute_command("CLIENT", "LIST")
        text = clients.decode() if isinstance(clients, bytes) else str(clients)
        blocked = any("b" in _flags(line) for line in text.splitlines())
        if blocked and gw.runtime.drain.running == 1:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the call never waited on Redis")


def _flags(line: str) -> str:
    for part in line.split():
        if part.startswith("flags="):
            return part.removeprefix("flags=")
    return ""
