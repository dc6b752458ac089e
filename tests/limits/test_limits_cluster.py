"""The limit script on a real 3-node Redis Cluster: the keys of one call (different limits,
different key values) share the `{lim}` slot, so one EVAL checks and spends them all."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot

from gateway.config.limitspec import BudgetSpec, ExprSite, LimitSpec, RateSpec
from gateway.config.settings import RedisSettings
from gateway.state.connections import connect
from gateway.state.limits.store import Charge, RedisLimiter
from tests.approvals.topologies import cluster

pytestmark = [pytest.mark.integration]

SITE = ExprSite("cluster", 1, 1)
RATE = LimitSpec("per_actor", "actor.id", SITE, rate=RateSpec(2, 60.0, 2))
BUDGET = LimitSpec("per_tenant", "t", SITE, budget=BudgetSpec("input.amount", SITE, 10.0, 60.0))
GLOBAL = LimitSpec("everyone", "'all'", SITE, rate=RateSpec(100, 60.0, 100))


@pytest.fixture(scope="module")
def cluster_ports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[int]]:
    with cluster(Path(tmp_path_factory.mktemp("limits-cluster"))) as ports:
        yield ports


async def test_one_call_spends_every_limit_in_one_script_on_a_cluster(
    cluster_ports: list[int],
) -> None:
    client = connect(RedisSettings(url=f"redis+cluster://127.0.0.1:{cluster_ports[0]}"))
    assert isinstance(client, RedisCluster)
    limiter = RedisLimiter(client, prefix="c")
    charges = [Charge(RATE, "alice"), Charge(BUDGET, "acme", 4.0), Charge(GLOBAL, "all")]
    keys = [limiter.key(c.spec, c.key) for c in charges]
    assert len({key_slot(k.encode()) for k in keys}) == 1
    # Without the hash tag these keys would live in different slots (so on different nodes).
    assert len({key_slot(k.replace("{lim}", "lim").encode()) for k in keys}) > 1
    try:
        now = 1_700_000_000.0
        first = await limiter.check(charges, now=now)
        assert [v.passed for v in first] == [True, True, True]
        assert [v.remaining for v in first] == [1.0, 6.0, 99.0]
        second = await limiter.check(charges, now=now)
        assert [v.passed for v in second] == [True, True, True]
        third = await limiter.check(charges, now=now)  # the rate (2 at once) and budget refuse
        assert [v.passed for v in third] == [False, False, True]
        assert third[0].retry_after_s == pytest.approx(30.0)
        await limiter.give_back(limiter.spent(charges, second))
        fourth = await limiter.check([Charge(BUDGET, "acme", 4.0)], now=now)
        assert fourth[0].passed and fourth[0].remaining == pytest.approx(2.0)
    finally:
        for key in keys:
            await client.delete(key)
        await client.aclose()
