"""Standing grants raced across two `capgate serve` processes sharing one Redis (ADR 0038):
200 concurrent calls against a grant of 50 uses (or a total of 1000 at 20 a call) are covered
exactly 50 times, and a revocation racing the calls leaves exactly the uses taken before it —
no call covered after the revocation's reply. Real processes, a real Redis, the example upstream.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest
import redis.asyncio as aioredis

from capgate.v1 import gateway_pb2, gateway_pb2_grpc
from examples.orders.server import State
from gateway.config.settings import ApprovalSettings, RedisSettings
from gateway.state.approvals.grants import GrantRecord, GrantStatus, RedisGrantStore
from gateway.state.connections import connect
from gateway.state.embedded import RedisProcess
from tests.gateway.harness import ready_ports, token
from tests.grants.conftest import (
    FINANCE,
    PREFIX,
    ROOT,
    config_file,
    environ,
    new_grant,
    outcome,
)

pytestmark = pytest.mark.integration

CALLS = 200
REFUND = {"order_id": "o-1003", "amount": 20}
METHOD = "/orders.v1.Orders/RefundOrder"


@pytest.fixture(scope="module")
async def two_gateways(
    upstream: tuple[str, State], redis_server: RedisProcess
) -> AsyncIterator[list[gateway_pb2_grpc.CapabilityGatewayStub]]:
    """Two `capgate serve` processes on tests/grants/gateway.yaml and one Redis."""
    run = Path(tempfile.mkdtemp(prefix="cgg-"))
    env = environ(upstream[0], redis_server.url, str(run))
    config = config_file(run)
    procs: list[subprocess.Popen[bytes]] = []
    channels: list[grpc.aio.Channel] = []
    try:
        for n in range(2):
            ready = run / f"ready-{n}.json"
            argv = [sys.executable, "-m", "gateway.cli.main", "serve", "--config", str(config)]
            argv += ["--ready-file", str(ready), "--no-watch"]
            with open(run / f"serve-{n}.log", "ab") as log:  # noqa: ASYNC230 - at setup
                procs.append(
                    subprocess.Popen(  # noqa: ASYNC220 - started once, reaped off-loop
                        argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
                    )
                )
            port = (await ready_ports(ready, timeout_s=60))["agents"]
            channels.append(grpc.aio.insecure_channel(f"127.0.0.1:{port}"))
        yield [gateway_pb2_grpc.CapabilityGatewayStub(c) for c in channels]
    finally:
        for channel in channels:
            await channel.close()
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                await asyncio.to_thread(proc.wait, 20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


@pytest.fixture
async def grants(redis_server: RedisProcess, upstream: tuple[str, State]) -> AsyncIterator[Any]:
    """The grant store the processes use (same Redis, same prefix), with no state left."""
    client = aioredis.from_url(redis_server.url)
    async for key in client.scan_iter(match=f"{PREFIX}:*"):
        await client.delete(key)
    await client.aclose()
    upstream[1].recorder.reset()
    redis = connect(RedisSettings(url=redis_server.url))
    yield RedisGrantStore(redis, prefix=PREFIX, settings=ApprovalSettings(), clock=time.time)
    await redis.aclose()


# Calls in flight per gateway process at once: all of each process's share. Its Redis pool
# (gateway/state/connections.py: a blocking pool of 512 per process) holds every uncovered
# call's approval commands; a burst past it would wait for a connection, not fail.
IN_FLIGHT = CALLS // 2


async def _race(
    gateways: list[gateway_pb2_grpc.CapabilityGatewayStub], calls: int = CALLS
) -> list[Any]:
    """`calls` Invokes of one refund as alice, alternating between the two processes."""
    metadata = [("authorization", f"Bearer {token('alice')}")]
    body = orjson.dumps(REFUND)
    request = gateway_pb2.InvokeRequest(capability_id="pay.refund", input_json=body)
    slots = [asyncio.Semaphore(IN_FLIGHT) for _ in gateways]

    async def one(n: int) -> Any:
        async with slots[n % 2]:
            return await gateways[n % 2].Invoke(request, metadata=metadata, timeout=30)

    return list(await asyncio.gather(*(one(n) for n in range(calls))))


def _covered(results: list[Any], grant: GrantRecord) -> int:
    covered = [r for r in results if r.grant_id]
    assert all(r.grant_id == grant.id and outcome(r) == "completed" for r in covered)
    rest = {outcome(r) for r in results if not r.grant_id}
    assert rest <= {"approval_required"}, rest
    return len(covered)


async def test_200_racing_calls_take_exactly_max_uses(
    two_gateways: list[gateway_pb2_grpc.CapabilityGatewayStub],
    grants: RedisGrantStore,
    upstream: tuple[str, State],
) -> None:
    grant = await grants.create(new_grant(time.time(), max_uses=50))
    results = await _race(two_gateways)
    assert _covered(results, grant) == 50
    assert upstream[1].recorder.calls[METHOD] == 50
    after = await grants.get(grant.id)
    assert after is not None and after.uses == 50 and after.status == GrantStatus.EXHAUSTED


async def test_200_racing_calls_never_exceed_max_total(
    two_gateways: list[gateway_pb2_grpc.CapabilityGatewayStub],
    grants: RedisGrantStore,
    upstream: tuple[str, State],
) -> None:
    grant = await grants.create(new_grant(time.time(), amount="input.amount", max_total=1000.0))
    results = await _race(two_gateways)
    assert _covered(results, grant) == 50  # 50 x 20 = 1000
    after = await grants.get(grant.id)
    assert after is not None and after.total == 1000.0 and after.uses == 50
    assert after.status == GrantStatus.EXHAUSTED
    assert upstream[1].recorder.calls[METHOD] == 50


async def test_a_revocation_racing_uses_across_two_gateways(
    two_gateways: list[gateway_pb2_grpc.CapabilityGatewayStub],
    grants: RedisGrantStore,
    upstream: tuple[str, State],
) -> None:
    """The revocation lands while the calls run; the uses it reports are exactly the calls the
    grant covered: none took a use after it."""
    grant = await grants.create(new_grant(time.time()))
    recorder = upstream[1].recorder
    racing = asyncio.ensure_future(_race(two_gateways))
    # Revoked once the upstream served ten of them: the rest race the revocation.
    await asyncio.wait_for(recorder.wait_until(lambda: recorder.calls[METHOD] >= 10), 30)
    revoked = await grants.revoke(grant.id, by=FINANCE, via=None, note="race")
    results = await racing
    assert _covered(results, grant) == revoked.uses
    assert revoked.uses > 0
    after = await grants.get(grant.id)
    assert after is not None and after.uses == revoked.uses
    later = await _race(two_gateways, calls=10)
    assert _covered(later, grant) == 0
