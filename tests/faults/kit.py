"""The fault suite's stack: real processes that a test may kill at any step.

- `Upstream`: the example orders server as a child process on a fixed loopback port, so it can
  be SIGKILLed and started again where the gateway expects it. Its call counts live in the
  process: `calls()` reads them over `orders.v1.Control`, `wait_calls` waits for a call to
  arrive (the moment a test kills something "during the upstream call").
- `Stack`: its own AOF Redis, that upstream, and a gateway on tests/gateway/gateway.yaml plus
  the fault capability below: in-process (`start`) or as a real `capgate serve` subprocess.

`faults.get` reads an order like orders.get but is declared `write` (no retries: one attempt
is one upstream call); `faults.gated` is the same and always needs a manager's approval. The
example upstream's `slow-<ms>` fault ids keep a call inside the upstream for <ms>.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import orjson
import redis.asyncio as aioredis
import yaml

from capgate.v1 import admin_pb2, gateway_pb2, types_pb2
from examples.orders import orders_pb2, orders_pb2_grpc
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import Gateway, start
from gateway.state.embedded import RedisProcess, free_port
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import Env, ready_ports

ROOT = HERE.parent.parent
PREFIX = "capgate-test"
GET = "/orders.v1.Orders/GetOrder"
CAPABILITY = "faults.get"
GATED = "faults.gated"
POLICY = """\
policies:
  - name: gated-reads-need-approval
    description: The fault suite's approval gate.
    match:
      capabilities: [faults.gated]
    rules:
      - when: "true"
        effect: require-approval
        message: Slow reads need a manager.
        approval:
          reason: fault suite
          approvers: {roles: [manager]}
"""


def code(result: gateway_pb2.ExecutionResult) -> str:
    outcome = result.WhichOneof("outcome")
    if outcome not in ("failed", "cancelled"):
        return str(outcome)
    err = getattr(result, outcome)
    return types_pb2.ErrorCode.Name(err.code).removeprefix("ERROR_CODE_")


def state(result: gateway_pb2.ExecutionResult) -> str:
    return types_pb2.ExecutionState.Name(result.execution_state).removeprefix("EXECUTION_STATE_")


def retryable(result: gateway_pb2.ExecutionResult) -> bool:
    outcome = result.WhichOneof("outcome")
    return outcome in ("failed", "cancelled") and getattr(result, outcome).retryable


class Upstream:
    """The example upstream in a child process, on one port across restarts."""

    def __init__(self, run_dir: Path) -> None:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.log = run_dir / "upstream.log"
        self.popen: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 30.0) -> Upstream:
        argv = [sys.executable, "-m", "examples.orders.server", "--address", self.address]
        with open(self.log, "ab") as out:
            self.popen = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise RuntimeError(f"upstream exited: {self.log.read_text()[-2000:]}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 0.2),
            ):
                return self
            time.sleep(0.05)
        raise RuntimeError("upstream did not listen")

    def kill(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(10)

    async def calls(self, method: str = GET) -> int:
        async with grpc.aio.insecure_channel(self.address) as ch:
            stats = await orders_pb2_grpc.ControlStub(ch).GetStats(
                orders_pb2.GetStatsRequest(), timeout=5
            )
        return sum(n for key, n in stats.calls.items() if key.endswith(method))

    async def wait_calls(self, n: int, timeout_s: float = 20.0) -> None:
        """Until the upstream has received `n` calls: a call now being inside the upstream."""
        deadline = time.monotonic() + timeout_s
        while await self.calls() < n:
            if time.monotonic() > deadline:
                raise AssertionError(f"the upstream did not receive {n} calls")
            await asyncio.sleep(0.01)


@dataclass
class Stack:
    run_dir: Path
    redis: RedisProcess
    upstream: Upstream
    config: Path
    env: Env | None = None
    serve: subprocess.Popen[bytes] | None = None
    channels: list[grpc.aio.Channel] = field(default_factory=list)

    @classmethod
    def create(cls, tmp_path: Path) -> Stack:
        run_dir = Path(tempfile.mkdtemp(prefix="cgf-"))  # short: unix socket path limit
        redis = RedisProcess(tmp_path / "redis").start()
        upstream = Upstream(run_dir).start()
        policies = tmp_path / "policies"
        policies.mkdir()
        (policies / "faults.yaml").write_text(POLICY)
        data: dict[str, Any] = yaml.safe_load((HERE / "gateway.yaml").read_text())
        data["upstreams"]["orders"]["descriptor_set"] = str(ROOT / "examples/orders/orders.pb")
        data["policies"]["paths"] = [str(ROOT / "examples/policies"), str(policies)]
        for capability in (CAPABILITY, GATED):
            data["capabilities"].append(
                {
                    "id": capability,
                    "description": "Read an order, declared write: one attempt, no retries.",
                    "upstream": "orders",
                    "method": GET,
                    "side_effect": "write",
                    "risk": "medium",
                    "expose": {"agent": True, "direct": True},
                    "timeout": "10s",
                }
            )
        config = tmp_path / "gateway.yaml"
        config.write_text(yaml.safe_dump(data))
        return cls(run_dir, redis, upstream, config)

    def environ(self) -> dict[str, str]:
        return gateway_environ(self.upstream.address, self.redis.url, str(self.run_dir))

    async def start_in_process(self) -> Env:
        settings = load_settings(self.config, environ=self.environ())
        memory = MemorySink()
        gw: Gateway = await start(settings, extra_sinks=[memory])
        self.env = Env(
            gw=gw,
            audit=memory,
            orders_address=self.upstream.address,
            socket_path=f"{self.run_dir}/capgate.sock",
        )
        return self.env

    def spawn_serve(self, grace_s: float = 10.0) -> Path:
        """Start `capgate serve` as a child process; returns the ready file it will write."""
        ready = self.run_dir / "ready.json"
        ready.unlink(missing_ok=True)
        Path(f"{self.run_dir}/capgate.sock").unlink(missing_ok=True)
        argv = [sys.executable, "-m", "gateway.cli.main", "serve", "--config", str(self.config)]
        argv += ["--ready-file", str(ready), "--no-watch", "--grace", str(grace_s)]
        argv += ["--workers", "1"]  # one process: the faults act on it
        with open(self.run_dir / "serve.log", "ab") as out:
            self.serve = subprocess.Popen(
                argv, cwd=ROOT, env=self.environ(), stdout=out, stderr=subprocess.STDOUT
            )
        return ready

    async def start_serve(self, grace_s: float = 10.0) -> dict[str, int]:
        """`capgate serve` as a child process; the listener ports it reports once ready."""
        return await ready_ports(self.spawn_serve(grace_s), timeout_s=60)

    async def redis_client(self) -> aioredis.Redis:
        return aioredis.Redis.from_url(self.redis.url)

    async def approval_status(self, approval_id: str) -> str:
        client = await self.redis_client()
        try:
            value = await client.hget(f"{PREFIX}:{{apr:{approval_id}}}", "status")
        finally:
            await client.aclose()
        return value.decode() if value is not None else "missing"

    async def approval_keys(self) -> int:
        client = await self.redis_client()
        try:
            return len([k async for k in client.scan_iter(match=f"{PREFIX}:{{apr:*")])
        finally:
            await client.aclose()

    async def close(self) -> None:
        if self.env is not None:
            for channel in self.env.channels.values():
                await channel.close()
            await self.env.gw.stop(0.2)
        if self.serve is not None and self.serve.poll() is None:
            self.serve.kill()
            self.serve.wait(10)
        self.upstream.kill()
        self.redis.stop()
        shutil.rmtree(self.run_dir, ignore_errors=True)


async def request_approval(env: Env, order_id: str) -> types_pb2.Approval:
    result = await env.invoke(GATED, {"order_id": order_id})
    assert result.WhichOneof("outcome") == "approval_required", result
    return result.approval_required.approval


async def approve(env: Env, approval: types_pb2.Approval) -> None:
    reply = await env.admin().DecideApproval(
        admin_pb2.DecideApprovalRequest(
            approval_id=approval.id,
            verdict=admin_pb2.VERDICT_APPROVE,
            note="fault suite",
            input_hash=approval.input_hash,
        ),
        metadata=env.metadata("admin", "bob"),
        timeout=10,
    )
    assert not reply.HasField("error"), reply


async def until_reconnected(
    send: Callable[[], Awaitable[gateway_pb2.ExecutionResult]], upstream: Upstream
) -> gateway_pb2.ExecutionResult:
    """What a client following `retryable` sees after the upstream came back: the gateway's
    channel reconnects with backoff, so the first retries may still find it unavailable. Each
    of those must be a truthful NOT_STARTED that reached nothing; the loop is bounded."""
    for _ in range(40):
        result = await send()
        if code(result) != "UPSTREAM_UNAVAILABLE":
            return result
        assert state(result) == "NOT_STARTED" and retryable(result), result
        assert await upstream.calls() == 0
        await asyncio.sleep(0.25)
    raise AssertionError("the gateway did not reach the restarted upstream")


def body(order_id: str) -> bytes:
    return orjson.dumps({"order_id": order_id})
