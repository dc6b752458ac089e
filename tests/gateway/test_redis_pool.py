"""More calls waiting on Redis at once than the client has connections (issue 28's race runs
found it: about 100 approval-gated calls in flight in one process answered APPROVAL_UNAVAILABLE).

redis-py's pool refuses the 101st concurrent command outright (`MaxConnectionsError`); the
gateway's pool makes a command wait for a connection instead, up to the command timeout
(gateway/state/connections.py). Through the real gateway and a real Redis, with Redis's replies
held back by a relay so that every call's Redis command is in flight at the same moment.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections import Counter

import pytest

from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import Env
from tests.properties.redisproxy import RedisRelay

pytestmark = pytest.mark.integration

CALLS = 160  # more than redis-py's default pool of 100, fewer than the gateway's


async def test_calls_beyond_the_pools_size_wait_for_a_connection(
    orders_upstream: str, redis_server: RedisProcess
) -> None:
    relay = RedisRelay(int(redis_server.url.rsplit(":", 1)[1].split("/")[0])).start()
    run_dir = tempfile.mkdtemp(prefix="cg-")
    settings = load_settings(
        HERE / "gateway.yaml", environ=gateway_environ(orders_upstream, relay.url, run_dir)
    )
    gw = await start(settings, extra_sinks=[MemorySink()])
    env = Env(gw=gw, audit=MemorySink(), orders_address=orders_upstream, socket_path="")
    try:
        # Warm: one call opens the listener's channel; then every reply waits 0.6 s, so the
        # keyed calls' journal claims are all in flight together.
        await env.invoke("orders.get", {"order_id": "o-1001"})
        relay.hold_replies(0.6)
        results = await asyncio.gather(
            *(
                env.invoke("orders.get", {"order_id": "o-1001"}, idempotency_key=f"pool-{i}")
                for i in range(CALLS)
            )
        )
        outcomes = Counter(r.WhichOneof("outcome") for r in results)
        failures = Counter(r.failed.message for r in results if r.HasField("failed"))
        assert outcomes == {"completed": CALLS}, (outcomes, failures)
    finally:
        for channel in env.channels.values():
            await channel.close()
        await gw.stop(0.5)
        relay.stop()
