"""An inline approver lets an over-budget call past its budget in the same request, and the
amount is spent once (gateway/pipeline/stages/limits.py `spend_after_inline_approval`)."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest
import redis.asyncio as aioredis
import yaml

from capgate.v1 import procedure_pb2, procedure_pb2_grpc, types_pb2
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import Env

pytestmark = [pytest.mark.integration]

HERE = Path(__file__).parent
ROOT = HERE.parent.parent


class Approver(procedure_pb2_grpc.ApproverServicer):
    """Approves every call as bob; remembers what it was asked."""

    def __init__(self) -> None:
        self.reasons: list[list[str]] = []

    async def Decide(self, request: procedure_pb2.ApproverDecideRequest, context: Any) -> Any:
        self.reasons.append(list(request.approval.reasons))
        return procedure_pb2.ApproverDecideResponse(
            approved=True,
            approver=types_pb2.Actor(id="bob", issuer="test-idp", kind="user", roles=["approver"]),
            note="auto",
        )


@pytest.fixture
async def inline_env(
    orders: str, limits_redis: RedisProcess, tmp_path: Path
) -> AsyncIterator[tuple[Env, Approver]]:
    approver = Approver()
    server = grpc.aio.server()
    procedure_pb2_grpc.add_ApproverServicer_to_server(approver, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(ROOT / "examples/orders/orders.pb")
    data["policies"]["paths"] = [str(HERE / "policies.yaml")]
    data["upstreams"]["approver"] = {"address": f"127.0.0.1:{port}", "kind": "grpc"}
    base = next(c for c in data["capabilities"] if c["id"] == "billing.refund")
    data["capabilities"].append(
        {**base, "id": "billing.inline", "approval": {"inline_approver": "approver"}}
    )
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(data))
    run_dir = tempfile.mkdtemp(prefix="cg-")
    settings = load_settings(config, environ=gateway_environ(orders, limits_redis.url, run_dir))
    gw = await start(settings, extra_sinks=[MemorySink()])
    env = Env(gw=gw, audit=MemorySink(), orders_address=orders, socket_path=f"{run_dir}/x.sock")
    client = aioredis.from_url(limits_redis.url)
    async for key in client.scan_iter(match="capgate-limits-test:*"):
        await client.delete(key)
    await client.aclose()
    yield env, approver
    for channel in env.channels.values():
        await channel.close()
    await gw.stop(0.2)
    await server.stop(0)


async def _spent(env: Env, redis_url: str) -> float:
    spec = next(s for s in env.gw.settings.limits if s.name == "approved_budget")
    client = aioredis.from_url(redis_url)
    try:
        value = await client.hget(env.gw.runtime.limiter.key(spec, "alice"), "spent")
    finally:
        await client.aclose()
    return float(value or 0)


async def test_an_inline_approval_spends_past_the_budget_once(
    inline_env: tuple[Env, Approver], limits_redis: RedisProcess
) -> None:
    env, approver = inline_env
    await env.reset_upstream()
    first = await env.invoke("billing.inline", {"order_id": "o-1001", "amount": 80})
    assert first.WhichOneof("outcome") == "completed", first
    assert approver.reasons == []  # within the budget: no approval asked
    assert await _spent(env, limits_redis.url) == 80

    over = await env.invoke("billing.inline", {"order_id": "o-1001", "amount": 50})
    assert over.WhichOneof("outcome") == "completed", over  # approved inline, in one request
    assert approver.reasons == [["Budget approved_budget would be exceeded by this call."]]
    assert await _spent(env, limits_redis.url) == 130  # spent once, past the max of 100
    assert await env.upstream_calls("RefundOrder") == 2
    body = orjson.loads(over.completed.output_json)
    assert body["amount"] == 50


async def test_an_inline_approved_call_that_never_ran_gives_its_amount_back(
    inline_env: tuple[Env, Approver], limits_redis: RedisProcess
) -> None:
    """An idempotent repeat of an inline-approved over-budget call spends past the budget
    (a new inline approval), finds the stored outcome and gives the amount back: the
    execution an inline approver approved holds its forced spend (review 2, item 1)."""
    env, _ = inline_env
    await env.reset_upstream()
    assert (await env.invoke("billing.inline", {"order_id": "o-1001", "amount": 80})).completed
    body = {"order_id": "o-1001", "amount": 50}
    over = await env.invoke("billing.inline", body, idempotency_key="k-inline-1")
    assert over.WhichOneof("outcome") == "completed", over
    again = await env.invoke("billing.inline", body, idempotency_key="k-inline-1")
    assert again.completed == over.completed  # the stored outcome: nothing ran again
    assert await env.upstream_calls("RefundOrder") == 2
    assert await _spent(env, limits_redis.url) == 130  # the repeat's forced 50 given back
