"""Issue 29: a limit key that only reads a string field of the actor (`actor.id`,
`actor.attributes.tenant`) is read without CEL, and a budget amount that is a number literal is
its value; any other case (an attribute that is missing or not a string) still goes to CEL, so
every key and every failure is what CEL gives. The real gateway (in-process, real Redis, the
real example upstream, real CEL) with tests/limits/gateway.yaml and a per-tenant rate.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis

from capgate.v1 import gateway_pb2
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.model import Actor
from gateway.pipeline import runner as pipeline
from gateway.pipeline.call import Call
from gateway.pipeline.stages import limits as limits_stage
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import Env
from tests.limits.conftest import HERE, PREFIX
from tests.limits.test_limits_flow import code, refund

pytestmark = [pytest.mark.integration]

TENANT_RATE = """  - name: tenant_rate
    capabilities: [orders.get]
    key: actor.attributes.tenant
    rate: {limit: 2, window: 60s, burst: 2}
  - name: flat_budget
    capabilities: [orders.get]
    key: actor.id
    budget: {amount: "2.5", max: 1000000, window: 24h}
"""


@pytest.fixture(scope="module")
async def tenant_env(orders: str, limits_redis: RedisProcess) -> AsyncIterator[Env]:
    run_dir = tempfile.mkdtemp(prefix="cg-")
    text = (HERE / "gateway.yaml").read_text()
    text = text.replace("limits:\n", "limits:\n" + TENANT_RATE, 1)
    text = text.replace("paths: [policies.yaml]", f"paths: [{HERE / 'policies.yaml'}]")
    text = text.replace("../../examples/", f"{HERE.parent.parent / 'examples'}/")
    config = Path(run_dir) / "gateway.yaml"
    config.write_text(text)
    settings = load_settings(config, environ=gateway_environ(orders, limits_redis.url, run_dir))
    gw = await start(settings, extra_sinks=[MemorySink()])
    env = Env(gw=gw, audit=MemorySink(), orders_address=orders, socket_path=f"{run_dir}/c.sock")
    yield env
    await gw.stop(0.5)


@pytest.fixture
async def env(tenant_env: Env, limits_redis: RedisProcess) -> Env:
    client = aioredis.from_url(limits_redis.url)
    async for key in client.scan_iter(match=f"{PREFIX}:*"):
        await client.delete(key)
    await client.aclose()
    return tenant_env


@pytest.fixture
def cel_evaluations(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every CEL program the limits stage evaluates, in order."""
    seen: list[Any] = []
    original = limits_stage._eval

    def counting(program: Any, activation: Any) -> Any:
        seen.append(program)
        return original(program, activation)

    monkeypatch.setattr(limits_stage, "_eval", counting)
    return seen


async def _get(env: Env, actor: Actor) -> gateway_pb2.ExecutionResult:
    call = Call(
        snapshot=env.gw.holder.current,
        surface="agent",
        actor=actor,
        capability_id="orders.get",
        raw_input=orjson.dumps({"order_id": "o-1001"}),
    )
    return await pipeline.run(call, env.gw.runtime)


def _actor(name: str, **attributes: Any) -> Actor:
    return Actor(id=name, kind="user", issuer="test-idp", roles=("agent",), attributes=attributes)


async def test_a_tenant_key_counts_every_actor_of_the_tenant_without_cel(
    env: Env, cel_evaluations: list[Any]
) -> None:
    for name in ("t-a1", "t-a2"):
        done = await _get(env, _actor(name, tenant="acme"))
        assert done.WhichOneof("outcome") == "completed", done
    refused = await _get(env, _actor("t-a3", tenant="acme"))
    assert code(refused) == "RATE_LIMITED"
    other = await _get(env, _actor("t-b1", tenant="globex"))
    assert other.WhichOneof("outcome") == "completed", other
    # actor.id, actor.attributes.tenant and the literal amount: no CEL program ran.
    assert cel_evaluations == []


async def test_a_tenant_that_is_not_a_string_is_keyed_as_cel_keys_it(
    env: Env, cel_evaluations: list[Any]
) -> None:
    # CEL's int 7 is the key "7": the actor whose tenant is the string "7" shares its counter.
    for name in ("t-n1", "t-n2"):
        done = await _get(env, _actor(name, tenant=7))
        assert done.WhichOneof("outcome") == "completed", done
    refused = await _get(env, _actor("t-n3", tenant="7"))
    assert code(refused) == "RATE_LIMITED"
    assert len(cel_evaluations) == 2  # the int tenant went to CEL, each time


async def test_a_missing_tenant_fails_as_cel_fails_it(env: Env) -> None:
    failed = await _get(env, _actor("t-m1"))
    assert code(failed) == "POLICY_FAILED"


async def test_an_amount_that_reads_the_input_still_goes_to_cel(
    env: Env, cel_evaluations: list[Any]
) -> None:
    call = Call(
        snapshot=env.gw.holder.current,
        surface="agent",
        actor=_actor("t-r1"),
        capability_id="orders.refund",
        raw_input=orjson.dumps(refund(4)),
        idempotency_key="direct-keys-1",
    )
    done = await pipeline.run(call, env.gw.runtime)
    assert done.WhichOneof("outcome") == "completed", done
    # refund_budget's `input.amount` is evaluated; its `actor.id` key and refund_rate's
    # constant key `'all'` (not an actor field: CEL) are the other.
    assert len(cel_evaluations) == 2
