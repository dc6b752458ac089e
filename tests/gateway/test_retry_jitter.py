"""Retry backoff uses full jitter drawn from the runtime's injected random source (issue 14 #5).

Through the real gateway and the real example upstream: `fail-UNAVAILABLE` fails retryably on
every attempt, and `orders.get` retries twice (1 ms initial backoff, doubling, 5 ms cap). The
draws come from `Runtime.jitter`, the sleeps are recorded instead of waited (STYLE 5).
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Iterator

import pytest

from capgate.v1 import types_pb2
from gateway.config.loader import load_settings
from gateway.pipeline.call import Runtime
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import Env

pytestmark = pytest.mark.integration


class Recorded:
    """Draws from a fixed sequence and sleeps that only record their length."""

    def __init__(self, draws: list[float]) -> None:
        self._draws: Iterator[float] = iter(draws)
        self.drawn: list[float] = []
        self.slept: list[float] = []

    def jitter(self) -> float:
        value = next(self._draws)
        self.drawn.append(value)
        return value

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


async def test_retry_delays_are_the_backoff_ceiling_times_the_injected_draw(env: Env) -> None:
    runtime = env.gw.runtime
    recorded = Recorded([0.25, 0.75])
    saved = runtime.jitter, runtime.sleep
    runtime.jitter, runtime.sleep = recorded.jitter, recorded.sleep
    try:
        before = await env.upstream_calls("GetOrder")
        result = await env.invoke("orders.get", {"order_id": "fail-UNAVAILABLE"})
        after = await env.upstream_calls("GetOrder")
    finally:
        runtime.jitter, runtime.sleep = saved
    assert result.failed.code == types_pb2.ERROR_CODE_UPSTREAM_UNAVAILABLE
    assert result.attempts == 3 and after - before == 3
    assert recorded.drawn == [0.25, 0.75]
    # ceilings 1 ms and 2 ms (initial * 2^(n-1), capped at 5 ms), each scaled by its draw
    assert recorded.slept == pytest.approx([0.001 * 0.25, 0.002 * 0.75])


def test_the_runtime_default_is_real_randomness_not_a_constant() -> None:
    assert Runtime(audit=None).jitter is random.random  # type: ignore[arg-type]


async def test_a_serve_built_runtime_draws_real_random_jitter(
    orders_upstream: str, redis_server: RedisProcess
) -> None:
    run_dir = tempfile.mkdtemp(prefix="cg-")  # short: a unix socket path is limited
    environ = gateway_environ(orders_upstream, redis_server.url, run_dir)
    settings = load_settings(HERE / "gateway.yaml", environ=environ)
    gw = await start(settings)
    try:
        assert gw.runtime.jitter is random.random
        draws = {gw.runtime.jitter() for _ in range(64)}
        assert len(draws) > 1 and all(0.0 <= d < 1.0 for d in draws)
    finally:
        await gw.stop(0)
