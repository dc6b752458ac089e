"""Redis outages through the real server (DESIGN §7, §12): while Redis is down the approval and
idempotency paths fail with clear retryable errors and nothing executes unclaimed; plain calls
keep working; after a SIGKILL and restart with AOF nothing is lost and nothing runs twice."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from capgate.v1 import types_pb2
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import Env
from tests.gateway.test_approval_flow import decide, request_approval

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def code(result: types_pb2.CapabilityError | object) -> str:
    err = result.failed  # type: ignore[attr-defined]
    return types_pb2.ErrorCode.Name(err.code).removeprefix("ERROR_CODE_")


@pytest.fixture
async def own(orders_upstream: str, tmp_path: Path) -> AsyncIterator[tuple[Env, RedisProcess]]:
    redis = RedisProcess(tmp_path / "redis").start()
    run_dir = tempfile.mkdtemp(prefix="cg-")
    settings = load_settings(
        HERE / "gateway.yaml", environ=gateway_environ(orders_upstream, redis.url, run_dir)
    )
    memory = MemorySink()
    gw = await start(settings, extra_sinks=[memory])
    env = Env(
        gw=gw, audit=memory, orders_address=orders_upstream, socket_path=f"{run_dir}/capgate.sock"
    )
    yield env, redis
    for channel in env.channels.values():
        await channel.close()
    await gw.stop(0.2)
    redis.stop()


async def test_redis_down_fails_only_the_stateful_paths_and_sigkill_loses_nothing(
    own: tuple[Env, RedisProcess],
) -> None:
    env, redis = own
    pending = await request_approval(env)
    approved = await request_approval(env)
    await decide(env, approved)
    done = await env.resume(approved.id)
    assert done.WhichOneof("outcome") == "completed"

    redis.kill()  # SIGKILL right after a consume + finish
    await env.reset_upstream()
    keyed = await env.invoke("orders.get", {"order_id": "o-1001"}, idempotency_key="k-1")
    assert keyed.WhichOneof("outcome") == "failed" and keyed.failed.retryable
    assert await env.upstream_calls() == 0  # never execute unclaimed
    gated = await env.invoke("orders.refund", {"order_id": "o-1001", "amount": 800})
    assert code(gated) == "APPROVAL_UNAVAILABLE" and gated.failed.retryable
    resume_down = await env.resume(pending.id)
    assert resume_down.WhichOneof("outcome") == "failed" and resume_down.failed.retryable
    plain = await env.invoke("orders.get", {"order_id": "o-1001"})
    assert plain.WhichOneof("outcome") == "completed"  # nothing else breaks
    assert await env.upstream_calls() == 1

    redis.start()  # same port, same data directory: the AOF is replayed
    again = await env.resume(approved.id)
    assert again == done  # the stored envelope; not a second run
    assert await env.upstream_calls() == 1
    await decide(env, pending)  # the pending approval survived the crash
    resumed = await env.resume(pending.id)
    assert resumed.WhichOneof("outcome") == "completed"
    assert await env.upstream_calls() == 2
