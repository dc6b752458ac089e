"""Idempotency keys through the real server (DESIGN §12): a repeat returns the recorded
envelope without executing; other input conflicts; the key sent upstream is the caller's."""

from __future__ import annotations

import asyncio

import pytest

from capgate.v1 import types_pb2
from tests.gateway.harness import Env

pytestmark = pytest.mark.integration


def code(result: object) -> str:
    err = result.failed  # type: ignore[attr-defined]
    return types_pb2.ErrorCode.Name(err.code).removeprefix("ERROR_CODE_")


async def test_a_repeat_with_the_same_key_and_input_returns_the_recorded_envelope(env: Env) -> None:
    await env.reset_upstream()
    body = {"order_id": "o-1001", "amount": 3}
    first = await env.invoke("orders.refund", body, idempotency_key="idem-1")
    second = await env.invoke("orders.refund", body, idempotency_key="idem-1")
    assert first.WhichOneof("outcome") == "completed"
    assert second == first  # same execution id, same (redacted) output
    assert await env.upstream_calls() == 1
    stats = await env.stats()
    assert stats.log[-1].idempotency_key == "idem-1"


async def test_the_same_key_with_other_input_is_a_conflict(env: Env) -> None:
    await env.invoke("orders.refund", {"order_id": "o-1001", "amount": 4}, idempotency_key="idem-2")
    await env.reset_upstream()
    other = await env.invoke(
        "orders.refund", {"order_id": "o-1001", "amount": 5}, idempotency_key="idem-2"
    )
    assert code(other) == "IDEMPOTENCY_CONFLICT"
    assert await env.upstream_calls() == 0


async def test_the_same_key_while_running_is_in_progress(env: Env) -> None:
    await env.reset_upstream()
    body = {"order_id": "slow-250"}
    first = asyncio.ensure_future(env.invoke("orders.get", body, idempotency_key="idem-3"))
    await asyncio.sleep(0.1)
    second = await env.invoke("orders.get", body, idempotency_key="idem-3")
    assert code(second) == "IDEMPOTENCY_IN_PROGRESS" and second.failed.retryable
    await first
    assert await env.upstream_calls() == 1


async def test_keys_are_scoped_to_the_actor(env: Env) -> None:
    await env.reset_upstream()
    body = {"order_id": "o-1001"}
    a = await env.invoke("orders.get", body, idempotency_key="idem-4", actor="alice")
    b = await env.invoke("orders.get", body, idempotency_key="idem-4", actor="carol")
    assert a.execution_id != b.execution_id
    assert await env.upstream_calls() == 2


async def test_a_failure_before_the_upstream_releases_the_key(env: Env) -> None:
    bad = await env.invoke("orders.refund", {"order_id": "o-1001"}, idempotency_key="idem-5")
    assert code(bad) == "INPUT_INVALID"
    ok = await env.invoke(
        "orders.refund", {"order_id": "o-1001", "amount": 1}, idempotency_key="idem-5"
    )
    assert ok.WhichOneof("outcome") == "completed"
