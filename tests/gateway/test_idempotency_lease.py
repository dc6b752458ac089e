"""An idempotency claim whose holder died mid-call (issue 14, item 8; ADR 0014), through real
`capgate serve` processes, real Redis and the real upstream: a gateway claims a key, reaches the
upstream and is SIGKILLed. Repeats answer IDEMPOTENCY_IN_PROGRESS (retryable) while the claim's
lease lasts — the execution's deadline plus LEASE_MARGIN_S — and afterwards EXECUTION_FAILED
with execution_state UNKNOWN, not retryable, never running the call again. The in-process
gateway's journal reads an injected clock (the real wall clock plus an offset), so no test
waits for the lease."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import grpc
import pytest

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, types_pb2
from gateway.state.embedded import RedisProcess
from gateway.state.idempotency import LEASE_MARGIN_S, OUTCOME_UNKNOWN_MESSAGE, RedisIdempotencyStore
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import Env, ready_ports, token

pytestmark = [pytest.mark.integration, pytest.mark.e2e]
ROOT = HERE.parent.parent
GET = "/orders.v1.Orders/GetOrder"
TIMEOUT_S = 5.0  # tests/gateway/gateway.yaml: defaults.timeout, orders.get declares none


def code(result: gateway_pb2.ExecutionResult) -> str:
    return types_pb2.ErrorCode.Name(result.failed.code).removeprefix("ERROR_CODE_")


@pytest.fixture
async def shifted(env: Env) -> AsyncIterator[list[float]]:
    """The in-process gateway's journal on an injected clock: wall time + offset[0] seconds."""
    offset = [0.0]
    clock: Callable[[], float] = lambda: time.time() + offset[0]  # noqa: E731
    running = env.gw.runtime.idempotency
    settings = env.gw.settings
    env.gw.runtime.idempotency = RedisIdempotencyStore(
        env.gw.redis,
        prefix=settings.redis.key_prefix,
        ttl_s=settings.idempotency.ttl_s,
        clock=clock,
    )
    try:
        yield offset
    finally:
        env.gw.runtime.idempotency = running


async def _crash_mid_call(
    env: Env, redis_server: RedisProcess, tmp_path: Path, key: str, body: bytes
) -> None:
    """A second gateway on the same Redis claims `key`, sends the call upstream, and dies."""
    ready = tmp_path / "ready.json"
    environ = gateway_environ(env.orders_address, redis_server.url, tempfile.mkdtemp(prefix="cg-"))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "gateway.cli.main", "serve", "--config", str(HERE / "gateway.yaml")),
        *("--ready-file", str(ready), "--no-watch", "--workers", "1"),  # one process to kill
        cwd=ROOT,
        env=environ,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        port = (await ready_ports(ready))["agents"]
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = gateway_pb2_grpc.CapabilityGatewayStub(channel)
            call = stub.Invoke(
                gateway_pb2.InvokeRequest(
                    capability_id="orders.get", input_json=body, idempotency_key=key
                ),
                metadata=[("authorization", f"Bearer {token('alice')}")],
                timeout=20,
            )
            pending = asyncio.ensure_future(call)
            for _ in range(200):  # bounded: until the upstream has the call (≤ 10 s)
                if await env.upstream_calls(GET) == 1:
                    break
                await asyncio.sleep(0.05)
            assert await env.upstream_calls(GET) == 1
            os.kill(proc.pid, signal.SIGKILL)
            await proc.wait()
            with pytest.raises(grpc.aio.AioRpcError):
                await pending  # the dead gateway never answered
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_a_crashed_claim_answers_in_progress_for_its_lease_then_outcome_unknown(
    env: Env, redis_server: RedisProcess, tmp_path: Path, shifted: list[float]
) -> None:
    await env.reset_upstream()
    key, body = f"lease-crash-{time.time_ns()}", {"order_id": "slow-3000"}
    await _crash_mid_call(env, redis_server, tmp_path, key, b'{"order_id": "slow-3000"}')

    # Within the lease (deadline 5 s + margin): in progress, retryable, nothing runs.
    shifted[0] = TIMEOUT_S + LEASE_MARGIN_S - 3
    early = await env.invoke("orders.get", body, idempotency_key=key)
    assert code(early) == "IDEMPOTENCY_IN_PROGRESS" and early.failed.retryable, early
    assert early.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED

    # After it: the outcome is unknown — not retryable, UNKNOWN, and it never runs again.
    shifted[0] = TIMEOUT_S + LEASE_MARGIN_S + 1
    for _ in range(3):
        late = await env.invoke("orders.get", body, idempotency_key=key)
        assert code(late) == "EXECUTION_FAILED", late
        assert not late.failed.retryable
        assert late.execution_state == types_pb2.EXECUTION_STATE_UNKNOWN
        assert late.failed.message == OUTCOME_UNKNOWN_MESSAGE
        assert late.failed.expose_to_model
    # Long after (still inside the key's 1 h TTL): the same answer, never IN_PROGRESS.
    shifted[0] = 1800
    assert code(await env.invoke("orders.get", body, idempotency_key=key)) == "EXECUTION_FAILED"
    assert await env.upstream_calls(GET) == 1  # only the crashed gateway's call

    # The key's answer is not the journal's to change: a new key runs normally.
    fresh = await env.invoke("orders.get", {"order_id": "o-1001"}, idempotency_key=f"{key}-new")
    assert fresh.WhichOneof("outcome") == "completed", fresh


async def test_a_live_claim_past_its_lease_still_records_its_outcome(
    env: Env, shifted: list[float]
) -> None:
    """A gateway that outlives its own lease (a slow Redis write, a paused process) still
    completes the key: repeats first hear "unknown", then get the recorded envelope."""
    await env.reset_upstream()
    key, body = f"lease-live-{time.time_ns()}", {"order_id": "slow-600"}
    first = asyncio.ensure_future(env.invoke("orders.get", body, idempotency_key=key))
    for _ in range(200):
        if await env.upstream_calls(GET) == 1:
            break
        await asyncio.sleep(0.02)
    shifted[0] = TIMEOUT_S + LEASE_MARGIN_S + 1  # the lease is over while the call runs
    meanwhile = await env.invoke("orders.get", body, idempotency_key=key)
    assert code(meanwhile) == "EXECUTION_FAILED"
    assert meanwhile.execution_state == types_pb2.EXECUTION_STATE_UNKNOWN
    done = await first
    assert done.WhichOneof("outcome") == "completed", done
    replay = await env.invoke("orders.get", body, idempotency_key=key)
    assert replay == done
    assert await env.upstream_calls(GET) == 1
