"""Fuzzing over the wire (issue 14): hostile JSON, hostile request fields and hostile metadata
against the real gateway, the real upstream (which counts every call it receives) and real
Redis. Every case asserts the oracle of tests/fuzz/oracle.py: the server stays alive, every
reply is a documented envelope or transport status, invalid input reaches the upstream 0 times,
no approval is consumed without an upstream attempt, and `execution_state` is truthful.

Bounded by default: fixed cases plus cases generated from FUZZ_SEED (default 14; FUZZ_CASES,
default 250, generated bodies). With FUZZ_SECONDS each generating test keeps drawing new seeds
(steps of 1000) for that many seconds; a failure names the seed of its case.
Each test prints its tally (`pytest -s`): requests sent and their outcomes.
"""

from __future__ import annotations

import itertools
import os
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import grpc
import orjson
import pytest
import redis.asyncio as aioredis
from grpc_health.v1 import health_pb2, health_pb2_grpc

from capgate.v1 import gateway_pb2, types_pb2
from gateway.state.embedded import RedisProcess
from tests.fuzz import cases as fc
from tests.fuzz.oracle import (
    INPUT_CODES,
    NOT_FOUND_CODES,
    Observation,
    Tally,
    code_name,
    envelope_violations,
    error_of,
    refusal_violations,
    truth_violations,
)
from tests.gateway.harness import Env
from tests.gateway.test_approval_flow import decide, record_key, request_approval

pytestmark = [pytest.mark.integration]

SEED = int(os.environ.get("FUZZ_SEED", "14"))
CASES = int(os.environ.get("FUZZ_CASES", "250"))
SECONDS = float(os.environ.get("FUZZ_SECONDS", "0"))


def seeds(offset: int) -> Iterator[int]:
    """The seeds one generated test uses: FUZZ_SEED + offset once, or with FUZZ_SECONDS, one
    seed after another (steps of 1000) until that many seconds have passed in this test."""
    deadline = time.monotonic() + SECONDS
    seed = SEED + offset
    while True:
        yield seed
        seed += 1000
        if time.monotonic() >= deadline:
            return


GET_OK = {"order_id": "o-1001"}
REFUSED = INPUT_CODES  # what a malformed request field must be refused with


async def observe(
    env: Env, case: str, send: Callable[[], Awaitable[gateway_pb2.ExecutionResult]]
) -> Observation:
    before = await env.upstream_calls()
    obs = Observation(case)
    try:
        obs.result = await send()
    except grpc.aio.AioRpcError as err:
        obs.status = err.code()
    obs.delta = await env.upstream_calls() - before
    return obs


async def assert_alive(env: Env) -> None:
    """Health answers SERVING and a plain call still completes."""
    health = health_pb2_grpc.HealthStub(env.channel("agents"))
    reply = await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    plain = await env.invoke("orders.get", GET_OK)
    assert plain.WhichOneof("outcome") == "completed", plain


def finish(tally: Tally) -> None:
    print(tally.report())
    assert not tally.problems, tally.verdict()


def check(obs: Observation, *, transport: tuple[str, ...] = (), replay: bool = False) -> list[str]:
    return envelope_violations(obs, transport) + truth_violations(obs, replay=replay)


# --- hostile JSON ------------------------------------------------------------------------


async def test_hostile_json_bodies_are_refused_before_anything_runs(env: Env) -> None:
    tally = Tally("hostile JSON bodies")
    for name, body in fc.HOSTILE_BODIES.items():
        for capability in ("orders.refund", "orders.get"):
            case = f"{capability}/{name}"
            obs = await observe(env, case, lambda b=body, c=capability: env.invoke(c, raw=b))
            problems = check(obs, transport=("size",))
            if fc.reference_invalid(body) or (
                capability == "orders.refund" and name in fc.SCHEMA_INVALID
            ):
                problems += refusal_violations(obs, INPUT_CODES, transport=("size",))
            tally.add(obs, problems)
    await assert_alive(env)
    finish(tally)


async def test_generated_bodies_keep_the_oracle(env: Env) -> None:
    """Seeded random JSON (values and byte mutations). With FUZZ_SECONDS, seed after seed."""
    tally = Tally("generated bodies")
    used = []
    for seed in seeds(0):
        used.append(seed)
        rng = random.Random(seed)
        for index in range(CASES):
            c = rng_case = fc.random_body_case(rng, index)
            case = f"seed={seed} {c.name} {c.capability} {c.body[:60]!r}"
            obs = await observe(env, case, lambda c=rng_case: env.invoke(c.capability, raw=c.body))
            problems = check(obs, transport=("size",))
            if fc.reference_invalid(c.body):
                problems += refusal_violations(obs, INPUT_CODES, transport=("size",))
            tally.add(obs, problems)
            if index % 100 == 99:
                await assert_alive(env)
    tally.name += f" (seeds {used[0]}..{used[-1]}, {len(used)} of them)"
    await assert_alive(env)
    finish(tally)


async def test_check_never_reaches_the_upstream_and_agrees_with_invoke_on_refusals(
    env: Env,
) -> None:
    """Check (a dry run of stages 3-7) on every hostile body: no upstream call, and a body
    Invoke refuses at input validation is refused by Check with the same code."""
    tally = Tally("Check on hostile bodies")
    md = env.metadata("agents", "alice")
    for name, body in fc.HOSTILE_BODIES.items():
        case = f"Check orders.refund/{name}"
        request = gateway_pb2.CheckRequest(capability_id="orders.refund", input_json=body)
        before = await env.upstream_calls()
        try:
            reply = await env.gateway().Check(request, metadata=md, timeout=10)
        except grpc.aio.AioRpcError as err:
            reply, status = None, err.code()
        delta = await env.upstream_calls() - before
        invoked = await observe(env, case, lambda b=body: env.invoke("orders.refund", raw=b))
        problems = [f"{case}: Check made {delta} upstream calls"] if delta else []
        if reply is None:
            if invoked.status != status:
                problems.append(f"{case}: Check answered {status}, Invoke {invoked.outcome()}")
            tally.add(Observation(case, status=status), problems)
            continue
        err = error_of(invoked.result) if invoked.result is not None else None
        refused = code_name(err) if err is not None else ""
        if refused in INPUT_CODES and code_name(reply.error) != refused:
            problems.append(f"{case}: Check answered {code_name(reply.error)}, Invoke {refused}")
        tally.add(invoked, problems)
    await assert_alive(env)
    finish(tally)


# --- hostile request fields ----------------------------------------------------------------


def field_values(offset: int, count: int = 40) -> Iterator[tuple[str, str]]:
    """The named hostile strings, then `count` generated ones per seed (`seeds(offset)`)."""
    yield from fc.HOSTILE_TEXT.items()
    for seed in seeds(offset):
        rng = random.Random(seed)
        for i in range(count):
            yield f"seed={seed} random-{i}", fc.random_text(rng)


async def test_hostile_capability_ids_are_not_found(env: Env) -> None:
    tally = Tally("hostile capability ids")
    near = [("suffix-nul", "orders.get\x00"), ("case", "Orders.Get")]
    near += [("dot-suffix", "orders.get."), ("space-suffix", "orders.get ")]
    for name, value in itertools.chain(near, field_values(0)):
        obs = await observe(env, f"capability_id/{name}", lambda v=value: env.invoke(v, GET_OK))
        tally.add(obs, check(obs) + refusal_violations(obs, NOT_FOUND_CODES | INPUT_CODES))
    await assert_alive(env)
    finish(tally)


async def _forwarded(env: Env) -> Any:
    stats = await env.stats()
    return stats.log[-1] if stats.log else None


async def test_hostile_correlation_ids_are_refused_or_forwarded_verbatim(env: Env) -> None:
    """A correlation id the upstream cannot receive as sent is refused before anything runs;
    one that is accepted reaches the upstream exactly as the caller sent it."""
    tally = Tally("hostile correlation ids (Invoke)")
    for name, value in field_values(1):
        case = f"correlation_id/{name}"
        obs = await observe(
            env, case, lambda v=value: env.invoke("orders.get", GET_OK, correlation_id=v)
        )
        problems = check(obs)
        if not fc.transportable(value):
            problems += refusal_violations(obs, REFUSED)
        elif obs.result is not None and obs.result.WhichOneof("outcome") == "completed" and value:
            seen = await _forwarded(env)
            if seen is None or seen.correlation_id != value:
                problems.append(f"{case}: upstream saw another correlation id")
        elif obs.result is not None and obs.result.WhichOneof("outcome") != "completed":
            problems += refusal_violations(obs, REFUSED)
        tally.add(obs, problems)
    await assert_alive(env)
    finish(tally)


async def test_hostile_idempotency_keys_never_record_a_false_outcome(env: Env) -> None:
    """Each key twice: a refused key is refused again (nothing stored, nothing ran); an
    accepted key runs once, reaches the upstream verbatim, and its repeat replays the envelope."""
    tally = Tally("hostile idempotency keys (twice each)")
    used: set[str] = set()  # Redis starts empty (clean_redis): a key first sent here is new
    for index, (name, value) in enumerate(field_values(2)):
        if not value:
            continue
        key = value if value not in used else f"{index}-{value}"  # a repeat of a random value
        used.add(key)
        case = f"idempotency_key/{name}"

        def send(k: str = key) -> Awaitable[gateway_pb2.ExecutionResult]:
            # a fault id: its refunds leave the order book as it is
            body = {"order_id": "slow-0", "amount": 1}
            return env.invoke("orders.refund", body, idempotency_key=k)

        first = await observe(env, case, send)
        again = await observe(env, case + " (repeat)", send)
        problems = check(first)
        done = first.result is not None and first.result.WhichOneof("outcome") == "completed"
        if not fc.transportable(key) or not done:
            problems += refusal_violations(first, REFUSED) + refusal_violations(again, REFUSED)
            problems += check(again)
        else:
            seen = await _forwarded(env)
            if seen is None or seen.idempotency_key != key:
                problems.append(f"{case}: upstream saw another idempotency key")
            problems += check(again, replay=True)
            if again.result != first.result:
                problems.append(f"{case}: the repeat did not replay the recorded envelope")
        tally.add(first, problems)
        tally.add(again, [])
    await assert_alive(env)
    finish(tally)


async def _status(client: aioredis.Redis, approval_id: str) -> str:
    value = await client.hget(record_key(approval_id), "status")
    return value.decode() if value is not None else "missing"


async def test_hostile_correlation_ids_on_resume_never_lose_an_approval(
    env: Env, redis_server: RedisProcess
) -> None:
    """Resume of an approved call with a hostile correlation id: refused with the approval left
    APPROVED (a clean Resume then executes it once), or executed once with the id forwarded
    verbatim. An approval is never consumed without an upstream attempt."""
    tally = Tally("hostile correlation ids (Resume)")
    client = aioredis.Redis.from_url(redis_server.url)
    try:
        for name, value in field_values(3, count=10):
            case = f"resume correlation_id/{name}"
            await env.reset_upstream()  # a fresh order book: o-1001 can take the refund
            approval = await request_approval(env, actor="carol")
            await decide(env, approval)
            request = gateway_pb2.ResumeRequest(approval_id=approval.id, correlation_id=value)
            obs = await observe(
                env,
                case,
                lambda r=request: env.gateway().Resume(r, metadata=env.metadata("agents", "carol")),
            )
            problems = check(obs)
            status = await _status(client, approval.id)
            if status in {"consumed", "executed"} and obs.delta == 0:
                problems.append(f"{case}: approval {status} with 0 upstream calls")
            done = obs.result is not None and obs.result.WhichOneof("outcome") == "completed"
            if not fc.transportable(value) or not done:
                problems += refusal_violations(obs, REFUSED)
                if status != "approved":
                    problems.append(f"{case}: a refused Resume left the approval {status}")
                clean = await observe(
                    env, case + " (clean)", lambda a=approval: env.resume(a.id, actor="carol")
                )
                if clean.result is None or clean.result.WhichOneof("outcome") != "completed":
                    problems.append(f"{case}: the approved call was lost ({clean.outcome()})")
                problems += check(clean)
                tally.add(clean, [])
            elif value:
                seen = await _forwarded(env)
                if seen is None or seen.correlation_id != value:
                    problems.append(f"{case}: upstream saw another correlation id")
            tally.add(obs, problems)
    finally:
        await client.aclose()
    await assert_alive(env)
    finish(tally)


async def test_hostile_approval_ids_are_not_found(env: Env) -> None:
    tally = Tally("hostile approval ids")
    for name, value in itertools.chain([("empty", "")], field_values(4)):
        obs = await observe(env, f"approval_id/{name}", lambda v=value: env.resume(v))
        tally.add(obs, check(obs) + refusal_violations(obs, NOT_FOUND_CODES | INPUT_CODES))
        get = await observe(
            env,
            f"GetApproval approval_id/{name}",
            lambda v=value: env.gateway().GetApproval(
                gateway_pb2.GetApprovalRequest(approval_id=v),
                metadata=env.metadata("agents", "alice"),
            ),
        )
        if get.result is not None:  # GetApprovalResponse, not an envelope
            reply: Any = get.result
            found = reply.HasField("approval") and reply.approval.id
            code = types_pb2.ErrorCode.Name(reply.error.code).removeprefix("ERROR_CODE_")
            if found or code not in NOT_FOUND_CODES | INPUT_CODES:
                tally.problems.append(f"GetApproval {name}: answered {code}, found={bool(found)}")
        elif get.status not in {grpc.StatusCode.UNAUTHENTICATED}:
            tally.problems.append(f"GetApproval {name}: transport status {get.status}")
        if get.delta:
            tally.problems.append(f"GetApproval {name}: {get.delta} upstream calls")
    await assert_alive(env)
    finish(tally)


# --- hostile metadata ----------------------------------------------------------------------


async def test_hostile_request_metadata_maps_keep_the_oracle(env: Env) -> None:
    """`InvokeRequest.metadata` (visible to policies when allow-listed): hostile keys and
    values, the allow-listed key among them, many entries."""
    tally = Tally("hostile request metadata")

    def maps() -> Iterator[tuple[str, dict[str, str]]]:
        yield from ((f"tenant/{n}", {"tenant": v}) for n, v in fc.HOSTILE_TEXT.items())
        yield from ((f"key/{n}", {v: "x"}) for n, v in fc.HOSTILE_TEXT.items())
        yield "many-entries", {f"k{i}": "v" * 10 for i in range(5000)}
        for seed in seeds(5):
            rng = random.Random(seed)
            for i in range(20):
                md = {fc.random_text(rng)[:300]: fc.random_text(rng) for _ in range(3)}
                yield f"seed={seed} random-{i}", md

    for name, md in maps():
        obs = await observe(
            env, f"metadata/{name}", lambda m=md: env.invoke("orders.get", GET_OK, metadata=m)
        )
        tally.add(obs, check(obs, transport=("size",)))
    await assert_alive(env)
    finish(tally)


Headers = list[tuple[str, str | bytes]]


def _header_sets() -> Iterator[tuple[str, Headers, tuple[str, ...]]]:
    """(name, extra gRPC headers, transport statuses allowed). Values are what grpcio lets a
    client send (printable ASCII, `-bin` for bytes)."""
    printable = "".join(chr(c) for c in range(0x20, 0x7F))
    sets: list[tuple[str, Headers, tuple[str, ...]]] = [
        ("spoof-actor", [("x-capgate-actor-id", "root"), ("x-capgate-actor-roles", "admin")], ()),
        ("spoof-execution-id", [("x-capgate-execution-id", "forged")], ()),
        ("spoof-approval-id", [("x-capgate-approval-id", "forged")], ()),
        ("spoof-actor-token", [("x-capgate-actor-token", "forged")], ()),
        ("traceparent-garbage", [("traceparent", "zz-not-a-trace")], ()),
        ("traceparent-long", [("traceparent", "00-" + "a" * 4000)], ()),
        ("tracestate-long", [("tracestate", "k=" + "v" * 4000)], ()),
        ("binary", [("x-junk-bin", bytes(range(256)))], ()),
        ("many-headers", [(f"x-h{i}", "v") for i in range(200)], ("size",)),
        ("second-authorization", [("authorization", "Bearer forged")], ("auth",)),
    ]
    yield from sets
    for seed in seeds(6):
        rng = random.Random(seed)
        for i in range(20):
            value = "".join(rng.choice(printable) for _ in range(rng.choice((1, 64, 1024))))
            yield f"seed={seed} random-{i}", [(f"x-fuzz-{i}", value.strip() or "v")], ("size",)


async def test_hostile_grpc_metadata_keeps_the_oracle(env: Env) -> None:
    """Caller headers: spoofed gateway headers never reach the upstream as sent, odd trace
    headers and binary values break nothing, a second authorization header is refused."""
    tally = Tally("hostile gRPC metadata")
    stub = env.gateway()
    request = gateway_pb2.InvokeRequest(capability_id="orders.get", input_json=orjson.dumps(GET_OK))
    for name, extra, transport in _header_sets():
        md = [*env.metadata("agents", "alice"), *extra]
        obs = await observe(env, f"headers/{name}", lambda m=md: stub.Invoke(request, metadata=m))
        problems = check(obs, transport=transport)
        if obs.result is not None and obs.result.WhichOneof("outcome") == "completed":
            seen = await _forwarded(env)
            if seen is None or seen.execution_id != obs.result.execution_id:
                problems.append(f"headers/{name}: upstream saw a caller-chosen execution id")
            if seen is not None and seen.approval_id:
                problems.append(f"headers/{name}: upstream saw a caller-chosen approval id")
        tally.add(obs, problems)
    for name, auth in [
        ("garbage-token", "Bearer " + "a.b.c"),
        ("no-scheme", "xyz"),
        ("long-token", "Bearer " + "a" * 7000),
        ("alg-none", "Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJyb290In0."),
    ]:
        md = [("authorization", auth)]
        obs = await observe(env, f"auth/{name}", lambda m=md: stub.Invoke(request, metadata=m))
        problems = check(obs, transport=("auth", "size"))
        if obs.result is not None:
            problems.append(f"auth/{name}: an invalid token got an envelope ({obs.outcome()})")
        tally.add(obs, problems)
    await assert_alive(env)
    finish(tally)


def _local_actors() -> Iterator[tuple[str, Headers]]:
    """Actor headers on the trusted-local listener (the co-located app asserts the actor)."""
    printable = "".join(chr(c) for c in range(0x21, 0x7F))
    yield (
        "braces-and-globs",
        [("x-capgate-actor-id", "{apr:*}?[x]"), ("x-capgate-actor-kind", "user")],
    )
    yield "json-like", [("x-capgate-actor-id", '{"sub":"root"}')]
    yield "1024-chars", [("x-capgate-actor-id", "a" * 1024)]
    yield "1025-chars", [("x-capgate-actor-id", "a" * 1025)]
    yield (
        "many-roles",
        [("x-capgate-actor-id", "u"), ("x-capgate-actor-roles", ",".join(["r"] * 500))],
    )
    yield "empty-roles", [("x-capgate-actor-id", "u"), ("x-capgate-actor-roles", ",,, ,")]
    yield "odd-kind", [("x-capgate-actor-id", "u"), ("x-capgate-actor-kind", "root")]
    yield "anonymous-kind", [("x-capgate-actor-kind", "anonymous")]
    yield "two-ids", [("x-capgate-actor-id", "a"), ("x-capgate-actor-id", "b")]
    yield "spaces-only", [("x-capgate-actor-id", "   ")]
    yield "binary-id", [("x-capgate-actor-id-bin", b"\xff\x00")]
    for seed in seeds(8):
        rng = random.Random(seed)
        for i in range(10):
            value = "".join(rng.choice(printable) for _ in range(rng.choice((1, 64, 1024))))
            yield f"seed={seed} random-{i}", [("x-capgate-actor-id", value)]


async def test_hostile_local_actor_headers_keep_the_oracle(env: Env) -> None:
    """The trusted-local listener takes the actor from headers: odd ones are refused
    (UNAUTHENTICATED) or become an actor whose calls and approvals behave as any other's."""
    tally = Tally("hostile trusted-local actor headers")
    stub = env.gateway("local")
    get = gateway_pb2.InvokeRequest(capability_id="orders.get", input_json=orjson.dumps(GET_OK))
    gated = gateway_pb2.InvokeRequest(
        capability_id="orders.refund",
        input_json=orjson.dumps({"order_id": "o-1001", "amount": 800}),
    )
    for name, md in _local_actors():
        for label, request in (("get", get), ("approval", gated)):
            case = f"local/{name}/{label}"
            obs = await observe(env, case, lambda r=request, m=md: stub.Invoke(r, metadata=m))
            problems = check(obs, transport=("auth",))
            if obs.result is not None and label == "approval":
                outcome = obs.result.WhichOneof("outcome")
                if outcome not in ("approval_required", "failed"):
                    problems.append(f"{case}: a gated refund answered {outcome}")
            tally.add(obs, problems)
    await assert_alive(env)
    finish(tally)


# --- undecodable messages ------------------------------------------------------------------


def _raw_messages() -> Iterator[tuple[str, bytes]]:
    """Request messages the generated stubs would never send."""
    yield from [
        ("invalid-utf8-capability-id", b"\x0a\x02\xff\xfe"),
        ("invalid-utf8-correlation-id", b"\x0a\x0aorders.get\x22\x02\xc0\xaf"),
        ("truncated-length", b"\x0a\x7forders"),
        ("bad-wire-type", b"\x0f\x01"),
        ("unknown-field", b"\x0a\x0aorders.get\xfa\x3f\x03abc"),
        ("huge-varint", b"\x0a" + b"\xff" * 11),
        ("empty", b""),
    ]
    for seed in seeds(7):
        rng = random.Random(seed)
        for i in range(30):
            size = rng.choice((1, 16, 200))
            yield f"seed={seed} random-{i}", bytes(rng.randrange(256) for _ in range(size))


async def test_undecodable_request_messages_get_a_transport_status(env: Env) -> None:
    tally = Tally("undecodable messages")
    invoke = env.channel("agents").unary_unary(
        "/capgate.v1.CapabilityGateway/Invoke",
        request_serializer=None,
        response_deserializer=gateway_pb2.ExecutionResult.FromString,
    )
    md = env.metadata("agents", "alice")
    for name, raw in _raw_messages():
        obs = await observe(env, f"raw/{name}", lambda r=raw: invoke(r, metadata=md, timeout=10))
        problems = check(obs, transport=("decode",))
        if obs.result is not None and obs.result.WhichOneof("outcome") == "completed":
            problems.append(f"raw/{name}: an undecodable or empty request completed")
        tally.add(obs, problems)
    await assert_alive(env)
    finish(tally)
