"""A repeat of a finished keyed call answers its recording, whatever governs new executions
(issue 25 item 1, ADR 0034): a budget that would now ask for approval or refuse, a policy, a
hook. Real gateway (in-process, real listeners), real Redis, the real example upstream, which
logs the idempotency key each call carried."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis

from capgate.v1 import gateway_pb2, types_pb2
from gateway.model import Actor
from gateway.pipeline import runner as pipeline
from gateway.pipeline.call import Call
from gateway.state.embedded import RedisProcess
from tests.gateway.harness import Env
from tests.gateway.test_approval_flow import decide
from tests.limits.conftest import PREFIX
from tests.limits.test_limits_flow import refund

pytestmark = [pytest.mark.integration]

REFUND = "RefundOrder"


async def _upstream_keys(env: Env) -> list[str]:
    """The idempotency key of every refund the upstream received, in order."""
    stats = await env.stats()
    return [r.idempotency_key for r in stats.log if r.method.endswith(REFUND)]


async def _spent(env: Env, limit: str) -> float:
    client = aioredis.from_url(env.gw.settings.redis.url)
    try:
        total = 0.0
        async for key in client.scan_iter(match=f"{PREFIX}:{{lim}}:{limit}:*"):
            if b":apr:" in key:
                continue
            value = await client.hget(key, "spent")
            total += float(value or 0)
        return total
    finally:
        await client.aclose()


def _kind(result: gateway_pb2.ExecutionResult) -> str:
    return str(result.WhichOneof("outcome"))


async def test_a_repeat_after_the_budget_would_ask_for_approval_replays_and_runs_nothing(
    env: Env,
) -> None:
    # 80 of a 100 budget with on_exceed: require-approval: the repeat would need 160.
    first = await env.invoke("billing.refund", refund(80), idempotency_key="k-80")
    assert _kind(first) == "completed", first
    again = await env.invoke("billing.refund", refund(80), idempotency_key="k-80")
    assert again == first  # the recording, not approval_required
    assert await _upstream_keys(env) == ["k-80"]
    assert await _spent(env, "approved_budget") == 80.0  # a replay spends nothing
    # The repeat's own execution: requested, then its one terminal event, a replay.
    await env.events_for(first.execution_id)  # the trail caught up
    [replay] = [e for e in env.audit.events if e.get("replay_of") == first.execution_id]
    events = [e for e in env.audit.events if e.get("execution_id") == replay["execution_id"]]
    assert [e["event"] for e in events] == ["capability.requested", "capability.completed"]
    assert replay["replayed"] is True


async def test_a_repeat_after_the_budget_filled_replays_instead_of_rate_limited(env: Env) -> None:
    # "urgent": the execution-phase reserve policy lets a refund that empties the budget run.
    first = await env.invoke(
        "orders.refund", refund(1000, reason="urgent"), idempotency_key="k-full"
    )
    assert _kind(first) == "completed", first
    assert await _spent(env, "refund_budget") == 1000.0  # full: a new call would be refused
    fresh = await env.invoke("orders.refund", refund(1, reason="urgent"))
    assert fresh.failed.code == types_pb2.ERROR_CODE_RATE_LIMITED, fresh
    again = await env.invoke(
        "orders.refund", refund(1000, reason="urgent"), idempotency_key="k-full"
    )
    assert again == first  # it ran: its recording, never RATE_LIMITED for a call that ran
    assert await _upstream_keys(env) == ["k-full"]


async def test_a_keyed_call_that_needed_approval_runs_once_under_the_callers_key(
    env: Env,
) -> None:
    spent = await env.invoke("billing.refund", refund(80), idempotency_key="k-a")
    assert _kind(spent) == "completed", spent
    asked = await env.invoke("billing.refund", refund(60), idempotency_key="k-b")
    assert _kind(asked) == "approval_required", asked
    approval = asked.approval_required.approval
    await decide(env, approval, by="bob")
    resumed = await env.resume(approval.id)
    assert _kind(resumed) == "completed", resumed
    # The upstream saw the caller's key, not the resumed execution's id: it can deduplicate.
    assert await _upstream_keys(env) == ["k-a", "k-b"]
    # A repeat of the approved call, by key: its recording, no second approval, no second run.
    again = await env.invoke("billing.refund", refund(60), idempotency_key="k-b")
    assert again == resumed
    assert await _upstream_keys(env) == ["k-a", "k-b"]
    assert await _spent(env, "approved_budget") == 140.0


async def test_a_repeat_with_another_input_is_a_conflict_before_any_budget(env: Env) -> None:
    first = await env.invoke("billing.refund", refund(80), idempotency_key="k-c")
    assert _kind(first) == "completed", first
    other: dict[str, Any] = refund(90)
    conflict = await env.invoke("billing.refund", other, idempotency_key="k-c")
    assert conflict.failed.code == types_pb2.ERROR_CODE_IDEMPOTENCY_CONFLICT
    assert await _upstream_keys(env) == ["k-c"]


def _concealed(result: gateway_pb2.ExecutionResult) -> gateway_pb2.ExecutionResult:
    """The envelope as SI-8 compares it: without the execution id and the duration (and the
    capability id, which echoes what each request named)."""
    copy = gateway_pb2.ExecutionResult()
    copy.CopyFrom(result)
    copy.ClearField("execution_id")
    copy.ClearField("capability_id")
    copy.ClearField("duration")
    return copy


async def test_a_key_taken_with_visible_input_says_nothing_of_hidden_input(env: Env) -> None:
    first = await env.invoke("orders.refund", refund(5, reason="urgent"), idempotency_key="k-h")
    assert _kind(first) == "completed", first
    hidden = await env.invoke(
        "orders.refund", {"order_id": "o-hidden", "amount": 5}, idempotency_key="k-h"
    )
    missing = await env.invoke("orders.nope", {"order_id": "o-hidden", "amount": 5})
    # Not IDEMPOTENCY_CONFLICT: the hide policy decides before the journal answers.
    assert _concealed(hidden) == _concealed(missing), hidden


async def test_a_journal_that_cannot_answer_says_nothing_of_hidden_input(
    env: Env, limits_redis: RedisProcess
) -> None:
    limits_redis.stop()  # the fixture starts it again for the next test
    hidden = await env.invoke(
        "orders.refund", {"order_id": "o-hidden", "amount": 5}, idempotency_key="k-down"
    )
    missing = await env.invoke("orders.nope", {"order_id": "o-hidden", "amount": 5})
    # Not the journal's UPSTREAM_UNAVAILABLE: that would tell a hidden capability from none.
    assert _concealed(hidden) == _concealed(missing), hidden
    visible = await env.invoke("orders.refund", refund(5), idempotency_key="k-down")
    assert visible.failed.code == types_pb2.ERROR_CODE_UPSTREAM_UNAVAILABLE, visible


async def _read_the_key_then(env: Env, value: dict[str, Any], key: str) -> Call:
    """A repeat that read its key (free) and was then overtaken: stages up to the journal's
    early read, run on the real runtime; the rest runs later (`_finish_repeat`)."""
    call = Call(
        snapshot=env.gw.holder.current,
        surface="agent",
        actor=ALICE,
        capability_id="billing.refund",
        raw_input=orjson.dumps(value),
        idempotency_key=key,
    )
    assert await pipeline._rows(call, env.gw.runtime, pipeline.INVOKE[:_READ]) is None
    return call


_READ = [s.name for s in pipeline.INVOKE].index("idempotency-replay") + 1
ALICE = Actor(id="alice", kind="user", issuer="test-idp", roles=("agent",))


async def test_a_repeat_racing_its_first_call_is_not_sent_for_approval(env: Env) -> None:
    # A client's retry reads the key free; its first call then runs and spends 80 of 100.
    repeat = await _read_the_key_then(env, refund(80), "k-race")
    first = await env.invoke("billing.refund", refund(80), idempotency_key="k-race")
    assert _kind(first) == "completed", first
    # The retry goes on: the budget would ask for approval (160 > 100); the journal answers.
    answer = await pipeline.run(repeat, env.gw.runtime, pipeline.INVOKE[_READ:])
    assert answer == first
    assert await _upstream_keys(env) == ["k-race"]
    client = aioredis.from_url(env.gw.settings.redis.url)
    try:  # and no approval was asked for
        assert [k async for k in client.scan_iter(match=f"{PREFIX}:{{apr:*")] == []
    finally:
        await client.aclose()


async def test_a_repeat_racing_its_first_call_is_not_rate_limited(env: Env) -> None:
    repeat = Call(
        snapshot=env.gw.holder.current,
        surface="agent",
        actor=ALICE,
        capability_id="orders.refund",
        raw_input=orjson.dumps(refund(1000, reason="urgent")),
        idempotency_key="k-race-full",
    )
    assert await pipeline._rows(repeat, env.gw.runtime, pipeline.INVOKE[:_READ]) is None
    first = await env.invoke(
        "orders.refund", refund(1000, reason="urgent"), idempotency_key="k-race-full"
    )
    assert _kind(first) == "completed", first
    answer = await pipeline.run(repeat, env.gw.runtime, pipeline.INVOKE[_READ:])
    assert answer == first  # not RATE_LIMITED for the call that ran


async def test_a_policy_that_fails_since_does_not_stop_a_replay(env: Env) -> None:
    value = {"order_id": "o-1001", "amount": 7.25}  # no reason: the policy's read fails
    first = await env.invoke("orders.refund", value, idempotency_key="k-fails")
    assert _kind(first) == "completed", first
    env.gw.runtime.wall.advance(80 * 365 * 86400)  # type: ignore[attr-defined]  # past 2100
    fresh = await env.invoke("orders.refund", value)
    assert fresh.failed.code == types_pb2.ERROR_CODE_POLICY_FAILED, fresh  # a new call fails
    again = await env.invoke("orders.refund", value, idempotency_key="k-fails")
    assert again == first  # the call that ran: its recording, not "failed, nothing ran"
