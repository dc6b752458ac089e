"""The retry and deadline links of stage 11 (SI-11, DESIGN §12), counted at the upstream.

Time is injected: backoff sleeps advance a fake clock instead of waiting (STYLE 5)."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf.descriptor_pool import DescriptorPool
from upstreamkit import FakeTime, Orders, capability

from gateway.errors import CapabilityError, Code
from gateway.model import RetrySpec
from gateway.upstream.call import (
    UpstreamCall,
    backoff_delay,
    call_with_retry,
    grpc_call,
    retry_allowed,
)
from gateway.upstream.descriptors import resolve_method
from gateway.upstream.state import ExecutionState, state_of

GET = "/orders.v1.Orders/GetOrder"


@pytest.fixture
async def get_order(orders: Orders, orders_pool: DescriptorPool) -> UpstreamCall:
    # Async so the channel is made on the running loop: a synchronous fixture has no current
    # loop once an earlier test's asyncio.run() has ended (grpc.aio needs one).
    up = orders.upstream()
    return grpc_call(orders.pool.channel(up), resolve_method(orders_pool, GET), upstream=up)


async def run(
    call: UpstreamCall, order_id: str, time: FakeTime, deadline_s: float = 10, **cap: Any
) -> tuple[Any, int]:
    return await call_with_retry(
        call,
        {"order_id": order_id},
        capability=capability(**cap),
        deadline=time.now + deadline_s,
        **time.kwargs(),
    )


@pytest.mark.integration
async def test_a_retryable_read_is_retried_up_to_max_attempts(
    orders: Orders, get_order: UpstreamCall
) -> None:
    time = FakeTime()
    with pytest.raises(CapabilityError) as caught:
        await run(get_order, "fail-UNAVAILABLE", time, max_attempts=2)
    assert caught.value.code is Code.UPSTREAM_UNAVAILABLE
    assert caught.value.details["attempts"] == 3
    assert orders.state.recorder.calls[GET] == 3
    assert [attempt for attempt, _ in time.retries] == [2, 3]
    assert time.slept == [0.1, 0.2]  # exponential backoff, jitter draw 1.0


@pytest.mark.integration
async def test_a_flaky_read_succeeds_on_a_later_attempt_with_the_same_metadata(
    orders: Orders, get_order: UpstreamCall
) -> None:
    time = FakeTime()
    metadata = [("x-capgate-execution-id", "exec-7")]
    output, attempts = await call_with_retry(
        get_order,
        {"order_id": "flaky-2-a"},
        capability=capability(max_attempts=3),
        deadline=time.now + 10,
        metadata=metadata,
        **time.kwargs(),
    )
    assert output["order_id"] == "flaky-2-a"
    assert attempts == 3
    assert [r.execution_id for r in orders.state.recorder.log] == ["exec-7"] * 3


@pytest.mark.integration
@pytest.mark.parametrize("side_effect", ["write", "destructive"])
async def test_a_write_without_idempotent_is_never_retried(
    orders: Orders, get_order: UpstreamCall, side_effect: Any
) -> None:
    with pytest.raises(CapabilityError) as caught:
        await run(
            get_order, "fail-UNAVAILABLE", FakeTime(), max_attempts=5, side_effect=side_effect
        )
    assert caught.value.details["attempts"] == 1
    assert orders.state.recorder.calls[GET] == 1


@pytest.mark.integration
async def test_a_declared_idempotent_write_is_retried(
    orders: Orders, get_order: UpstreamCall
) -> None:
    _, attempts = await run(
        get_order, "flaky-1-b", FakeTime(), max_attempts=1, side_effect="write", idempotent=True
    )
    assert attempts == 2
    assert orders.state.recorder.calls[GET] == 2


@pytest.mark.integration
@pytest.mark.parametrize("order_id", ["fail-INTERNAL", "contract-error", "fail-PERMISSION_DENIED"])
async def test_non_retryable_failures_are_not_retried(
    orders: Orders, get_order: UpstreamCall, order_id: str
) -> None:
    with pytest.raises(CapabilityError):
        await run(get_order, order_id, FakeTime(), max_attempts=3)
    assert orders.state.recorder.calls[GET] == 1


@pytest.mark.integration
async def test_no_retry_policy_means_one_attempt(orders: Orders, get_order: UpstreamCall) -> None:
    with pytest.raises(CapabilityError):
        await run(get_order, "fail-UNAVAILABLE", FakeTime(), max_attempts=0)
    assert orders.state.recorder.calls[GET] == 1


@pytest.mark.integration
async def test_the_deadline_bounds_retries(orders: Orders, get_order: UpstreamCall) -> None:
    time = FakeTime()
    # Backoff 1 s then 2 s: the second sleep would end after the 2.5 s deadline.
    with pytest.raises(CapabilityError) as caught:
        await run(
            get_order,
            "fail-UNAVAILABLE",
            time,
            deadline_s=2.5,
            max_attempts=5,
            initial_backoff_s=1.0,
            max_backoff_s=10.0,
        )
    assert caught.value.details["attempts"] == 2
    assert orders.state.recorder.calls[GET] == 2
    assert time.slept == [1.0]


@pytest.mark.integration
async def test_no_time_left_is_a_timeout_before_anything_is_sent(
    orders: Orders, get_order: UpstreamCall
) -> None:
    time = FakeTime()
    with pytest.raises(CapabilityError) as caught:
        await run(get_order, "o-1001", time, deadline_s=0, max_attempts=3)
    assert caught.value.code is Code.TIMEOUT
    assert state_of(caught.value) is ExecutionState.NOT_STARTED
    assert orders.state.recorder.calls[GET] == 0
    assert not time.retries


@pytest.mark.integration
async def test_each_attempt_gets_the_remaining_time_as_its_grpc_deadline(
    orders: Orders, get_order: UpstreamCall
) -> None:
    # 50 ms of real time left for a 2 s upstream: the upstream's deadline is what remains.
    with pytest.raises(CapabilityError) as caught:
        await call_with_retry(
            get_order,
            {"order_id": "slow-2000"},
            capability=capability(),
            deadline=1000.05,
            **FakeTime(now=1000.0).kwargs(),
        )
    assert caught.value.code is Code.TIMEOUT
    assert state_of(caught.value) is ExecutionState.UNKNOWN


@pytest.mark.parametrize(
    ("side_effect", "idempotent", "max_attempts", "allowed"),
    [
        ("none", False, 1, True),
        ("read", False, 1, True),
        ("write", False, 1, False),
        ("destructive", False, 1, False),
        ("write", True, 1, True),
        ("read", False, 0, False),
        ("write", True, 0, False),
    ],
)
def test_retry_eligibility_is_si_11(
    side_effect: Any, idempotent: bool, max_attempts: int, allowed: bool
) -> None:
    cap = capability(side_effect=side_effect, idempotent=idempotent, max_attempts=max_attempts)
    assert retry_allowed(cap) is allowed


def test_backoff_grows_exponentially_up_to_its_cap_and_scales_with_the_draw() -> None:
    spec = RetrySpec(max_attempts=9, initial_backoff_s=0.05, max_backoff_s=0.3, multiplier=2.0)
    assert [backoff_delay(spec, n, 1.0) for n in range(1, 6)] == [0.05, 0.1, 0.2, 0.3, 0.3]
    assert backoff_delay(spec, 3, 0.5) == 0.1
    assert backoff_delay(spec, 3, 0.0) == 0.0
    assert backoff_delay(spec, 3, 7.0) == 0.2  # a draw outside [0, 1] is clamped
