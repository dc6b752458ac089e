"""Every key the approval store writes is bounded in size and time (issue 14 #6).

Through the real gateway (in-process, real listeners), the real example upstream, real CEL and
the real Redis, each test on its own key prefix. Approvals expire after 1 s and are kept 1 s
more, so records leave Redis by their own TTL within seconds; the gateway's own sweep and
reconcile loops do the rest. Waits poll Redis with a generous deadline (no timed assertions).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
import redis.asyncio as aioredis
import yaml

from capgate.v1 import gateway_pb2, gateway_pb2_grpc
from gateway.config.loader import load_settings
from gateway.process.serve import Gateway, start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import token

pytestmark = pytest.mark.integration

POLICY = """
policies:
  - name: refunds-need-approval
    match: {capabilities: [orders.refund]}
    rules:
      - when: "true"
        effect: require-approval
        message: Needs a manager.
        approval:
          reason: Every refund is approved in these tests.
          approvers: {roles: [manager]}
"""


@asynccontextmanager
async def gateway(
    orders_upstream: str, redis_url: str, prefix: str, **options: Any
) -> AsyncIterator[Gateway]:
    root = Path(tempfile.mkdtemp(prefix="cg-"))
    (root / "policies").mkdir()
    (root / "policies" / "refunds.yaml").write_text(POLICY)
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(HERE / "../../examples/orders/orders.pb")
    data["policies"]["paths"] = [str(root / "policies")]
    data["approvals"] = {"default_expires_in": "1s", "retention": "1s"}
    data["redis"]["key_prefix"] = prefix
    (root / "gateway.yaml").write_text(yaml.safe_dump(data))
    environ = gateway_environ(orders_upstream, redis_url, str(root))
    gw = await start(load_settings(root / "gateway.yaml", environ=environ), **options)
    try:
        yield gw
    finally:
        await gw.stop(0.2)


async def request_approvals(gw: Gateway, n: int) -> list[str]:
    ids = []
    async with gateway_channel(gw) as stub:
        for i in range(n):
            body = f'{{"order_id": "o-{1000 + i}", "amount": 5}}'.encode()
            result = await stub.Invoke(
                gateway_pb2.InvokeRequest(capability_id="orders.refund", input_json=body),
                metadata=[("authorization", f"Bearer {token('alice')}")],
                timeout=10,
            )
            assert result.WhichOneof("outcome") == "approval_required", result
            ids.append(result.approval_required.approval.id)
    return ids


@asynccontextmanager
async def gateway_channel(gw: Gateway) -> AsyncIterator[gateway_pb2_grpc.CapabilityGatewayStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}") as channel:
        yield gateway_pb2_grpc.CapabilityGatewayStub(channel)


async def eventually(check: Callable[[], Awaitable[bool]], what: str, within_s: float = 30) -> None:
    deadline = time.monotonic() + within_s
    while not await check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.1)


async def keys_of(client: aioredis.Redis, prefix: str) -> dict[str, tuple[str, int]]:
    """Every key under `prefix`: (type, pttl)."""
    out = {}
    async for raw in client.scan_iter(match=f"{prefix}:*", count=500):
        key = raw.decode()
        out[key] = ((await client.type(key)).decode(), await client.pttl(key))
    return out


@pytest.fixture
async def client(redis_server: RedisProcess) -> AsyncIterator[aioredis.Redis]:
    redis = aioredis.Redis.from_url(redis_server.url)
    yield redis
    await redis.aclose()


async def test_expired_approvals_leave_every_index_and_every_key_has_a_ttl(
    orders_upstream: str, redis_server: RedisProcess, client: aioredis.Redis
) -> None:
    prefix = "bounds-expire"
    n = 12
    async with gateway(orders_upstream, redis_server.url, prefix) as gw:
        ids = await request_approvals(gw, n)
        keys = await keys_of(client, prefix)
        cap = f"{prefix}:{{apr-idx}}:cap:orders.refund"
        assert await client.zcard(cap) == n
        # While they live, every key the store wrote has a TTL: records, indexes, the stream.
        assert {k for k, (_, ttl) in keys.items() if ttl < 0} == set(), keys
        assert len([k for k in keys if "{apr:" in k]) == n

        # Expiry (1 s), then the end of retention (1 s more): the records leave Redis by their
        # TTL, the sweep drops their index entries; only the stream's TTL may outlast them.
        async def indexes_empty() -> bool:
            left = await keys_of(client, prefix)
            return all("{apr-events}" in k for k in left)

        await eventually(indexes_empty, "index entries of gone records stayed")
        left = await keys_of(client, prefix)
        assert all(ttl > 0 for _, ttl in left.values()), left
        assert ids  # the approvals were real
        # And again: the index does not grow with the number of approvals ever requested.
        await request_approvals(gw, n)
        assert await client.zcard(cap) == n
        await eventually(indexes_empty, "the second round stayed in the indexes")


async def test_reconcile_runs_at_start_and_gives_old_keys_their_ttls(
    orders_upstream: str, redis_server: RedisProcess, client: aioredis.Redis
) -> None:
    prefix = "bounds-reconcile"
    every = 600.0  # one run in this test's lifetime: the one at start
    async with gateway(orders_upstream, redis_server.url, prefix, reconcile_every_s=every) as gw:
        (approval_id,) = await request_approvals(gw, 1)
    cap = f"{prefix}:{{apr-idx}}:cap:orders.refund"
    everything = f"{prefix}:{{apr-idx}}:all"
    # What a store without TTLs, or a crash between a transition and its index update, leaves:
    # index keys without TTL, an entry for a record that never existed, a record unindexed.
    for key in (cap, everything, f"{prefix}:{{apr-idx}}:pending"):
        await client.persist(key)
    await client.zadd(cap, {"ghost-1": 1.0})
    await client.zadd(everything, {"ghost-1": 1.0})
    await client.zrem(f"{prefix}:{{apr-idx}}:retire", f"{approval_id} orders.refund")
    assert await client.pttl(cap) == -1

    async with gateway(orders_upstream, redis_server.url, prefix, reconcile_every_s=every) as gw:

        async def reconciled() -> bool:
            members = {m.decode() for m in await client.zrange(cap, 0, -1)}
            retire = await client.zscore(
                f"{prefix}:{{apr-idx}}:retire", f"{approval_id} orders.refund"
            )
            gone = not await client.exists(f"{prefix}:{{apr:{approval_id}}}")
            return "ghost-1" not in members and (gone or retire is not None)

        await eventually(reconciled, "reconcile did not run at start")
        assert await client.zscore(everything, "ghost-1") is None
        for key, (_, ttl) in (await keys_of(client, prefix)).items():
            assert ttl > 0, key
        task = next(t for t in gw.tasks if t.get_name() == "approval-reconcile")
    assert task.done()  # stopped with the gateway


async def test_reconcile_runs_periodically_while_the_gateway_serves(
    orders_upstream: str, redis_server: RedisProcess, client: aioredis.Redis
) -> None:
    prefix = "bounds-periodic"
    cap = f"{prefix}:{{apr-idx}}:cap:orders.refund"
    async with gateway(orders_upstream, redis_server.url, prefix, reconcile_every_s=0.2) as gw:
        await request_approvals(gw, 1)
        for round_ in range(2):  # each stale entry written later is removed by a later run
            ghost = f"ghost-{round_}"
            await client.zadd(cap, {ghost: 1.0})

            async def removed(ghost: str = ghost) -> bool:
                return await client.zscore(cap, ghost) is None

            await eventually(removed, f"periodic reconcile did not remove {ghost}")
        task = next(t for t in gw.tasks if t.get_name() == "approval-reconcile")
        assert not task.done()
    assert task.done()
