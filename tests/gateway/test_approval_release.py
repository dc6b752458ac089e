"""An approved call is never lost to an upstream that could not be reached (issue 14, item 1's
promise: no approval consumed without an upstream attempt), through the real gateway, a real
Redis and a real upstream that is stopped and started again on the same port.

A Resume consumes the approval; when the call then fails before any request reached the
upstream (NOT_STARTED) for a reason other than governance, the approval is `approved` again
(one Lua transition, only by the consuming execution), audited as `approval_released`. A
stage-9 deny is a governance decision and stays consumed and denied. Whatever happens, at most
one execution ever reaches the upstream (SI-12)."""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
import redis.asyncio as aioredis
import yaml
from redis import exceptions as redis_exceptions

from capgate.v1 import types_pb2
from examples.orders.server import State
from examples.orders.server import serve as serve_orders
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import Env, terminal_events
from tests.gateway.test_approval_flow import REFUND, code, decide, request_approval

pytestmark = pytest.mark.integration

PREFIX = "capgate-test-release"


class Upstream:
    """The example orders server on one fixed port, stopped and started again (same state)."""

    def __init__(self) -> None:
        self.state = State()
        self.server: grpc.aio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server, self.port = await serve_orders(f"127.0.0.1:{self.port}", state=self.state)

    async def stop(self) -> None:
        assert self.server is not None
        await self.server.stop(0)
        self.server = None

    def calls(self, method: str) -> int:
        return sum(n for key, n in self.state.recorder.calls.items() if key.endswith(method))


AUDIT_STREAM = f"{PREFIX}:audit"


@pytest.fixture(params=["best-effort"])
async def release_env(
    request: pytest.FixtureRequest, redis_server: RedisProcess, tmp_path: Path
) -> AsyncIterator[tuple[Env, Upstream]]:
    upstream = Upstream()
    await upstream.start()
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(HERE / "../../examples/orders/orders.pb")
    data["policies"]["paths"] = [str(HERE / "../../examples/policies")]
    data["redis"]["key_prefix"] = PREFIX
    if request.param == "strict":  # capability.started must reach the Redis stream first
        data["audit"].update(strict=True, sinks=["redis"], redis_stream=AUDIT_STREAM)
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(data))
    run_dir = tempfile.mkdtemp(prefix="cg-")
    address = f"127.0.0.1:{upstream.port}"
    settings = load_settings(config, environ=gateway_environ(address, redis_server.url, run_dir))
    memory = MemorySink()
    gw = await start(settings, extra_sinks=[memory])
    env = Env(gw=gw, audit=memory, orders_address=address, socket_path=f"{run_dir}/capgate.sock")
    try:
        yield env, upstream
    finally:
        for channel in env.channels.values():
            await channel.close()
        await gw.stop(0.2)
        if upstream.server is not None:
            await upstream.stop()


async def status_of(redis_server: RedisProcess, approval_id: str) -> str:
    client = aioredis.Redis.from_url(redis_server.url)
    try:
        raw = await client.hget(f"{PREFIX}:{{apr:{approval_id}}}", "status")
    finally:
        await client.aclose()
    assert raw is not None
    return bytes(raw).decode()


async def until_upstream_answers(env: Env) -> None:
    """The gateway's channel reconnects with backoff: wait (bounded) until a read completes."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        result = await env.invoke("orders.get", {"order_id": "o-1001"})
        if result.WhichOneof("outcome") == "completed":
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the upstream never answered again")


async def test_a_resume_that_never_reached_the_upstream_gives_the_approval_back(
    release_env: tuple[Env, Upstream], redis_server: RedisProcess
) -> None:
    env, upstream = release_env
    approval = await request_approval(env)
    await decide(env, approval)
    await upstream.stop()
    failed = await env.resume(approval.id)
    assert code(failed) == "UPSTREAM_UNAVAILABLE", failed
    assert failed.failed.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
    assert failed.failed.retryable
    assert await status_of(redis_server, approval.id) == "approved"
    events = await env.events_for(failed.execution_id)
    names = [e["event"] for e in events]
    assert names.index("capability.approval_consumed") < names.index("capability.approval_released")
    (terminal,) = terminal_events(events)
    assert terminal is events[-1] and terminal["event"] == "capability.failed"
    assert terminal["approval_released"] is True
    released = events[names.index("capability.approval_released")]
    assert released["approval_id"] == approval.id and released["code"] == "UPSTREAM_UNAVAILABLE"
    # Again while the upstream is still down: given back again, nothing reached it.
    again = await env.resume(approval.id)
    assert code(again) == "UPSTREAM_UNAVAILABLE"
    assert await status_of(redis_server, approval.id) == "approved"

    await upstream.start()
    await until_upstream_answers(env)
    resumed = await env.resume(approval.id)
    assert resumed.WhichOneof("outcome") == "completed", resumed
    assert upstream.calls(REFUND) == 1
    assert await status_of(redis_server, approval.id) == "executed"
    assert await env.resume(approval.id) == resumed  # the stored envelope, no second run
    assert upstream.calls(REFUND) == 1


async def test_concurrent_resumes_after_a_release_execute_exactly_once(
    release_env: tuple[Env, Upstream], redis_server: RedisProcess
) -> None:
    env, upstream = release_env
    approval = await request_approval(env)
    await decide(env, approval)
    await upstream.stop()
    # Twenty at once while the upstream is down: each consume that wins gives it back, the
    # others see it consumed; nothing reaches the upstream and the approval is not lost.
    down = await asyncio.gather(*(env.resume(approval.id) for _ in range(20)))
    assert {code(r) for r in down} <= {"UPSTREAM_UNAVAILABLE", "APPROVAL_CONSUMED"}
    assert "UPSTREAM_UNAVAILABLE" in {code(r) for r in down}
    assert all(
        r.failed.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
        for r in down
        if code(r) == "UPSTREAM_UNAVAILABLE"
    )
    assert await status_of(redis_server, approval.id) == "approved"

    await upstream.start()
    await until_upstream_answers(env)
    up = await asyncio.gather(*(env.resume(approval.id) for _ in range(20)))
    completed = {r.execution_id for r in up if r.WhichOneof("outcome") == "completed"}
    assert len(completed) == 1, up
    assert {code(r) for r in up if r.WhichOneof("outcome") != "completed"} <= {"APPROVAL_CONSUMED"}
    assert upstream.calls(REFUND) == 1
    assert await status_of(redis_server, approval.id) == "executed"


async def test_a_stage_9_deny_keeps_the_approval_consumed_and_denied(
    release_env: tuple[Env, Upstream], redis_server: RedisProcess
) -> None:
    env, upstream = release_env
    approval = await request_approval(env)
    await decide(env, approval)
    client = aioredis.Redis.from_url(redis_server.url)
    try:  # approval-freshness (examples/policies, execution phase): decided over an hour ago
        key = f"{PREFIX}:{{apr:{approval.id}}}"
        await client.hset(key, "decided_at", str(time.time() - 7200))
    finally:
        await client.aclose()
    denied = await env.resume(approval.id)
    assert code(denied) == "POLICY_DENIED", denied
    assert denied.failed.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
    assert await status_of(redis_server, approval.id) == "executed"
    events = await env.events_for(denied.execution_id)
    assert "capability.approval_released" not in [e["event"] for e in events]
    assert "approval_released" not in events[-1]
    assert await env.resume(approval.id) == denied  # the stored denial
    assert upstream.calls(REFUND) == 0


@pytest.mark.parametrize("release_env", ["strict"], indirect=True)
async def test_strict_audit_failing_after_the_consume_gives_the_approval_back(
    release_env: tuple[Env, Upstream], redis_server: RedisProcess
) -> None:
    """AUDIT_UNAVAILABLE at stage 10 (the strict audit write refused: the stream key turned into
    a string) comes after the consume and before any upstream call: given back."""
    env, upstream = release_env
    approval = await request_approval(env)
    await decide(env, approval)
    client = aioredis.Redis.from_url(redis_server.url)
    try:
        await client.delete(AUDIT_STREAM)
        await client.set(AUDIT_STREAM, "not a stream")
        failed = await env.resume(approval.id)
        assert code(failed) == "AUDIT_UNAVAILABLE", failed
        assert failed.failed.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
        assert await status_of(redis_server, approval.id) == "approved"
        assert upstream.calls(REFUND) == 0
        await client.delete(AUDIT_STREAM)
    finally:
        await client.aclose()
    resumed = await env.resume(approval.id)
    assert resumed.WhichOneof("outcome") == "completed", resumed
    assert upstream.calls(REFUND) == 1
    assert await status_of(redis_server, approval.id) == "executed"


class LostConsumeReply:
    """One of the approval store's scripts (CONSUME unless told) runs in the real Redis, then
    its reply is lost (the fault injected at the one point that matters: between the script and
    its reply). `timeout`: redis-py's command timeout (never retried) raises; `connection`: the
    connection drops; `hang`: the reply never arrives, until the call is cancelled (a caller
    gone, a drain)."""

    def __init__(self, env: Env, mode: str, script: str = "consume") -> None:
        self.store = env.gw.runtime.approvals
        self.script = script
        self.real = self.store._scripts[script]
        self.mode = mode
        self.ran = asyncio.Event()

    async def __call__(self, *, keys: list[str], args: list[object]) -> object:
        await self.real(keys=keys, args=args)
        self.ran.set()
        if self.mode == "timeout":
            raise redis_exceptions.TimeoutError("Timeout reading from socket")
        if self.mode == "connection":
            raise redis_exceptions.ConnectionError("Connection closed by server.")
        await asyncio.Event().wait()  # cancelled by the caller's cancel or the drain
        raise AssertionError("unreachable")

    def __enter__(self) -> LostConsumeReply:
        self.store._scripts[self.script] = self
        return self

    def __exit__(self, *exc: object) -> None:
        self.store._scripts[self.script] = self.real


async def until_status(redis_server: RedisProcess, approval_id: str, status: str) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if await status_of(redis_server, approval_id) == status:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"approval never {status}: {await status_of(redis_server, approval_id)}")


@pytest.mark.parametrize("lost", ["timeout", "connection", "caller-cancel", "drain"])
async def test_a_consume_whose_reply_is_lost_gives_the_approval_back(
    release_env: tuple[Env, Upstream], redis_server: RedisProcess, lost: str
) -> None:
    """The CONSUME ran (the record is consumed by this execution) but the gateway never heard
    so: before the fix the approval stayed consumed for good with nothing run, and every later
    Resume answered APPROVAL_CONSUMED (UNKNOWN) although the upstream was never called."""
    env, upstream = release_env
    approval = await request_approval(env)
    await decide(env, approval)
    mode = lost if lost in ("timeout", "connection") else "hang"
    with LostConsumeReply(env, mode) as fault:
        pending = asyncio.ensure_future(env.resume(approval.id))
        await asyncio.wait_for(fault.ran.wait(), 10)
        if mode != "hang":
            failed = await pending
            assert code(failed) == "APPROVAL_UNAVAILABLE", failed
            assert failed.failed.retryable
        elif lost == "caller-cancel":
            pending.cancel()
            with pytest.raises(asyncio.CancelledError):
                await pending
        else:
            assert len(env.gw.runtime.drain.cancel_running()) == 1
            failed = await pending
            assert code(failed) == "CANCELLED", failed
            assert failed.cancelled.retryable
            assert failed.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
        await until_status(redis_server, approval.id, "approved")
    assert upstream.calls(REFUND) == 0
    if lost != "caller-cancel":
        events = await env.events_for(failed.execution_id)
        names = [e["event"] for e in events]
        assert names.index("capability.approval_consumed") < names.index(
            "capability.approval_released"
        )
        assert events[-1]["event"] in {"capability.failed", "capability.cancelled"}
        assert events[-1]["approval_released"] is True
    resumed = await env.resume(approval.id)
    assert resumed.WhichOneof("outcome") == "completed", resumed
    assert upstream.calls(REFUND) == 1
    assert await status_of(redis_server, approval.id) == "executed"
    assert await env.resume(approval.id) == resumed  # the stored envelope, no second run
    assert upstream.calls(REFUND) == 1


async def test_a_consume_refused_by_the_store_gives_nothing_back(
    release_env: tuple[Env, Upstream], redis_server: RedisProcess
) -> None:
    """A consume the store answered (here: another execution holds the record) is no lost
    reply: nothing is released, the other execution's consume stands."""
    env, upstream = release_env
    approval = await request_approval(env)
    await decide(env, approval)
    with LostConsumeReply(env, "hang") as fault:
        first = asyncio.ensure_future(env.resume(approval.id))
        await asyncio.wait_for(fault.ran.wait(), 10)
        fault.store._scripts["consume"] = fault.real
        second = await env.resume(approval.id)
        assert code(second) == "APPROVAL_CONSUMED", second
        assert await status_of(redis_server, approval.id) == "consumed"
        events = await env.events_for(second.execution_id)
        assert "capability.approval_released" not in [e["event"] for e in events]
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
    await until_status(redis_server, approval.id, "approved")  # the first one's, given back
    assert upstream.calls(REFUND) == 0


async def test_a_release_whose_reply_is_lost_still_runs_once_later(
    release_env: tuple[Env, Upstream], redis_server: RedisProcess
) -> None:
    """The same fault one step later: the RELEASE ran (approved again) but its reply was lost.
    The pipeline then tries to finish a record it no longer holds; that is refused, so the
    approval stays approved and the next Resume runs the call exactly once."""
    env, upstream = release_env
    approval = await request_approval(env)
    await decide(env, approval)
    await upstream.stop()
    with LostConsumeReply(env, "timeout", script="release"):
        failed = await env.resume(approval.id)
    assert code(failed) == "UPSTREAM_UNAVAILABLE", failed
    assert failed.failed.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
    assert await status_of(redis_server, approval.id) == "approved"
    await upstream.start()
    await until_upstream_answers(env)
    resumed = await env.resume(approval.id)
    assert resumed.WhichOneof("outcome") == "completed", resumed
    assert upstream.calls(REFUND) == 1
    assert await status_of(redis_server, approval.id) == "executed"
