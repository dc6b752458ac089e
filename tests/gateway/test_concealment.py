"""SI-8 through the real server (issue 14 item 4): another actor's approval answers exactly like
an unknown id — the same envelope but for `execution_id`, no `duration` — and costs what an
unknown id costs: ownership is compared inside Redis, before the record is read, so the
stranger's lookup runs the very same Redis commands (watched with MONITOR) and never reads the
record. A policy-hidden capability answers bad input exactly like an unknown capability."""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest
import redis.asyncio as aioredis

from capgate.v1 import gateway_pb2, types_pb2
from gateway.state.embedded import RedisProcess
from tests.fuzz.cases import HOSTILE_BODIES, random_body_case
from tests.gateway.harness import Env
from tests.gateway.test_approval_flow import decide, request_approval

pytestmark = pytest.mark.integration

PREFIX = "capgate-test"


def _without_id(result: gateway_pb2.ExecutionResult) -> bytes:
    copy = gateway_pb2.ExecutionResult()
    copy.CopyFrom(result)
    copy.ClearField("execution_id")
    return copy.SerializeToString(deterministic=True)


async def _commands_on(
    redis_server: RedisProcess, approval_id: str, action: Callable[[], Awaitable[Any]]
) -> list[str]:
    """The Redis commands (scripts' inner commands included) that touched the approval's record
    key while `action` ran, with the id replaced by `<id>`."""
    key = f"{PREFIX}:{{apr:{approval_id}}}"
    marker = f"concealment-mark-{os.urandom(6).hex()}"
    watcher = aioredis.Redis.from_url(redis_server.url)
    poker = aioredis.Redis.from_url(redis_server.url)
    seen: list[str] = []
    try:
        async with watcher.monitor() as monitor:

            async def collect() -> None:
                async for info in monitor.listen():
                    command = str(info["command"])
                    if marker in command:
                        return
                    if key in command:
                        seen.append(command.replace(approval_id, "<id>"))

            task = asyncio.create_task(collect())
            await action()
            await poker.echo(marker)
            await asyncio.wait_for(task, 10)
    finally:
        await poker.aclose()
        await watcher.aclose()
    return seen


async def test_another_actors_resume_equals_an_unknown_ids_without_a_duration(env: Env) -> None:
    approval = await request_approval(env)
    assert (await decide(env, approval)).approval.id == approval.id
    stranger = await env.resume(approval.id, actor="carol")
    unknown = await env.resume(os.urandom(16).hex(), actor="carol")
    assert stranger.failed.code == types_pb2.ERROR_CODE_APPROVAL_NOT_FOUND, stranger
    assert not stranger.HasField("duration") and not unknown.HasField("duration")
    assert stranger.execution_id != unknown.execution_id
    assert _without_id(stranger) == _without_id(unknown)
    # The requester still gets their approval, and its answer carries a duration.
    own = await env.resume(approval.id)
    assert own.WhichOneof("outcome") == "completed" and own.HasField("duration")


async def test_another_actors_get_approval_equals_an_unknown_ids(env: Env) -> None:
    approval = await request_approval(env)
    gateway = env.gateway()
    carol = env.metadata("agents", "carol")
    stranger = await gateway.GetApproval(
        gateway_pb2.GetApprovalRequest(approval_id=approval.id), metadata=carol
    )
    unknown = await gateway.GetApproval(
        gateway_pb2.GetApprovalRequest(approval_id=os.urandom(16).hex()), metadata=carol
    )
    assert stranger.error.code == types_pb2.ERROR_CODE_APPROVAL_NOT_FOUND
    assert stranger.SerializeToString(deterministic=True) == unknown.SerializeToString(
        deterministic=True
    )


@pytest.mark.parametrize("rpc", ["GetApproval", "WaitApproval", "Resume"])
async def test_a_strangers_lookup_runs_the_unknown_ids_redis_commands_and_reads_nothing(
    env: Env, redis_server: RedisProcess, rpc: str
) -> None:
    approval = await request_approval(env)
    await decide(env, approval)
    gateway = env.gateway()
    carol = env.metadata("agents", "carol")

    def lookup(approval_id: str) -> Callable[[], Awaitable[Any]]:
        if rpc == "Resume":
            return lambda: env.resume(approval_id, actor="carol")
        if rpc == "WaitApproval":
            wait = gateway_pb2.WaitApprovalRequest(approval_id=approval_id)
            wait.timeout.FromMilliseconds(50)
            return lambda: gateway.WaitApproval(wait, metadata=carol)
        request = gateway_pb2.GetApprovalRequest(approval_id=approval_id)
        return lambda: gateway.GetApproval(request, metadata=carol)

    random_id = os.urandom(16).hex()
    strangers = await _commands_on(redis_server, approval.id, lookup(approval.id))
    randoms = await _commands_on(redis_server, random_id, lookup(random_id))
    assert strangers == randoms, (strangers, randoms)
    # One script call whose only read is the three ownership fields: the record is not read.
    assert len(strangers) == 2, strangers
    assert strangers[0].upper().startswith("EVALSHA")
    assert strangers[1].split()[0].upper() == "HMGET"
    assert strangers[1].split()[2:] == ["req_iss", "req_id", "surface"]
    assert not any(c.split()[0].upper() in {"HGETALL", "HGET"} for c in strangers)
    # The owner's lookup reads the record, in the same script call.
    owners = await _commands_on(
        redis_server,
        approval.id,
        lambda: gateway.GetApproval(
            gateway_pb2.GetApprovalRequest(approval_id=approval.id),
            metadata=env.metadata("agents", "alice"),
        ),
    )
    assert [c.split()[0].upper() for c in owners] == ["EVALSHA", "HMGET", "HGETALL"]


def _without_ids(result: gateway_pb2.ExecutionResult) -> bytes:
    copy = gateway_pb2.ExecutionResult()
    copy.CopyFrom(result)
    copy.ClearField("execution_id")
    copy.ClearField("capability_id")  # each answer names the id it was asked for
    return copy.SerializeToString(deterministic=True)


@pytest.mark.parametrize(
    "raw",
    [b'{"older_than_days": "many"}', b'{"older_than_days": 0}', b'{"nope": 1}', b"[1]", b"{"],
    ids=["wrong-type", "below-minimum", "extra-field", "not-an-object", "not-json"],
)
async def test_bad_input_to_a_hidden_capability_answers_as_for_a_missing_one(
    env: Env, raw: bytes
) -> None:
    # admin-capabilities-hidden (examples/policies) reads only actor.roles: input-free.
    hidden = await env.invoke("admin.orders.purge", raw=raw)
    missing = await env.invoke("admin.orders.nonexistent", raw=raw)
    assert hidden.failed.code == types_pb2.ERROR_CODE_CAPABILITY_NOT_FOUND, hidden
    assert not hidden.failed.issues and not hidden.HasField("duration")
    assert hidden.capability_id == "admin.orders.purge"
    assert _without_ids(hidden) == _without_ids(missing)
    checked = [
        await env.gateway().Check(
            gateway_pb2.CheckRequest(capability_id=capability, input_json=raw),
            metadata=env.metadata("agents", "alice"),
        )
        for capability in ("admin.orders.purge", "admin.orders.nonexistent")
    ]
    assert checked[0] == checked[1]  # Check reveals only what Invoke would
    events = await env.events_for(hidden.execution_id)
    denied = events[-1]
    assert denied["event"] == "capability.denied" and denied["reason"] == "hidden"
    stances = {s["policy"]: s["effect"] for s in denied["stances"]}
    assert stances["admin-capabilities-hidden"] == "hide"  # the input-free policies that ran
    # Whom the policy does not hide from gets the validation answer.
    if raw != b"{":
        admin = await env.invoke("admin.orders.purge", raw=raw, actor="root")
        assert admin.failed.code == types_pb2.ERROR_CODE_INPUT_INVALID, admin


async def test_no_body_tells_a_hidden_capability_from_a_missing_one(env: Env) -> None:
    """The family: every hostile body of the fuzz suite and 60 seeded random ones (valid or
    not), sent to the hidden capability and to an unknown one, get the same answer."""
    rng = random.Random(int(os.environ.get("FUZZ_SEED", "14")))
    bodies = {**HOSTILE_BODIES}
    bodies.update({f"random-{i}": random_body_case(rng, i).body for i in range(60)})

    async def answer(capability: str, body: bytes) -> bytes | str:
        try:
            return _without_ids(await env.invoke(capability, raw=body))
        except grpc.aio.AioRpcError as exc:  # a body over the message limit: the transport's
            return f"transport {exc.code().name}"

    differ = []
    for name, body in bodies.items():
        hidden = await answer("admin.orders.purge", body)
        missing = await answer("admin.orders.nonexistent", body)
        if hidden != missing:
            differ.append(name)
    assert not differ, differ
