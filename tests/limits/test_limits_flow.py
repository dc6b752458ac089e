"""Rate limits and budgets through the real gateway (real Redis, real upstream, real CEL), with
the gateway's injected clock as the limit script's `now` (docs/limits.md)."""

from __future__ import annotations

from typing import Any

import pytest

from capgate.v1 import gateway_pb2, types_pb2
from gateway.telemetry import metrics
from tests.gateway.harness import Env
from tests.gateway.test_approval_flow import decide

pytestmark = [pytest.mark.integration]

GET = {"order_id": "o-1001"}


def code(result: gateway_pb2.ExecutionResult) -> str:
    kind = result.WhichOneof("outcome")
    assert kind in {"failed", "cancelled"}, result
    err = getattr(result, kind)
    return types_pb2.ErrorCode.Name(err.code).removeprefix("ERROR_CODE_")


def retry_after(result: gateway_pb2.ExecutionResult) -> float:
    assert result.failed.HasField("retry_after"), result
    return result.failed.retry_after.ToNanoseconds() / 1e9


def refund(amount: Any, **extra: Any) -> dict[str, Any]:
    return {"order_id": "o-1001", "amount": amount, **extra}


async def test_a_burst_passes_then_the_sustained_rate_with_the_retry_time(env: Env) -> None:
    clock = env.gw.runtime.wall
    for _ in range(3):  # burst 3
        assert (await env.invoke("orders.get", GET)).WhichOneof("outcome") == "completed"
    refused = await env.invoke("orders.get", GET)
    assert code(refused) == "RATE_LIMITED"
    err = refused.failed
    assert err.retryable and err.stage == "limits" and err.expose_to_model
    assert err.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
    assert retry_after(refused) == pytest.approx(1.0, abs=0.002)  # 3 per 3 s: one per second
    assert await env.upstream_calls() == 3  # the refused call never reached the upstream

    clock.advance(0.5)  # type: ignore[attr-defined]
    half = await env.invoke("orders.get", GET)
    assert code(half) == "RATE_LIMITED" and retry_after(half) == pytest.approx(0.5, abs=0.002)
    clock.advance(0.5)  # type: ignore[attr-defined]
    assert (await env.invoke("orders.get", GET)).WhichOneof("outcome") == "completed"
    assert code(await env.invoke("orders.get", GET)) == "RATE_LIMITED"  # sustained: 1/s
    clock.advance(1.0)  # type: ignore[attr-defined]
    assert (await env.invoke("orders.get", GET)).WhichOneof("outcome") == "completed"

    # Another actor has its own key; a capability no limit selects is not limited.
    assert (await env.invoke("orders.get", GET, actor="bob")).WhichOneof("outcome") == "completed"
    for _ in range(5):
        listed = await env.invoke("orders.list", {"customer_id": "c-1"})
        assert listed.WhichOneof("outcome") == "completed"

    clock.advance(3.0)  # type: ignore[attr-defined]  a full window later: the burst again
    for _ in range(3):
        assert (await env.invoke("orders.get", GET)).WhichOneof("outcome") == "completed"
    assert code(await env.invoke("orders.get", GET)) == "RATE_LIMITED"


async def test_a_refused_call_is_audited_as_denied_with_its_code(env: Env) -> None:
    for _ in range(3):
        await env.invoke("orders.get", GET)
    refused = await env.invoke("orders.get", GET)
    events = await env.events_for(refused.execution_id)
    terminal = events[-1]
    assert terminal["event"] == "capability.denied"
    assert terminal["code"] == "RATE_LIMITED"
    assert terminal["stage"] == "limits" and terminal["reason"] == "limit get_rate"
    assert [e["event"] for e in events] == ["capability.requested", "capability.denied"]


async def test_a_budget_is_spent_then_refused_until_its_window_ends(env: Env) -> None:
    clock = env.gw.runtime.wall
    assert (await env.invoke("orders.refund", refund(600))).WhichOneof("outcome") == "completed"
    assert (await env.invoke("orders.refund", refund(350))).WhichOneof("outcome") == "completed"
    over = await env.invoke("orders.refund", refund(100))
    assert code(over) == "RATE_LIMITED" and over.failed.retryable
    assert retry_after(over) == pytest.approx(24 * 3600 - 0.0, abs=1.0)  # the window's end
    assert await env.upstream_calls("RefundOrder") == 2

    never = await env.invoke("orders.refund", refund(1500), actor="bob")  # above max itself
    assert code(never) == "RATE_LIMITED" and not never.failed.retryable
    assert not never.failed.HasField("retry_after")

    clock.advance(24 * 3600 + 1)  # type: ignore[attr-defined]
    again = await env.invoke("orders.refund", refund(100))
    assert again.WhichOneof("outcome") == "completed"


async def test_a_negative_or_non_numeric_amount_is_refused_as_invalid_input(env: Env) -> None:
    for amount in (-5, "12"):
        bad = await env.invoke("billing.refund", refund(amount))
        assert code(bad) == "INPUT_INVALID", amount
        assert "amount of budget approved_budget" in bad.failed.issues[0].message
    assert await env.upstream_calls() == 0


async def test_an_over_budget_call_needs_approval_and_the_resume_spends_past_it(
    env: Env,
) -> None:
    assert (await env.invoke("billing.refund", refund(80))).WhichOneof("outcome") == "completed"
    asked = await env.invoke("billing.refund", refund(50))
    assert asked.WhichOneof("outcome") == "approval_required", asked
    approval = asked.approval_required.approval
    assert "Budget approved_budget would be exceeded by this call." in approval.reasons
    assert await env.upstream_calls("RefundOrder") == 1
    # Nothing was spent by the request: 20 is still left for calls within the budget.
    assert (await env.invoke("billing.refund", refund(20))).WhichOneof("outcome") == "completed"

    await decide(env, approval)
    done = await env.resume(approval.id)
    assert done.WhichOneof("outcome") == "completed", done
    assert await env.upstream_calls("RefundOrder") == 3
    again = await env.resume(approval.id)  # the stored envelope, counted once
    assert again == done
    # The budget is now past its max (150 of 100): the next call asks again.
    later = await env.invoke("billing.refund", refund(1))
    assert later.WhichOneof("outcome") == "approval_required"


async def test_a_rate_limited_resume_keeps_its_approval(env: Env) -> None:
    """Limits run before the approval is consumed: a refused Resume can be retried."""
    await env.invoke("billing.refund", refund(100))
    asked = await env.invoke("billing.refund", refund(10))
    approval = asked.approval_required.approval
    await decide(env, approval)
    limiter = env.gw.runtime.limiter
    env.gw.runtime.limiter = None  # the store gone: the budget fails closed
    try:
        down = await env.resume(approval.id)
    finally:
        env.gw.runtime.limiter = limiter
    assert code(down) == "UPSTREAM_UNAVAILABLE" and down.failed.retryable
    resumed = await env.resume(approval.id)
    assert resumed.WhichOneof("outcome") == "completed", resumed


async def test_execution_policies_read_what_is_left_and_a_refused_call_gives_it_back(
    env: Env,
) -> None:
    assert (await env.invoke("orders.refund", refund(900))).WhichOneof("outcome") == "completed"
    # 45 left after this call: the execution-phase policy wants the reason "urgent".
    plain = await env.invoke("orders.refund", refund(55))
    assert code(plain) == "POLICY_DENIED"
    assert plain.failed.message == "The refund budget is nearly spent; only urgent refunds now."
    # The denied call never ran, so its 55 were given back: 100 are left, not 45.
    urgent = await env.invoke("orders.refund", refund(55, reason="urgent"))
    assert urgent.WhichOneof("outcome") == "completed", urgent
    last = await env.invoke("orders.refund", refund(45, reason="urgent"))
    assert last.WhichOneof("outcome") == "completed"
    assert code(await env.invoke("orders.refund", refund(0.5))) == "RATE_LIMITED"


async def test_redis_down_rates_fail_open_budgets_and_closed_rates_fail_closed(
    env: Env, limits_redis: Any
) -> None:
    opened = metrics.limits_unavailable.value(("get_rate", "open"))
    closed = metrics.limits_unavailable.value(("refund_budget", "closed"))
    limits_redis.kill()
    try:
        for _ in range(5):  # over the burst of 3: the rate is not enforced while Redis is down
            ok = await env.invoke("orders.get", GET)
            assert ok.WhichOneof("outcome") == "completed", ok
        refused = await env.invoke("orders.refund", refund(1))
        assert code(refused) == "UPSTREAM_UNAVAILABLE" and refused.failed.retryable
        assert refused.failed.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
        assert await env.upstream_calls("RefundOrder") == 0
    finally:
        limits_redis.start()
    assert metrics.limits_unavailable.value(("get_rate", "open")) == opened + 5
    assert metrics.limits_unavailable.value(("refund_budget", "closed")) == closed + 1
    assert (await env.invoke("orders.refund", refund(1))).WhichOneof("outcome") == "completed"


async def _refund_spent(env: Env, actor_id: str = "alice") -> float:
    spec = next(s for s in env.gw.settings.limits if s.name == "refund_budget")
    key = env.gw.runtime.limiter.key(spec, actor_id)
    return float(await env.gw.redis.hget(key, "spent") or 0)


async def test_a_call_waiting_for_approval_spends_at_its_resume_only(env: Env) -> None:
    """Regression: the invocation that asks for approval must not spend the budget, or its
    Resume (which spends) would count the amount twice."""
    asked = await env.invoke("billing.reviewed_refund", refund(300))
    assert asked.WhichOneof("outcome") == "approval_required", asked
    assert await _refund_spent(env) == 0
    approval = asked.approval_required.approval
    await decide(env, approval)
    done = await env.resume(approval.id)
    assert done.WhichOneof("outcome") == "completed", done
    assert await _refund_spent(env) == 300


async def test_an_idempotent_replay_spends_nothing(env: Env) -> None:
    first = await env.invoke("orders.refund", refund(300), idempotency_key="k-limits-1")
    assert first.WhichOneof("outcome") == "completed", first
    again = await env.invoke("orders.refund", refund(300), idempotency_key="k-limits-1")
    assert again == first  # the stored envelope
    assert await _refund_spent(env) == 300
    assert await env.upstream_calls("RefundOrder") == 1
