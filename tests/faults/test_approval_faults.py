"""Redis and the upstream killed at every step of the approval flow, through the real gateway
(in-process, real listeners), a real upstream process and a real AOF Redis (SIGKILL, then a
restart on the same data). At every step: no approval executes twice, none is consumed without
an upstream attempt or lost silently, every envelope tells the truth about the upstream, and
the gateway recovers when Redis comes back.

The step between the consume and the upstream call cannot be hit from outside the gateway with
Redis; it is hit with the upstream instead (down when the consumed call is sent)."""

from __future__ import annotations

import asyncio

import pytest

from capgate.v1 import admin_pb2, types_pb2
from tests.faults.kit import (
    GATED,
    Stack,
    approve,
    code,
    request_approval,
    retryable,
    state,
    until_reconnected,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def test_redis_down_before_the_record_is_written_leaves_nothing_behind(
    stack: Stack,
) -> None:
    env = await stack.start_in_process()
    stack.redis.kill()
    refused = await env.invoke(GATED, {"order_id": "slow-1"})
    assert code(refused) == "APPROVAL_UNAVAILABLE" and retryable(refused)
    assert state(refused) == "NOT_STARTED"
    stack.redis.start()
    assert await stack.approval_keys() == 0  # nothing half-written survived
    approval = await request_approval(env, "slow-1")  # the gateway recovered
    await approve(env, approval)
    done = await env.resume(approval.id)
    assert code(done) == "completed" and state(done) == "COMPLETED"
    assert await stack.upstream.calls() == 1


async def test_redis_killed_after_the_request_keeps_the_approval_pending(stack: Stack) -> None:
    env = await stack.start_in_process()
    approval = await request_approval(env, "slow-1")
    stack.redis.kill()
    down = await env.resume(approval.id)
    assert code(down) == "APPROVAL_UNAVAILABLE" and retryable(down)
    assert state(down) == "NOT_STARTED"
    deciding = await env.admin().DecideApproval(
        admin_pb2.DecideApprovalRequest(
            approval_id=approval.id,
            verdict=admin_pb2.VERDICT_APPROVE,
            input_hash=approval.input_hash,
        ),
        metadata=env.metadata("admin", "bob"),
        timeout=10,
    )
    assert deciding.error.code == types_pb2.ERROR_CODE_APPROVAL_UNAVAILABLE
    assert deciding.error.retryable
    stack.redis.start()
    assert await stack.approval_status(approval.id) == "pending"  # the lost decision: retry it
    assert code(await env.resume(approval.id)) == "APPROVAL_PENDING"
    await approve(env, approval)
    done = await env.resume(approval.id)
    assert code(done) == "completed"
    assert await stack.upstream.calls() == 1


async def test_redis_killed_after_the_decision_runs_the_call_once_after_recovery(
    stack: Stack,
) -> None:
    env = await stack.start_in_process()
    approval = await request_approval(env, "slow-1")
    await approve(env, approval)
    stack.redis.kill()
    down = await env.resume(approval.id)
    assert code(down) == "APPROVAL_UNAVAILABLE" and retryable(down)
    assert state(down) == "NOT_STARTED"
    assert await stack.upstream.calls() == 0
    stack.redis.start()
    assert await stack.approval_status(approval.id) == "approved"
    done = await env.resume(approval.id)
    assert code(done) == "completed" and state(done) == "COMPLETED"
    again = await env.resume(approval.id)
    assert again == done  # the stored envelope
    assert await stack.upstream.calls() == 1
    assert await stack.approval_status(approval.id) == "executed"


async def test_redis_killed_during_the_upstream_call_never_reruns_the_approval(
    stack: Stack,
) -> None:
    """Redis dies while the resumed call is inside the upstream: the upstream answers, the
    outcome cannot be recorded. The caller still learns that the call ran; after Redis is back
    the approval never runs again."""
    env = await stack.start_in_process()
    approval = await request_approval(env, "slow-1500")
    await approve(env, approval)
    resumed = asyncio.ensure_future(env.resume(approval.id))
    await stack.upstream.wait_calls(1)  # consumed, and now inside the upstream
    stack.redis.kill()
    result = await asyncio.wait_for(resumed, 30)
    assert state(result) in {"COMPLETED", "UNKNOWN"}, result  # the upstream did run
    assert not retryable(result) or state(result) != "NOT_STARTED"
    stack.redis.start()
    assert await stack.approval_status(approval.id) in {"consumed", "executed"}
    again = await env.resume(approval.id)
    if code(again) == "APPROVAL_CONSUMED":  # the outcome was lost: unknown, never re-run
        assert state(again) == "UNKNOWN"
    else:
        assert again == result
    assert await stack.upstream.calls() == 1


async def test_redis_down_briefly_during_the_upstream_call_records_the_outcome(
    stack: Stack,
) -> None:
    """Redis back before the upstream answers: the outcome is recorded and replayed."""
    env = await stack.start_in_process()
    approval = await request_approval(env, "slow-2500")
    await approve(env, approval)
    resumed = asyncio.ensure_future(env.resume(approval.id))
    await stack.upstream.wait_calls(1)
    stack.redis.kill()
    stack.redis.start()
    result = await asyncio.wait_for(resumed, 30)
    assert code(result) == "completed" and state(result) == "COMPLETED"
    assert await stack.approval_status(approval.id) == "executed"
    assert await env.resume(approval.id) == result
    assert await stack.upstream.calls() == 1


async def test_upstream_down_when_the_consumed_call_is_sent_does_not_lose_the_approval(
    stack: Stack,
) -> None:
    """The step between consume and upstream call: the upstream is gone, nothing reaches it.
    The envelope says NOT_STARTED, and the approved call is not lost: once the upstream is
    back, resuming runs it, exactly once."""
    env = await stack.start_in_process()
    approval = await request_approval(env, "slow-1")
    await approve(env, approval)
    stack.upstream.kill()
    down = await env.resume(approval.id)
    assert code(down) == "UPSTREAM_UNAVAILABLE" and retryable(down), down
    assert state(down) == "NOT_STARTED"
    stack.upstream.start()
    assert await stack.approval_status(approval.id) == "approved", (
        "an approval was consumed although no request reached the upstream"
    )
    done = await until_reconnected(lambda: env.resume(approval.id), stack.upstream)
    assert code(done) == "completed" and state(done) == "COMPLETED"
    assert await stack.upstream.calls() == 1
    assert await env.resume(approval.id) == done
    assert await stack.upstream.calls() == 1


async def test_upstream_killed_during_the_call_is_unknown_and_never_rerun(stack: Stack) -> None:
    env = await stack.start_in_process()
    approval = await request_approval(env, "slow-3000")
    await approve(env, approval)
    resumed = asyncio.ensure_future(env.resume(approval.id))
    await stack.upstream.wait_calls(1)
    stack.upstream.kill()
    result = await asyncio.wait_for(resumed, 30)
    assert result.WhichOneof("outcome") in {"failed", "cancelled"}
    # The request reached it; the effect is unknown (docs/upstreams.md §4: UNAVAILABLE after
    # connecting is UPSTREAM_UNAVAILABLE, retryable, UNKNOWN). A retry replays, never re-runs.
    assert state(result) == "UNKNOWN", result
    stack.upstream.start()
    assert await stack.approval_status(approval.id) == "executed"
    again = await env.resume(approval.id)
    assert again == result  # the stored UNKNOWN envelope, not a second run
    assert await stack.upstream.calls() == 0  # the restarted upstream saw nothing


async def test_concurrent_resumes_across_a_redis_restart_run_the_call_once(stack: Stack) -> None:
    """Twenty Resumes of one approval race a Redis SIGKILL and restart: whatever each caller
    got, the upstream ran the call once, and a completed answer is the recorded one."""
    env = await stack.start_in_process()
    approval = await request_approval(env, "slow-800")
    await approve(env, approval)
    racing = [asyncio.ensure_future(env.resume(approval.id)) for _ in range(10)]
    await stack.upstream.wait_calls(1)
    stack.redis.kill()
    racing += [asyncio.ensure_future(env.resume(approval.id)) for _ in range(5)]
    stack.redis.start()
    racing += [asyncio.ensure_future(env.resume(approval.id)) for _ in range(5)]
    results = await asyncio.wait_for(asyncio.gather(*racing), 60)
    assert await stack.upstream.calls() == 1
    completed = [r for r in results if code(r) == "completed"]
    assert len({r.execution_id for r in completed}) <= 1
    for r in results:
        assert code(r) in {"completed", "APPROVAL_CONSUMED", "APPROVAL_UNAVAILABLE"}, r
        if code(r) == "APPROVAL_UNAVAILABLE":
            assert state(r) == "NOT_STARTED" and retryable(r)
    final = await env.resume(approval.id)
    assert code(final) in {"completed", "APPROVAL_CONSUMED"}
    if completed and code(final) == "completed":
        assert final.execution_id == completed[0].execution_id
    assert await stack.upstream.calls() == 1
