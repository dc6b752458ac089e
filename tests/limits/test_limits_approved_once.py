"""An approved over-budget call is counted exactly once, whatever its Resumes meet (review 2,
item 1): a Resume that never reached the upstream gives the amount back together with the
approval's marker, so the next Resume spends it again; concurrent Resumes count it once for
the one that runs. Real gateway, real Redis, a real upstream stopped and started again."""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, cast

import pytest
import redis.asyncio as aioredis

from capgate.v1 import types_pb2
from gateway.audit.sinks import MemorySink
from gateway.config.limitspec import BudgetSpec, ExprSite, LimitSpec
from gateway.config.loader import load_settings
from gateway.pipeline.call import Call, Runtime
from gateway.pipeline.stages.limits import give_back
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from gateway.state.limits.store import Charge, RedisLimiter
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import Env
from tests.gateway.test_approval_flow import decide
from tests.gateway.test_approval_release import Upstream
from tests.limits.conftest import HERE, PREFIX
from tests.limits.test_limits_flow import code, refund

pytestmark = [pytest.mark.integration]


@pytest.fixture
async def once_env(limits_redis: RedisProcess) -> AsyncIterator[tuple[Env, Upstream]]:
    if limits_redis.process is None or limits_redis.process.poll() is not None:
        limits_redis.start()
    client = aioredis.from_url(limits_redis.url)
    async for key in client.scan_iter(match=f"{PREFIX}:*"):
        await client.delete(key)
    await client.aclose()
    upstream = Upstream()
    await upstream.start()
    run_dir = tempfile.mkdtemp(prefix="cg-")
    address = f"127.0.0.1:{upstream.port}"
    environ = gateway_environ(address, limits_redis.url, run_dir)
    gw = await start(
        load_settings(HERE / "gateway.yaml", environ=environ), extra_sinks=[MemorySink()]
    )
    env = Env(
        gw=gw, audit=MemorySink(), orders_address=address, socket_path=f"{run_dir}/capgate.sock"
    )
    try:
        yield env, upstream
    finally:
        for channel in env.channels.values():
            await channel.close()
        await gw.stop(0.2)
        if upstream.server is not None:
            await upstream.stop()


async def approved_spent(env: Env) -> float:
    spec = next(s for s in env.gw.settings.limits if s.name == "approved_budget")
    key = env.gw.runtime.limiter.key(spec, "alice")
    return float(await env.gw.redis.hget(key, "spent") or 0)


async def over_budget_approval(env: Env) -> types_pb2.Approval:
    assert (await env.invoke("billing.refund", refund(80))).WhichOneof("outcome") == "completed"
    asked = await env.invoke("billing.refund", refund(50))
    assert asked.WhichOneof("outcome") == "approval_required", asked
    await decide(env, asked.approval_required.approval)
    return asked.approval_required.approval


async def until_upstream_answers(env: Env) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # orders.list: no limit selects it
        listed = await env.invoke("orders.list", {"customer_id": "c-1"})
        if listed.WhichOneof("outcome") == "completed":
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the upstream never answered again")


async def test_a_resume_that_never_ran_gives_back_and_the_next_resume_spends_again(
    once_env: tuple[Env, Upstream],
) -> None:
    env, upstream = once_env
    approval = await over_budget_approval(env)
    await upstream.stop()
    down = await env.resume(approval.id)
    assert code(down) == "UPSTREAM_UNAVAILABLE", down
    assert down.failed.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
    assert await approved_spent(env) == 80  # given back: nothing ran
    await upstream.start()
    await until_upstream_answers(env)
    done = await env.resume(approval.id)
    assert done.WhichOneof("outcome") == "completed", done
    assert upstream.calls("RefundOrder") == 2
    assert await approved_spent(env) == 130  # the approved 50 counted once, for the run


async def test_concurrent_resumes_count_the_approved_amount_exactly_once(
    once_env: tuple[Env, Upstream],
) -> None:
    env, upstream = once_env
    for round_ in range(3):  # a few rounds: the interleavings differ from run to run
        async for key in env.gw.redis.scan_iter(f"{PREFIX}:{{lim}}:*"):
            await env.gw.redis.delete(key)
        approval = await over_budget_approval(env)
        results = await asyncio.gather(*(env.resume(approval.id) for _ in range(12)))
        completed = [r for r in results if r.WhichOneof("outcome") == "completed"]
        assert completed, results
        assert {code(r) for r in results if r not in completed} <= {"APPROVAL_CONSUMED"}
        assert await approved_spent(env) == 130
        assert upstream.calls("RefundOrder") == 2 * (round_ + 1)  # one run per approval


async def test_a_marker_counted_amount_is_given_back_at_most_once(
    limits_redis: RedisProcess,
) -> None:
    """Two checks of one approval (the second finds the marker): both report the amount spent,
    and giving both back credits it once, removing the marker, so a third check spends it."""
    client = aioredis.from_url(limits_redis.url)
    try:
        site = ExprSite("x", 1, 1)
        spec = LimitSpec(
            "once",
            "actor.id",
            site,
            budget=BudgetSpec("input.amount", site, 500.0, 3600.0, "require-approval"),
        )
        limiter = RedisLimiter(client, prefix=f"{PREFIX}-once")
        await client.delete(limiter.key(spec, "alice"))
        charges = [Charge(spec, "alice", 800.0, "apr-1")]
        now = 1_000_000.0
        first = limiter.spent(charges, await limiter.check(charges, now=now))
        second = limiter.spent(charges, await limiter.check(charges, now=now + 1))
        assert first == second and len(first) == 1
        state = limiter.key(spec, "alice")
        assert float(await client.hget(state, "spent") or 0) == 800
        await limiter.give_back(second)
        await limiter.give_back(first)  # the marker is gone: nothing more to credit
        assert float(await client.hget(state, "spent") or 0) == 0
        assert not await client.exists(first[0].marker)
        third = await limiter.check(charges, now=now + 2)
        assert third[0].passed and float(await client.hget(state, "spent") or 0) == 800
    finally:
        await client.aclose()


async def test_the_resume_that_lost_the_consume_credits_nothing(
    limits_redis: RedisProcess,
) -> None:
    """The concurrent-Resume interleaving, step by step (the gateway test above meets it only
    by chance): R1 spends and marks, R2 finds the marker, R2 consumes and runs; R1 lost the
    consume (its approval record is still `approved`), so its give-back credits nothing and
    the amount stays counted once. Then R2's own give-back (had it not run) credits it once."""
    client = aioredis.from_url(limits_redis.url)
    try:
        site = ExprSite("x", 1, 1)
        budget = BudgetSpec("input.amount", site, 100.0, 3600.0, "require-approval")
        spec = LimitSpec("lost", "actor.id", site, budget=budget)
        limiter = RedisLimiter(client, prefix=f"{PREFIX}-lost")
        state = limiter.key(spec, "alice")
        await client.delete(state)
        charges = [Charge(spec, "alice", 50.0, "apr-2")]
        rt = cast(Runtime, SimpleNamespace(limiter=limiter))

        def resume(status: str, spent: tuple[Any, ...]) -> Call:
            record = SimpleNamespace(status=status)
            return cast(
                Call, SimpleNamespace(limit_spent=spent, approval=record, limits_inline=False)
            )

        r1 = limiter.spent(charges, await limiter.check(charges, now=1_000_000.0))
        r2 = limiter.spent(charges, await limiter.check(charges, now=1_000_001.0))
        await give_back(resume("approved", r1), rt)  # R1 lost the consume to R2
        assert float(await client.hget(state, "spent") or 0) == 50  # R2's run counts it
        await give_back(resume("consumed", r2), rt)  # R2 consumed it, then never ran
        assert float(await client.hget(state, "spent") or 0) == 0
        await give_back(resume("consumed", r2), rt)  # again: nothing more
        assert float(await client.hget(state, "spent") or 0) == 0
    finally:
        await client.aclose()
