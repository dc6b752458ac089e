"""An execution records its idempotency outcome only while it still holds the key (issue 14's
journal, reviewer item P4), through the real gateway, a real Redis and a real upstream.

A key's TTL can end while its execution still runs; another execution (another replica, a
retry) then claims it. When the first one finishes, its NOT_STARTED release must not delete the
new claim, and its envelope must not overwrite it: the new holder would otherwise run beside
a repeat that finds the key free (twice executed) or answer a replay of an envelope that is not
its own. The expiry and the second claim are injected at the exact point, right before the
first execution's release/complete script runs: the key is deleted (as its TTL would) and
claimed again by the real CLAIM script for another execution id."""

from __future__ import annotations

import time
from typing import Any

import pytest

from capgate.v1 import types_pb2
from tests.gateway.harness import Env
from tests.gateway.test_approval_flow import code
from tests.gateway.test_approval_release import Upstream, release_env  # noqa: F401 - fixture

pytestmark = pytest.mark.integration

OTHER = "f" * 32  # the execution that claimed the key after the first one's TTL ended


class ExpiredAndClaimedAgain:
    """Wraps the gateway's idempotency script `name` (release or complete): before the real
    script runs, the key expires and the real CLAIM script gives it to OTHER."""

    def __init__(self, env: Env, name: str) -> None:
        self.store = env.gw.runtime.idempotency
        self.redis = env.gw.redis
        self.name = name
        self.real = getattr(self.store, name)
        self.key = ""

    async def __call__(self, *, keys: list[str], args: list[Any]) -> Any:
        self.key = keys[0]
        input_hash = await self.redis.hget(self.key, "input_hash")
        assert input_hash is not None
        await self.redis.delete(self.key)  # its TTL ended while the first execution ran
        claim_args = [repr(time.time()), bytes(input_hash).decode(), OTHER, 60_000, ""]
        claimed = await self.store._claim(keys=[self.key], args=claim_args)
        assert bytes(claimed[0]) == b"CLAIMED"
        return await self.real(keys=keys, args=args)

    def __enter__(self) -> ExpiredAndClaimedAgain:
        setattr(self.store, self.name, self)
        return self

    def __exit__(self, *exc: object) -> None:
        setattr(self.store, self.name, self.real)

    async def holder(self) -> dict[str, str]:
        raw = await self.redis.hgetall(self.key)
        return {bytes(k).decode(): bytes(v).decode(errors="replace") for k, v in raw.items()}


async def test_a_stale_holders_release_keeps_the_new_claim(
    release_env: tuple[Env, Upstream],  # noqa: F811
) -> None:
    env, upstream = release_env
    await upstream.stop()  # the call fails NOT_STARTED: its claim is released
    with ExpiredAndClaimedAgain(env, "_release") as fault:
        failed = await env.invoke("orders.get", {"order_id": "o-1001"}, idempotency_key="p4-r")
    assert code(failed) == "UPSTREAM_UNAVAILABLE", failed
    assert failed.failed.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
    held = await fault.holder()
    assert held.get("state") == "running" and held.get("execution_id") == OTHER, held
    # The new holder still holds it: a repeat does not run beside it.
    again = await env.invoke("orders.get", {"order_id": "o-1001"}, idempotency_key="p4-r")
    assert code(again) == "IDEMPOTENCY_IN_PROGRESS", again


async def test_a_stale_holders_completion_does_not_overwrite_the_new_claim(
    release_env: tuple[Env, Upstream],  # noqa: F811
) -> None:
    env, upstream = release_env
    with ExpiredAndClaimedAgain(env, "_complete") as fault:
        done = await env.invoke("orders.get", {"order_id": "o-1001"}, idempotency_key="p4-c")
    assert done.WhichOneof("outcome") == "completed", done
    held = await fault.holder()
    assert held.get("state") == "running" and held.get("execution_id") == OTHER, held
    assert "envelope" not in held
    again = await env.invoke("orders.get", {"order_id": "o-1001"}, idempotency_key="p4-c")
    assert code(again) == "IDEMPOTENCY_IN_PROGRESS", again
    assert upstream.calls("/orders.v1.Orders/GetOrder") == 1
