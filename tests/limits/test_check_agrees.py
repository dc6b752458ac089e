"""`Check` answers what `Invoke` would answer now (issue 25 item 7, ADR 0035): stage 8's refusals
(an anonymous actor or no approval store for an approval-gated call), the limits peeked without
spending (RATE_LIMITED with `retry_after`; an over-budget call with `on_exceed:
require-approval` asks for approval; Redis down answers by `on_redis_down`), and the
execution-phase policies for a call that would run. Through the real gateway (real Redis, the
example upstream, real loopback listeners) with the injected clock as the limit script's `now`.

Each comparison checks first, then invokes at the same instant: the Check must spend nothing,
or the Invoke after it would answer something else."""

from __future__ import annotations

import random
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
import yaml

from capgate.v1 import gateway_pb2, types_pb2
from examples.orders.server import serve as serve_orders
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import Env
from tests.limits.conftest import HERE, PREFIX, Clock

pytestmark = [pytest.mark.integration]

GET = {"order_id": "o-1001"}
REVIEWED = "The capability requires approval."  # billing.reviewed_refund declares no reason
ANONYMOUS = None  # the local listener's anonymous caller


@dataclass(frozen=True)
class Verdict:
    """What a caller learns before anything runs: ALLOW, REQUIRE_APPROVAL or an error code,
    the approval reasons, and the wait before a retry."""

    answer: str
    reasons: tuple[str, ...] = ()
    retry_after_s: float | None = None


def _code(error: types_pb2.CapabilityError) -> str:
    return types_pb2.ErrorCode.Name(error.code).removeprefix("ERROR_CODE_")


def _retry_after(error: types_pb2.CapabilityError) -> float | None:
    return error.retry_after.ToNanoseconds() / 1e9 if error.HasField("retry_after") else None


def of_check(response: gateway_pb2.CheckResponse) -> Verdict:
    if response.HasField("error"):
        return Verdict(_code(response.error), (), _retry_after(response.error))
    answer = types_pb2.Decision.Name(response.decision).removeprefix("DECISION_")
    return Verdict(answer, tuple(response.approval_reasons))


def of_invoke(result: gateway_pb2.ExecutionResult) -> Verdict:
    outcome = result.WhichOneof("outcome")
    if outcome == "completed":
        return Verdict("ALLOW")
    if outcome == "approval_required":
        reasons = tuple(r for r in result.approval_required.approval.reasons if r != REVIEWED)
        return Verdict("REQUIRE_APPROVAL", reasons)
    error = result.failed if outcome == "failed" else result.cancelled
    assert result.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED, result
    return Verdict(_code(error), (), _retry_after(error))


def _config(tmp: Path) -> Path:
    """tests/limits/gateway.yaml, plus a trusted-local listener (anonymous allowed) on the
    agent surface, paths made absolute."""
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["listeners"].append(
        {
            "name": "local",
            "address": "unix://{{ env.TEST_RUN_DIR }}/capgate.sock",
            "surface": "agent",
            "auth": "trusted-local",
            "trusted_local": {"issuer": "local", "allow_anonymous": True},
        }
    )
    data["upstreams"]["orders"]["descriptor_set"] = str(
        (HERE / "../../examples/orders/orders.pb").resolve()
    )
    data["policies"]["paths"] = [str(HERE / "policies.yaml")]
    path = tmp / "gateway.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
async def orders() -> AsyncIterator[str]:
    server, port = await serve_orders("127.0.0.1:0")
    yield f"127.0.0.1:{port}"
    await server.stop(0)


@pytest.fixture(scope="module")
def check_redis(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RedisProcess]:
    process = RedisProcess(tmp_path_factory.mktemp("check-redis")).start()
    yield process  # type: ignore[misc]
    process.stop()


@pytest.fixture(scope="module")
async def check_gateway(
    orders: str, check_redis: RedisProcess, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Env]:
    run_dir = tempfile.mkdtemp(prefix="cg-")
    environ = gateway_environ(orders, check_redis.url, run_dir)
    settings = load_settings(_config(tmp_path_factory.mktemp("check")), environ=environ)
    memory = MemorySink()
    gw = await start(settings, extra_sinks=[memory])
    env = Env(gw=gw, audit=memory, orders_address=orders, socket_path=f"{run_dir}/capgate.sock")
    yield env
    for channel in env.channels.values():
        await channel.close()
    await gw.stop(0.5)


async def _limit_keys(url: str) -> dict[bytes, Any]:
    """Every limit key with its value and TTL: what a Check must leave as it found it."""
    client = aioredis.from_url(url)
    try:
        out: dict[bytes, Any] = {}
        async for key in client.scan_iter(match=f"{PREFIX}:*"):
            kind = await client.type(key)
            value = await (client.hgetall(key) if kind == b"hash" else client.get(key))
            out[key] = (value, await client.pttl(key))
        return out
    finally:
        await client.aclose()


def assert_untouched(before: dict[bytes, Any], after: dict[bytes, Any]) -> None:
    """The same keys with the same values, no TTL extended (they only ran down meanwhile)."""
    assert after.keys() == before.keys()
    for key, (value, ttl) in after.items():
        assert value == before[key][0], key
        assert ttl <= before[key][1], key


async def _reset(env: Env, url: str) -> None:
    client = aioredis.from_url(url)
    async for key in client.scan_iter(match=f"{PREFIX}:*"):
        await client.delete(key)
    await client.aclose()
    await env.reset_upstream()


@pytest.fixture
async def env(check_gateway: Env, check_redis: RedisProcess) -> AsyncIterator[Env]:
    """The module's gateway with a fresh clock, no limit state and a reset upstream."""
    if check_redis.process is None or check_redis.process.poll() is not None:
        check_redis.start()  # an outage test stopped it: same port, same data
    await _reset(check_gateway, check_redis.url)
    saved = check_gateway.gw.runtime.wall
    check_gateway.gw.runtime.wall = Clock()
    yield check_gateway
    check_gateway.gw.runtime.wall = saved


def _listener(actor: str | None) -> str:
    return "local" if actor is ANONYMOUS else "agents"


async def check(env: Env, capability: str, value: Any, actor: str | None = "alice") -> Verdict:
    listener = _listener(actor)
    response = await env.gateway(listener).Check(
        gateway_pb2.CheckRequest(capability_id=capability, input_json=orjson.dumps(value)),
        metadata=env.metadata(listener, actor),
    )
    return of_check(response)


async def invoke(env: Env, capability: str, value: Any, actor: str | None = "alice") -> Verdict:
    return of_invoke(await env.invoke(capability, value, actor=actor, listener=_listener(actor)))


async def agree(env: Env, capability: str, value: Any, actor: str | None = "alice") -> Verdict:
    """Check, then Invoke at the same instant: both verdicts, asserted equal."""
    before = await check(env, capability, value, actor)
    after = await invoke(env, capability, value, actor)
    assert before == after, (capability, value, actor)
    return before


def refund(amount: float, **extra: Any) -> dict[str, Any]:
    return {"order_id": "o-1001", "amount": amount, **extra}


async def test_an_anonymous_actor_on_an_approval_gated_capability_is_unauthenticated(
    env: Env,
) -> None:
    verdict = await agree(env, "billing.reviewed_refund", refund(5), ANONYMOUS)
    assert verdict.answer == "UNAUTHENTICATED"
    # Over a require-approval budget: approval-gated by the limits alone, refused the same.
    verdict = await agree(env, "billing.refund", refund(150), ANONYMOUS)
    assert verdict.answer == "UNAUTHENTICATED"
    assert (await agree(env, "billing.refund", refund(5), ANONYMOUS)).answer == "ALLOW"


async def test_without_an_approval_store_an_approval_gated_call_is_unavailable(
    env: Env,
) -> None:
    runtime = env.gw.runtime
    store, runtime.approvals = runtime.approvals, None
    try:
        verdict = await agree(env, "billing.reviewed_refund", refund(5))
        assert verdict.answer == "APPROVAL_UNAVAILABLE"
        assert (await agree(env, "orders.get", GET)).answer == "ALLOW"
    finally:
        runtime.approvals = store


async def test_an_exhausted_rate_is_rate_limited_with_the_wait_and_checks_spend_nothing(
    env: Env, check_redis: RedisProcess
) -> None:
    for _ in range(100):
        assert await check(env, "orders.get", GET) == Verdict("ALLOW")
    assert await _limit_keys(check_redis.url) == {}  # a hundred Checks wrote nothing
    for _ in range(3):  # the whole burst is still there
        assert await agree(env, "orders.get", GET) == Verdict("ALLOW")
    state = await _limit_keys(check_redis.url)
    for _ in range(100):
        verdict = await check(env, "orders.get", GET)
        assert verdict.answer == "RATE_LIMITED" and verdict.retry_after_s == pytest.approx(1.0)
    assert_untouched(state, await _limit_keys(check_redis.url))  # refused Checks wrote nothing
    assert await agree(env, "orders.get", GET) == verdict
    env.gw.runtime.wall.advance(1.0)
    assert await agree(env, "orders.get", GET) == Verdict("ALLOW")


async def test_a_budget_over_max_with_require_approval_asks_and_spends_nothing(
    env: Env, check_redis: RedisProcess
) -> None:
    reason = "Budget approved_budget would be exceeded by this call."
    assert await agree(env, "billing.refund", refund(60)) == Verdict("ALLOW")
    state = await _limit_keys(check_redis.url)
    for _ in range(20):
        assert await check(env, "billing.refund", refund(60)) == Verdict(
            "REQUIRE_APPROVAL", (reason,)
        )
    assert_untouched(state, await _limit_keys(check_redis.url))
    assert await agree(env, "billing.refund", refund(60)) == Verdict("REQUIRE_APPROVAL", (reason,))
    assert await agree(env, "billing.refund", refund(40)) == Verdict("ALLOW")  # exactly max


async def test_a_deny_budget_over_max_is_rate_limited_as_invoke_says(env: Env) -> None:
    assert await agree(env, "orders.refund", refund(600, reason="urgent")) == Verdict("ALLOW")
    verdict = await agree(env, "orders.refund", refund(600, reason="urgent"))
    assert verdict.answer == "RATE_LIMITED" and verdict.retry_after_s == pytest.approx(86400.0)
    never = await agree(env, "orders.refund", refund(1001))  # above max: waiting never helps
    assert never == Verdict("RATE_LIMITED", (), None)


async def test_an_execution_phase_deny_on_what_the_limits_would_leave_agrees(env: Env) -> None:
    """keep-a-reserve (tests/limits/policies.yaml) reads what the budget would leave."""
    assert (await agree(env, "orders.refund", refund(960))).answer == "POLICY_DENIED"
    assert (await agree(env, "orders.refund", refund(960, reason="urgent"))).answer == "ALLOW"


async def test_redis_down_during_the_peek_answers_as_invoke_does(
    env: Env, check_redis: RedisProcess
) -> None:
    check_redis.stop()
    # refund_rate fails closed: UPSTREAM_UNAVAILABLE; get_rate (a rate) fails open.
    assert (await agree(env, "orders.refund", refund(5))).answer == "UPSTREAM_UNAVAILABLE"
    assert (await agree(env, "orders.get", GET)).answer == "ALLOW"


# -- the property: for generated cases, Check's verdict is the one Invoke then gives ---------

_CAPABILITIES = ("orders.get", "orders.list", "orders.refund", "billing.refund")
_CAPABILITIES += ("billing.reviewed_refund",)
_ACTORS = ("alice", "bob", ANONYMOUS)


@dataclass(frozen=True)
class Case:
    actor: str | None
    capability: str
    value: dict[str, Any]
    before: tuple[tuple[str, str | None, dict[str, Any]], ...]  # calls that set the state
    advance_s: float  # the clock moves this much after them


def _input(rng: random.Random, capability: str) -> dict[str, Any]:
    if capability == "orders.get":
        return dict(GET)
    if capability == "orders.list":
        return {"customer_id": "c-1"}
    amount = rng.choice((1, 5, 40, 60, 99.5, 100, 101, 400, 960, 1001))
    value = refund(amount)
    if capability == "orders.refund" and rng.random() < 0.5:
        value["reason"] = "urgent"
    return value


def cases(seed: int, count: int) -> list[Case]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        capability = rng.choice(_CAPABILITIES)
        before = []
        for _ in range(rng.randint(0, 4)):  # spend from the limits this case meets
            other = rng.choice((capability, "orders.get", "billing.refund"))
            value = _input(rng, other)
            if "amount" in value:  # within what the order has left to refund
                value["amount"] = min(value["amount"], 300)
            before.append((other, rng.choice(_ACTORS[:2]), value))
        out.append(
            Case(
                actor=rng.choice(_ACTORS),
                capability=capability,
                value=_input(rng, capability),
                before=tuple(before),
                advance_s=rng.choice((0.0, 0.0, 0.5, 1.0, 3.0)),
            )
        )
    return out


async def test_checks_verdict_is_the_one_invoke_then_gives(
    env: Env, check_redis: RedisProcess
) -> None:
    seen: set[str] = set()
    for case in cases(seed=25, count=120):
        await _reset(env, check_redis.url)
        for capability, actor, value in case.before:
            await env.invoke(capability, value, actor=actor)
        env.gw.runtime.wall.advance(case.advance_s)
        verdict = await agree(env, case.capability, case.value, case.actor)
        seen.add(verdict.answer)
    # The generator reaches every answer this comparison is about.
    assert seen >= {
        "ALLOW",
        "REQUIRE_APPROVAL",
        "RATE_LIMITED",
        "UNAUTHENTICATED",
        "POLICY_DENIED",
    }, seen
