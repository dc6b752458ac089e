"""The store on a real 3-node Redis Cluster and behind a real Sentinel; the one-key rule."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis
from approvalkit import ALICE, BOB, FakeClock, new_record
from redis.asyncio.cluster import RedisCluster
from topologies import cluster, sentinel

from gateway.config.settings import ApprovalSettings, RedisSettings
from gateway.errors import CapabilityError, Code
from gateway.state import idempotency
from gateway.state.approvals import (
    ApprovalConsumed,
    ApprovalEventRecord,
    ApprovalRecord,
    RedisApprovalStore,
    Status,
)
from gateway.state.approvals.scripts import ALL
from gateway.state.connections import connect
from gateway.state.embedded import RedisProcess
from gateway.state.idempotency import IdempotencyScope, RedisIdempotencyStore

pytestmark = pytest.mark.integration

_SCRIPTS = {
    **ALL,
    "idem-claim": idempotency._CLAIM,
    "idem-complete": idempotency._COMPLETE,
    "idem-release": idempotency._RELEASE,
}


@pytest.mark.parametrize("name", sorted(_SCRIPTS))
def test_every_script_touches_only_its_one_declared_key(name: str) -> None:
    source = _SCRIPTS[name]
    assert set(re.findall(r"KEYS\[(\d+)\]", source)) == {"1"}
    assert "TIME" not in source  # `now` is an argument
    calls = re.findall(r"redis\.call\('(\w+)',\s*([^,)]+)", source)
    assert calls
    for command, key in calls:
        assert key.strip() in {"key", "KEYS[1]"}, (name, command, key)


@pytest.fixture(scope="module")
def cluster_ports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[int]]:
    with cluster(Path(tmp_path_factory.mktemp("cluster"))) as ports:
        yield ports


async def test_the_whole_lifecycle_runs_on_a_redis_cluster(cluster_ports: list[int]) -> None:
    client = connect(RedisSettings(url=f"redis+cluster://127.0.0.1:{cluster_ports[0]}"))
    assert isinstance(client, RedisCluster)
    clock = FakeClock()
    store = RedisApprovalStore(client, prefix="c", settings=ApprovalSettings(), clock=clock)
    try:
        await client.initialize()
        records = [await store.create(r) for r in _one_per_node(client, store, clock)]
        nodes = {client.get_node_from_key(store.keys.record(r.id)).port for r in records}
        assert nodes == set(cluster_ports)  # the records really live on every node
        target = records[0]
        await store.decide(
            target.id,
            approve=True,
            approver=BOB,
            via=None,
            note="",
            input_hash=target.input_hash,
        )

        async def attempt(n: int) -> str:
            try:
                await store.consume(
                    target.id, requester=ALICE, surface="agent", execution_id=f"e{n}"
                )
            except ApprovalConsumed:
                return "consumed"
            return "ok"

        outcomes = await asyncio.gather(*(attempt(n) for n in range(10)))
        assert sorted(outcomes) == ["consumed"] * 9 + ["ok"]
        winner = await store.get(target.id)
        assert winner is not None
        done = await store.finish(
            target.id,
            envelope=b"env",
            outcome_code=None,
            resumed_execution_id=winner.resumed_execution_id,
        )
        assert done.status is Status.EXECUTED
        pending, _ = await store.list(page_size=2)
        assert len(pending) == 2
        report = await store.reconcile()
        assert report.records == 4
        clock.advance(10_000)
        assert await store.expire_sweep() == 3
        events = await asyncio.wait_for(_first(store.watch("0-0"), 10), 10)
        assert [e.type for e in events] == (
            ["requested"] * 4 + ["approved", "consumed", "executed"] + ["expired"] * 3
        )
    finally:
        await client.aclose()


def _one_per_node(
    client: RedisCluster, store: RedisApprovalStore, clock: FakeClock
) -> list[ApprovalRecord]:
    """Four new records whose keys cover every node (ids drawn until each node has one)."""
    by_node: dict[int, ApprovalRecord] = {}
    while len(by_node) < len(client.get_primaries()):
        record = new_record(clock)
        by_node.setdefault(client.get_node_from_key(store.keys.record(record.id)).port, record)
    return [*by_node.values(), new_record(clock)]


async def _first(stream: AsyncIterator[ApprovalEventRecord], n: int) -> list[ApprovalEventRecord]:
    out: list[ApprovalEventRecord] = []
    async for item in stream:
        out.append(item)
        if len(out) == n:
            break
    return out


async def test_idempotency_claims_run_on_a_redis_cluster(cluster_ports: list[int]) -> None:
    client = connect(RedisSettings(url=f"redis+cluster://127.0.0.1:{cluster_ports[1]}"))
    journal = RedisIdempotencyStore(client, prefix="c", ttl_s=60, clock=FakeClock())
    scope = IdempotencyScope("iss", "alice", "agent", "orders.refund", "k-1")
    try:
        assert (await journal.claim(scope, "h1", "e1")).claimed
        assert await journal.complete(scope, b"envelope", execution_id="e1")
        assert (await journal.claim(scope, "h1", "e2")).replay == b"envelope"
        with pytest.raises(CapabilityError) as err:
            await journal.claim(scope, "h2", "e3")
        assert err.value.code is Code.IDEMPOTENCY_CONFLICT
    finally:
        await client.aclose()


async def test_the_store_reaches_the_master_through_sentinel(tmp_path: Path) -> None:
    master = RedisProcess(tmp_path / "master").start()
    try:
        with sentinel(tmp_path / "sentinel", master.port, "capgate-main") as port:
            client = connect(RedisSettings(url=f"redis+sentinel://127.0.0.1:{port}/capgate-main/2"))
            clock = FakeClock()
            store = RedisApprovalStore(client, prefix="s", settings=ApprovalSettings(), clock=clock)
            record = await store.create(new_record(clock))
            assert await store.get(record.id) == record
            direct = redis.Redis(port=master.port, db=2)
            assert direct.exists(store.keys.record(record.id)) == 1
            direct.close()
            await client.aclose()
    finally:
        master.stop()
