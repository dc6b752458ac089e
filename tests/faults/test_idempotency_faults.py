"""Redis and the upstream killed at every step of a keyed call (the idempotency journal),
through the real gateway, a real upstream process and a real AOF Redis. A key never runs its
call twice, a call that never reached the upstream never blocks its key, and every envelope
tells the truth about the upstream."""

from __future__ import annotations

import asyncio

import pytest

from tests.faults.kit import CAPABILITY, Stack, code, retryable, state, until_reconnected

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# A repeat of a key whose outcome could not be recorded must not run again: it answers that the
# call is in progress (the claim is still running) or, once the claim's lease is over (issue 14
# item 8), an outcome-unknown result.
NOT_RERUN = {"IDEMPOTENCY_IN_PROGRESS", "EXECUTION_FAILED", "CANCELLED", "TIMEOUT"}


async def test_redis_down_before_the_claim_executes_nothing_and_the_key_works_after(
    stack: Stack,
) -> None:
    env = await stack.start_in_process()
    stack.redis.kill()
    down = await env.invoke(CAPABILITY, {"order_id": "o-1001"}, idempotency_key="k-claim")
    assert code(down) == "UPSTREAM_UNAVAILABLE" and retryable(down)
    assert state(down) == "NOT_STARTED"
    assert await stack.upstream.calls() == 0  # never executed unclaimed
    stack.redis.start()
    done = await env.invoke(CAPABILITY, {"order_id": "o-1001"}, idempotency_key="k-claim")
    assert code(done) == "completed"
    again = await env.invoke(CAPABILITY, {"order_id": "o-1001"}, idempotency_key="k-claim")
    assert again == done
    assert await stack.upstream.calls() == 1


async def test_redis_killed_during_the_keyed_call_never_runs_it_twice(stack: Stack) -> None:
    env = await stack.start_in_process()
    call = asyncio.ensure_future(
        env.invoke(CAPABILITY, {"order_id": "slow-1500"}, idempotency_key="k-during")
    )
    await stack.upstream.wait_calls(1)  # claimed, and now inside the upstream
    stack.redis.kill()
    result = await asyncio.wait_for(call, 30)
    assert state(result) in {"COMPLETED", "UNKNOWN"}, result  # it did run
    stack.redis.start()
    again = await env.invoke(CAPABILITY, {"order_id": "slow-1500"}, idempotency_key="k-during")
    if again.execution_id != result.execution_id:  # not the recorded envelope: never re-run
        assert code(again) in NOT_RERUN, again
        assert state(again) != "NOT_STARTED" or code(again) == "IDEMPOTENCY_IN_PROGRESS"
    assert await stack.upstream.calls() == 1


async def test_upstream_down_before_the_keyed_call_releases_the_key(stack: Stack) -> None:
    env = await stack.start_in_process()
    stack.upstream.kill()
    down = await env.invoke(CAPABILITY, {"order_id": "o-1001"}, idempotency_key="k-release")
    assert code(down) == "UPSTREAM_UNAVAILABLE" and retryable(down)
    assert state(down) == "NOT_STARTED"
    stack.upstream.start()
    done = await until_reconnected(
        lambda: env.invoke(CAPABILITY, {"order_id": "o-1001"}, idempotency_key="k-release"),
        stack.upstream,
    )
    assert code(done) == "completed", done  # the key was released: the retry runs
    assert await stack.upstream.calls() == 1


async def test_upstream_killed_during_the_keyed_call_replays_unknown(stack: Stack) -> None:
    env = await stack.start_in_process()
    call = asyncio.ensure_future(
        env.invoke(CAPABILITY, {"order_id": "slow-3000"}, idempotency_key="k-lost")
    )
    await stack.upstream.wait_calls(1)
    stack.upstream.kill()
    result = await asyncio.wait_for(call, 30)
    assert state(result) == "UNKNOWN", result
    stack.upstream.start()
    again = await env.invoke(CAPABILITY, {"order_id": "slow-3000"}, idempotency_key="k-lost")
    assert again == result  # recorded UNKNOWN: replayed, never re-run
    assert await stack.upstream.calls() == 0
