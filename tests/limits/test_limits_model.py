"""The limit script against a reference model: seeded random rates, budgets and call sequences
(clock moves, amounts, two limits at once) through a real Redis; every verdict, remaining
count and retry time must equal the model's, a refused call must spend from no limit, and
every key must expire within its window."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import pytest
import redis.asyncio as aioredis

from gateway.config.limitspec import BudgetSpec, ExprSite, LimitSpec, RateSpec
from gateway.state.embedded import RedisProcess
from gateway.state.limits.store import Charge, RedisLimiter, Verdict

pytestmark = [pytest.mark.integration]

SITE = ExprSite("model", 1, 1)
SEEDS = range(40)
STEPS = 60


@dataclass
class Model:
    """GCRA and fixed budget windows, as docs/limits.md describes them (times in ms)."""

    tat: dict[str, float] = field(default_factory=dict)
    spent: dict[str, tuple[float, float]] = field(default_factory=dict)  # spent, reset_at

    def check(self, charges: list[Charge], now: float) -> list[tuple[bool, float, float | None]]:
        out, plans = [], []
        for c in charges:
            if c.spec.rate is not None:
                interval, burst = c.spec.rate.interval_ms, c.spec.rate.burst
                tat = max(self.tat.get(c.spec.name, 0.0), now)
                new_tat = tat + interval
                tolerance = interval * burst
                if new_tat - now <= tolerance:
                    left = math.floor((tolerance - (new_tat - now)) / interval + 1e-9)
                    out.append((True, float(left), 0.0))
                    plans.append(("r", c.spec.name, new_tat))
                else:
                    out.append((False, 0.0, (new_tat - tolerance - now) / 1000.0))
            else:
                assert c.spec.budget is not None
                cap, window = c.spec.budget.max, c.spec.budget.window_s * 1000.0
                spent, reset_at = self.spent.get(c.spec.name, (0.0, 0.0))
                if reset_at <= now:
                    spent, reset_at = 0.0, now + window
                if spent + c.amount <= cap:
                    out.append((True, cap - spent - c.amount, 0.0))
                    plans.append(("b", c.spec.name, (spent + c.amount, reset_at)))
                else:
                    wait = None if c.amount > cap else (reset_at - now) / 1000.0
                    out.append((False, max(0.0, cap - spent), wait))
        if all(passed for passed, _, _ in out):
            for kind, name, value in plans:
                if kind == "r":
                    self.tat[name] = value  # type: ignore[assignment]
                else:
                    self.spent[name] = value  # type: ignore[assignment]
        return out


def _specs(rng: random.Random, seed: int) -> tuple[LimitSpec, LimitSpec]:
    limit = rng.randint(1, 8)
    rate = RateSpec(limit=limit, window_s=rng.choice([1.0, 2.0, 5.0]), burst=rng.randint(1, limit))
    budget = BudgetSpec("input.amount", SITE, max=float(rng.randint(5, 50)), window_s=3.0)
    return (
        LimitSpec(f"r{seed}", "actor.id", SITE, rate=rate),
        LimitSpec(f"b{seed}", "actor.id", SITE, budget=budget),
    )


def _same(got: Verdict, want: tuple[bool, float, float | None]) -> bool:
    passed, remaining, wait = want
    if got.passed != passed or got.remaining != pytest.approx(max(0.0, remaining)):
        return False
    if wait is None or got.retry_after_s is None:
        return wait is None and got.retry_after_s is None
    return passed or got.retry_after_s == pytest.approx(wait, abs=1e-6)


@pytest.mark.parametrize("seed", SEEDS)
async def test_the_script_agrees_with_the_model(seed: int, redis_server: RedisProcess) -> None:
    rng = random.Random(seed)
    client = aioredis.from_url(redis_server.url)
    prefix = f"capgate-limits-model-{seed}"
    limiter = RedisLimiter(client, prefix=prefix)
    rate, budget = _specs(rng, seed)
    model = Model()
    now_ms = 1_700_000_000_000 + rng.randint(0, 10**6)
    try:
        for step in range(STEPS):
            now_ms += rng.choice([0, 0, 1, 50, 300, 999, 1500, 4000])
            which = rng.choice(["rate", "budget", "both"])
            charges = []
            if which in {"rate", "both"}:
                charges.append(Charge(rate, "alice"))
            if which in {"budget", "both"}:
                charges.append(Charge(budget, "alice", float(rng.choice([0, 1, 3, 7, 20, 60]))))
            got = await limiter.check(charges, now=now_ms / 1000.0 + 1e-7)
            want = model.check(charges, float(now_ms))
            for g, w in zip(got, want, strict=True):
                assert _same(g, w), (seed, step, which, g, w)
        # Bounded in time: every key expires, within its limit's window.
        windows = {rate.name: rate.window_s * 1000, budget.name: budget.window_s * 1000}
        async for key in client.scan_iter(match=f"{prefix}:*"):
            ttl = await client.pttl(key)
            name = key.decode().split(":")[2]
            assert 0 < ttl <= windows[name], (key, ttl)
    finally:
        async for key in client.scan_iter(match=f"{prefix}:*"):
            await client.delete(key)
        await client.aclose()
