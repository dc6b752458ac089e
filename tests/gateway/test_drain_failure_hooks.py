"""A shutdown never strands what a failed call spent (reviewer item P2), through the real
gateway (in-process, stopped with a short grace), a real Redis, a real upstream (stopped: calls
fail UPSTREAM_UNAVAILABLE, NOT_STARTED) and a real PostFailure hook server whose hook is slow.

Before the fix the observe-only PostFailure hooks ran before anything was recorded: a hook
still running when grpc.aio's stop(grace) aborted the RPC left the resumed call's approval
consumed, its idempotency claim running and no terminal event. Now the approval is given back
and the outcome recorded first (shielded), then the hooks run — cut short once a shutdown
began, so the envelope still reaches the caller — and the terminal event is last."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
import redis.asyncio as aioredis
import yaml
from capgate_client.hook import PostFailure, serve_hooks

from capgate.v1 import gateway_pb2, types_pb2
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import Env, terminal_events
from tests.gateway.test_approval_flow import code, decide, request_approval
from tests.gateway.test_approval_release import Upstream

pytestmark = pytest.mark.integration

PREFIX = "capgate-test-drain-hooks"
GRACE_S = 1.0


class SlowObserver:
    """A PostFailure hook that takes a minute (its configured timeout is longer still)."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.seen: list[str] = []
        self.all_in = asyncio.Event()

    async def __call__(self, request: PostFailure) -> None:
        self.seen.append(request.code)
        if len(self.seen) >= self.expected:
            self.all_in.set()
        await asyncio.sleep(60)


@pytest.fixture
async def slow_hook() -> AsyncIterator[tuple[str, SlowObserver]]:
    observer = SlowObserver(expected=2)
    server, port = await serve_hooks("127.0.0.1:0", post_failure={"slow": observer})
    yield f"127.0.0.1:{port}", observer
    await server.stop(0)


async def test_a_slow_post_failure_hook_at_shutdown_strands_nothing(
    redis_server: RedisProcess, tmp_path: Path, slow_hook: tuple[str, SlowObserver]
) -> None:
    hook_address, observer = slow_hook
    upstream = Upstream()
    await upstream.start()
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(HERE / "../../examples/orders/orders.pb")
    data["policies"]["paths"] = [str(HERE / "../../examples/policies")]
    data["redis"]["key_prefix"] = PREFIX
    data["upstreams"]["hooks"] = {"address": hook_address, "kind": "grpc"}
    data["hooks"] = [
        {
            "name": "slow",
            "upstream": "hooks",
            "calls": ["post_failure"],
            "capabilities": ["orders.*"],
            "timeout": "120s",
        }
    ]
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(data))
    run_dir = tempfile.mkdtemp(prefix="cg-")
    environ = gateway_environ(f"127.0.0.1:{upstream.port}", redis_server.url, run_dir)
    memory = MemorySink()
    gw = await start(load_settings(config, environ=environ), extra_sinks=[memory])
    env = Env(gw=gw, audit=memory, orders_address="", socket_path=f"{run_dir}/capgate.sock")
    client = aioredis.Redis.from_url(redis_server.url)
    stopped = False
    try:
        approval = await request_approval(env)
        await decide(env, approval)
        await upstream.stop()
        resumed = asyncio.ensure_future(env.resume(approval.id))
        keyed = asyncio.ensure_future(
            env.gateway().Invoke(
                gateway_pb2.InvokeRequest(
                    capability_id="orders.get",
                    input_json=b'{"order_id": "o-1001"}',
                    idempotency_key="p2-drain",
                ),
                metadata=env.metadata("agents", "alice"),
            )
        )
        await asyncio.wait_for(observer.all_in.wait(), 30)  # both wait in the slow hook
        await gw.stop(GRACE_S)
        stopped = True
        results = await asyncio.gather(resumed, keyed, return_exceptions=True)
        aborted = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
        assert not aborted, [r.code() for r in aborted]  # each got its envelope
        for result in results:
            assert isinstance(result, gateway_pb2.ExecutionResult)
            assert code(result) == "UPSTREAM_UNAVAILABLE", result
            assert result.failed.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
        resume_result, keyed_result = results
        assert isinstance(resume_result, gateway_pb2.ExecutionResult)
        assert isinstance(keyed_result, gateway_pb2.ExecutionResult)
        # The approval is approved again and the idempotency key free: a retry can run.
        status = await client.hget(f"{PREFIX}:{{apr:{approval.id}}}", "status")
        assert status == b"approved"
        keys = [k async for k in client.scan_iter(f"{PREFIX}:{{idem:*")]
        assert keys == []
        for result, released in ((resume_result, True), (keyed_result, False)):
            events = [e for e in memory.events if e.get("execution_id") == result.execution_id]
            (terminal,) = terminal_events(events)
            assert terminal is events[-1] and terminal["event"] == "capability.failed", events
            assert terminal.get("approval_released", False) is released
            (hook,) = [h for h in terminal["hooks"] if h["call"] == "post_failure"]
            assert hook["hook"] == "slow" and hook["error"] == "cut short by the shutdown"
        assert upstream.calls("/orders.v1.Orders/RefundOrder") == 0
    finally:
        await client.aclose()
        for channel in env.channels.values():
            await channel.close()
        if not stopped:
            await gw.stop(0.2)
