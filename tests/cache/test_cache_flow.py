"""The result cache through the real gateway (docs/cache.md): real Redis, real upstream that
counts the calls it receives, real CEL. A hit never skips stages 1-10 and runs redaction per
request; entries are scoped; a reload, the TTL or Redis being down never serve stale or fail."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest
import redis.asyncio as aioredis

from capgate.v1 import admin_pb2, admin_pb2_grpc, gateway_pb2, types_pb2
from gateway.audit.events import hasher_for
from gateway.cli import main as cli
from gateway.config.loader import load_settings
from gateway.telemetry import metrics
from tests.cache.conftest import PREFIX
from tests.gateway.harness import Env, token
from tests.mcp.mcpkit import McpEnv

GET = "GetOrder"


async def invoke(
    env: Env, capability: str, input_value: Any, actor: str = "alice", **claims: Any
) -> gateway_pb2.ExecutionResult:
    request = gateway_pb2.InvokeRequest(
        capability_id=capability, input_json=orjson.dumps(input_value)
    )
    bearer = [("authorization", f"Bearer {token(actor, **claims)}")]
    return await env.gateway().Invoke(request, metadata=bearer, timeout=10)


def output(result: gateway_pb2.ExecutionResult) -> Any:
    assert result.WhichOneof("outcome") == "completed", result
    return orjson.loads(result.completed.output_json)


async def completed_cache_field(env: Env, result: gateway_pb2.ExecutionResult) -> Any:
    events = await env.events_for(result.execution_id)
    (done,) = [e for e in events if e["event"] == "capability.completed"]
    started = [e for e in events if e["event"] == "capability.started"]
    assert started, "stage 10 ran (capability.started) before the cache answered"
    return done.get("cache")


async def test_a_repeat_is_served_from_the_cache_without_calling_the_upstream(env: Env) -> None:
    hits = metrics.cache_lookups.value(("orders.get", "hit"))
    first = await invoke(env, "orders.get", {"order_id": "o-1001"})
    second = await invoke(env, "orders.get", {"order_id": "o-1001"})
    assert output(first) == output(second)
    assert await env.upstream_calls(GET) == 1
    assert first.attempts == 1
    assert second.attempts == 0  # this execution sent nothing upstream
    assert second.execution_state == types_pb2.EXECUTION_STATE_COMPLETED
    assert await completed_cache_field(env, first) == "miss"
    assert await completed_cache_field(env, second) == "hit"
    assert metrics.cache_lookups.value(("orders.get", "hit")) == hits + 1
    # Another input is another entry.
    await invoke(env, "orders.get", {"order_id": "o-1002"})
    assert await env.upstream_calls(GET) == 2


async def test_another_actor_never_hits_an_actor_scoped_entry(env: Env) -> None:
    await invoke(env, "orders.get", {"order_id": "o-1001"}, "alice")
    await invoke(env, "orders.get", {"order_id": "o-1001"}, "bob")
    assert await env.upstream_calls(GET) == 2
    await invoke(env, "orders.get", {"order_id": "o-1001"}, "alice")
    await invoke(env, "orders.get", {"order_id": "o-1001"}, "bob")
    assert await env.upstream_calls(GET) == 2


async def test_a_shared_entry_is_redacted_per_request(env: Env) -> None:
    full = output(await invoke(env, "orders.shared", {"order_id": "o-1001"}, "bob"))
    assert "card_last4" in full  # bob is a manager
    seen_by_alice = output(await invoke(env, "orders.shared", {"order_id": "o-1001"}, "alice"))
    assert seen_by_alice == {"order_id": "o-1001", "customer_id": full["customer_id"]}
    again = output(await invoke(env, "orders.shared", {"order_id": "o-1001"}, "bob"))
    assert again == full  # the entry holds the validated output, not alice's redacted one
    assert await env.upstream_calls(GET) == 1


async def test_a_deny_still_denies_with_a_warm_cache(env: Env) -> None:
    await invoke(env, "orders.shared", {"order_id": "o-1001"}, "bob")
    denied = await invoke(env, "orders.shared", {"order_id": "o-1001"}, "bot")
    assert denied.WhichOneof("outcome") == "failed"
    assert denied.failed.code == types_pb2.ERROR_CODE_POLICY_DENIED
    assert await env.upstream_calls(GET) == 1
    events = await env.events_for(denied.execution_id)
    assert [e["event"] for e in events][-1] == "capability.denied"


async def test_a_key_expression_scopes_entries_by_its_value(env: Env) -> None:
    order = {"order_id": "o-1001"}
    await invoke(env, "orders.tenant", order, "alice", tenant="t1")
    await invoke(env, "orders.tenant", order, "carol", tenant="t1")
    assert await env.upstream_calls(GET) == 1  # same tenant: shared
    await invoke(env, "orders.tenant", order, "bob", tenant="t2")
    assert await env.upstream_calls(GET) == 2
    # No tenant attribute: the key fails, the call goes on uncached (never an error).
    for _ in range(2):
        output(await invoke(env, "orders.tenant", order, "alice"))
    assert await env.upstream_calls(GET) == 4


async def test_an_entry_expires_with_its_ttl(env: Env) -> None:
    order = {"order_id": "o-1001"}
    await invoke(env, "orders.brief", order)
    await invoke(env, "orders.brief", order)
    assert await env.upstream_calls(GET) == 1
    await asyncio.sleep(0.45)  # the TTL is 300ms, kept by Redis
    await invoke(env, "orders.brief", order)
    assert await env.upstream_calls(GET) == 2


async def test_failures_are_never_cached(env: Env) -> None:
    for _ in range(2):
        result = await invoke(env, "orders.get", {"order_id": "o-missing"})
        assert result.WhichOneof("outcome") == "failed"
        assert await completed_or_none(env, result) is None
    assert await env.upstream_calls(GET) == 2


async def completed_or_none(env: Env, result: gateway_pb2.ExecutionResult) -> Any:
    events = await env.events_for(result.execution_id)
    done = [e for e in events if e["event"] == "capability.completed"]
    return done[0] if done else None


async def test_a_policy_change_invalidates_the_entries(env: Env, config_dir: Path) -> None:
    order = {"order_id": "o-1001"}
    await invoke(env, "orders.get", order)
    await invoke(env, "orders.get", order)
    assert await env.upstream_calls(GET) == 1
    policies = config_dir / "policies.yaml"
    before = policies.read_text()
    revision = env.gw.holder.current.revision
    extra = """
  - name: note-shared-reads
    description: An extra policy, so that the policy revision changes.
    mode: shadow
    match:
      capabilities: [orders.shared]
    rules:
      - when: actor.kind == "service"
        effect: deny
"""
    try:
        policies.write_text(before + extra)
        environ = env.environ  # type: ignore[attr-defined]
        await env.gw.reload(load_settings(config_dir / "gateway.yaml", environ=environ))
        assert env.gw.holder.current.revision != revision
        await invoke(env, "orders.get", order)
        assert await env.upstream_calls(GET) == 2  # the new revision is in the key
        await invoke(env, "orders.get", order)
        assert await env.upstream_calls(GET) == 2
    finally:
        policies.write_text(before)
        environ = env.environ  # type: ignore[attr-defined]
        await env.gw.reload(load_settings(config_dir / "gateway.yaml", environ=environ))


async def test_calls_complete_uncached_while_redis_is_down(env: Env, cache_redis: Any) -> None:
    order = {"order_id": "o-1001"}
    unavailable = metrics.cache_lookups.value(("orders.get", "unavailable"))
    cache_redis.stop()
    try:
        results = [await invoke(env, "orders.get", order) for _ in range(2)]
        for result in results:
            assert output(result)["order_id"] == "o-1001"
            assert await completed_cache_field(env, result) == "miss"
        assert await env.upstream_calls(GET) == 2
        assert metrics.cache_lookups.value(("orders.get", "unavailable")) == unavailable + 2
    finally:
        cache_redis.start()


async def test_the_upstream_receives_the_mapped_request(env: Env) -> None:
    mine = output(await invoke(env, "orders.mine", {}, "alice", customer="c-1"))
    assert mine["orders"] and {o["customer_id"] for o in mine["orders"]} == {"c-1"}
    result = await invoke(env, "orders.mine", {"size": 1}, "bob", customer="c-2")
    theirs = output(result)
    assert [o["customer_id"] for o in theirs["orders"]] == ["c-2"]  # page_size 1 went up too
    assert await env.upstream_calls("ListOrders") == 2
    # The audit trail binds the caller's input, never the mapped request.
    events = await env.events_for(result.execution_id)
    hasher = hasher_for(env.gw.holder.current.settings.audit)
    assert hasher is not None
    assert {e["input_hmac"] for e in events if "input_hmac" in e} == {hasher.digest({"size": 1})}
    assert "customer_id" not in orjson.dumps(events).decode()


async def test_an_admin_purge_deletes_one_capabilitys_entries(env: Env) -> None:
    order = {"order_id": "o-1001"}
    for actor in ("alice", "bob"):
        await invoke(env, "orders.get", order, actor)
    await invoke(env, "orders.shared", order, "bob")
    assert await env.upstream_calls(GET) == 3
    stub = admin_pb2_grpc.CacheAdminStub(env.channel("admin"))
    metadata = env.metadata("admin", "root")
    answer = await stub.PurgeCache(
        admin_pb2.PurgeCacheRequest(capability_id="orders.get"), metadata=metadata
    )
    assert answer.deleted == 2
    await invoke(env, "orders.get", order, "alice")
    assert await env.upstream_calls(GET) == 4  # purged: a miss
    await invoke(env, "orders.shared", order, "bob")
    assert await env.upstream_calls(GET) == 4  # another capability's entries stay
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.PurgeCache(admin_pb2.PurgeCacheRequest(capability_id="*"), metadata=metadata)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.PurgeCache(admin_pb2.PurgeCacheRequest(capability_id="orders.get"))
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_the_approval_gate_runs_on_a_warm_cache_and_resume_runs_upstream(env: Env) -> None:
    order = {"order_id": "o-1001"}
    await invoke(env, "orders.shared", order, "bob")
    asked = await invoke(env, "orders.shared", order, "carol")
    assert asked.WhichOneof("outcome") == "approval_required"  # not served from the entry
    assert await env.upstream_calls(GET) == 1
    approval = asked.approval_required.approval
    decided = await env.admin().DecideApproval(
        admin_pb2.DecideApprovalRequest(
            approval_id=approval.id,
            verdict=admin_pb2.VERDICT_APPROVE,
            input_hash=approval.input_hash,
        ),
        metadata=env.metadata("admin", "bob"),
    )
    assert decided.approval.status == types_pb2.APPROVAL_STATUS_APPROVED
    resumed = await env.gateway().Resume(
        gateway_pb2.ResumeRequest(approval_id=approval.id), metadata=env.metadata("agents", "carol")
    )
    assert output(resumed)["order_id"] == "o-1001"
    assert resumed.attempts == 1  # Resume runs the approved call upstream (docs/cache.md)
    assert await env.upstream_calls(GET) == 2
    assert await completed_cache_field(env, resumed) is None  # never looked up


async def test_capgate_cache_purge_deletes_through_the_admin_listener(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    order = {"order_id": "o-1001"}
    await invoke(env, "orders.get", order)
    admin = f"127.0.0.1:{env.port('admin')}"
    bearer = token("root", audience="capgate-admin")
    argv = ["cache", "purge", "orders.get", "--admin", admin, "--insecure", "--token", bearer]
    assert await asyncio.to_thread(cli.main, argv) == 0
    out, _ = capsys.readouterr()
    assert out == "purged 1 entry of orders.get\n"
    await invoke(env, "orders.get", order)
    assert await env.upstream_calls(GET) == 2
    # No credentials: the admin listener refuses; the token is never printed.
    assert await asyncio.to_thread(cli.main, argv[:-2]) == 3
    _, err = capsys.readouterr()
    assert "UNAUTHENTICATED" in err and bearer not in err


async def test_a_procedure_upstream_receives_the_mapped_value_validated(env: Env) -> None:
    mine = output(await invoke(env, "orders.list", {"size": 1}, "alice", customer="c-2"))
    assert [o["customer_id"] for o in mine["orders"]] == ["c-2"]
    assert await env.upstream_calls("procedure:orders.list") == 1
    # A mapped value its schema refuses is never sent: nothing ran, and it says so.
    for claims in ({"customer": "c-99999"}, {}):  # too long; missing (required)
        refused = await invoke(env, "orders.list", {}, "alice", **claims)
        assert refused.WhichOneof("outcome") == "failed"
        assert refused.failed.code == types_pb2.ERROR_CODE_EXECUTION_FAILED
        assert refused.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
    assert await env.upstream_calls("procedure:orders.list") == 1


async def _entry_keys(redis_url: str, capability: str) -> list[bytes]:
    client = aioredis.from_url(redis_url)
    try:
        found = [k async for k in client.scan_iter(match=f"{PREFIX}:{{cache:{capability}}}:e:*")]
    finally:
        await client.aclose()
    return found


async def test_an_entry_moved_to_another_key_or_altered_does_not_open(
    env: Env, cache_redis: Any
) -> None:
    order = {"order_id": "o-1001"}
    await invoke(env, "orders.get", order, "alice")
    (alices,) = await _entry_keys(cache_redis.url, "orders.get")
    await invoke(env, "orders.get", order, "bob")
    (bobs,) = set(await _entry_keys(cache_redis.url, "orders.get")) - {alices}
    client = aioredis.from_url(cache_redis.url)
    try:
        sealed = await client.get(alices)
        assert b"o-1001" not in sealed  # encrypted at rest
        await client.set(bobs, sealed, px=60_000)  # alice's entry under bob's key
        await invoke(env, "orders.get", order, "bob")
        assert await env.upstream_calls(GET) == 3  # it did not open: a miss
        await client.set(alices, sealed[:-1] + bytes([sealed[-1] ^ 1]), px=60_000)
        await invoke(env, "orders.get", order, "alice")
        assert await env.upstream_calls(GET) == 4  # altered: a miss
    finally:
        await client.aclose()


async def test_an_output_over_max_bytes_is_not_stored(env: Env) -> None:
    too_large = metrics.cache_stores.value(("orders.small", "too_large"))
    for _ in range(2):
        output(await invoke(env, "orders.small", {"order_id": "o-1001"}))
    assert await env.upstream_calls(GET) == 2
    assert metrics.cache_stores.value(("orders.small", "too_large")) == too_large + 2


async def test_a_capability_keeps_at_most_max_entries(env: Env, cache_redis: Any) -> None:
    evictions = metrics.cache_evictions.value(("orders.get",))
    order = {"order_id": "o-1001"}
    for n in range(51):  # cache.max_entries is 50 in tests/cache/gateway.yaml
        await invoke(env, "orders.get", order, "alice", sub=f"reader-{n}")
    assert len(await _entry_keys(cache_redis.url, "orders.get")) == 50
    assert metrics.cache_evictions.value(("orders.get",)) == evictions + 1
    await invoke(env, "orders.get", order, "alice", sub="reader-0")  # the evicted one
    await invoke(env, "orders.get", order, "alice", sub="reader-50")  # still there
    assert await env.upstream_calls(GET) == 52


async def test_the_root_span_says_hit_or_miss(env: Env) -> None:
    first = await invoke(env, "orders.get", {"order_id": "o-1002"})
    second = await invoke(env, "orders.get", {"order_id": "o-1002"})
    exporter = env.spans  # type: ignore[attr-defined]
    roots = {
        s.attributes["capgate.execution_id"]: s.attributes
        for s in exporter.get_finished_spans()
        if s.name == "agent.capability_call"
    }
    assert roots[first.execution_id]["capgate.cache"] == "miss"
    assert roots[second.execution_id]["capgate.cache"] == "hit"
    clients = [s for s in exporter.get_finished_spans() if s.name == "agent.procedure_execution"]
    traces = {
        roots_span.context.trace_id
        for roots_span in exporter.get_finished_spans()
        if roots_span.name == "agent.capability_call"
        and roots_span.attributes["capgate.execution_id"] == second.execution_id
    }
    assert not [s for s in clients if s.context.trace_id in traces]  # a hit sends nothing


async def test_mcp_calls_are_cached_per_surface(env: Env) -> None:
    mcp = McpEnv(gw=env.gw, audit=env.audit, orders_address=env.orders_address)
    async with mcp.client("alice") as client:
        for _ in range(2):
            result = await client.call_tool("orders_get", {"order_id": "o-1001"})
            assert not result.is_error
    assert await env.upstream_calls(GET) == 1
    # The agent surface has entries of its own: the upstream is told the surface.
    await invoke(env, "orders.get", {"order_id": "o-1001"}, "alice")
    assert await env.upstream_calls(GET) == 2


async def test_an_idempotent_repeat_replays_the_journal_before_the_cache(env: Env) -> None:
    order = orjson.dumps({"order_id": "o-1001"})
    bearer = [("authorization", f"Bearer {token('alice')}")]
    results = []
    for key in ("k-1", "k-1", "k-2"):
        request = gateway_pb2.InvokeRequest(
            capability_id="orders.get", input_json=order, idempotency_key=key
        )
        results.append(await env.gateway().Invoke(request, metadata=bearer, timeout=10))
    first, repeat, other_key = results
    assert repeat.execution_id == first.execution_id  # the journal's envelope, as stored
    assert other_key.execution_id != first.execution_id and other_key.attempts == 0  # a hit
    assert await env.upstream_calls(GET) == 1
    assert await completed_cache_field(env, other_key) == "hit"


async def test_a_slow_redis_is_a_miss_within_cache_timeout(env: Env, cache_redis: Any) -> None:
    """Redis answers nothing for 1.5 s (CLIENT PAUSE): a lookup gives up after cache.timeout
    (200ms here) and the call runs upstream. Without the bound the warm entry would answer
    once the pause ends, inside the client's 2 s operation timeout: a hit, not a miss."""
    order = {"order_id": "o-1001"}
    await invoke(env, "orders.get", order)
    unavailable = metrics.cache_lookups.value(("orders.get", "unavailable"))
    client = aioredis.from_url(cache_redis.url)
    try:
        await client.execute_command("CLIENT", "PAUSE", 1500, "ALL")
        result = await invoke(env, "orders.get", order)
    finally:
        await client.aclose()
    assert output(result)["order_id"] == "o-1001"
    assert result.attempts == 1
    assert metrics.cache_lookups.value(("orders.get", "unavailable")) == unavailable + 1
    assert await env.upstream_calls(GET) == 2
    await asyncio.sleep(1.6)  # the pause ends; the abandoned commands finish in the background
    await invoke(env, "orders.get", order)
    assert await env.upstream_calls(GET) == 2  # a hit again


async def test_a_changed_mapper_refuses_a_pending_approval(env: Env, config_dir: Path) -> None:
    asked = await invoke(env, "orders.list", {"size": 2}, "carol", customer="c-1")
    assert asked.WhichOneof("outcome") == "approval_required"
    approval = asked.approval_required.approval
    gateway_yaml = config_dir / "gateway.yaml"
    before = gateway_yaml.read_text()
    environ = env.environ  # type: ignore[attr-defined]
    try:
        changed = before.replace("input.size : 20}", "input.size : 5}")
        assert changed != before
        gateway_yaml.write_text(changed)
        await env.gw.reload(load_settings(gateway_yaml, environ=environ))
        await env.admin().DecideApproval(
            admin_pb2.DecideApprovalRequest(
                approval_id=approval.id,
                verdict=admin_pb2.VERDICT_APPROVE,
                input_hash=approval.input_hash,
            ),
            metadata=env.metadata("admin", "bob"),
        )
        bearer = [("authorization", f"Bearer {token('carol', customer='c-1')}")]
        resumed = await env.gateway().Resume(
            gateway_pb2.ResumeRequest(approval_id=approval.id), metadata=bearer
        )
    finally:
        gateway_yaml.write_text(before)
        await env.gw.reload(load_settings(gateway_yaml, environ=environ))
    assert resumed.WhichOneof("outcome") == "failed"
    assert resumed.failed.code == types_pb2.ERROR_CODE_APPROVAL_INPUT_MISMATCH
    assert await env.upstream_calls("procedure:orders.list") == 0


async def test_inputs_equal_once_validated_share_an_entry(env: Env) -> None:
    """The key holds the canonical hash of the validated input, not the caller's bytes: a
    seeded family of spellings of one input (whitespace, escapes) all hit the first entry."""
    rng = random.Random(19)
    bearer = [("authorization", f"Bearer {token('alice')}")]
    spellings = [b'{"order_id":"o-1001"}', b'{"order_id":"o-1\\u0030\\u00301"}']
    for _ in range(8):
        pad = [b" " * rng.randrange(3), b"\n" * rng.randrange(2), b"\t" * rng.randrange(2)]
        rng.shuffle(pad)
        spellings.append(pad[0] + b"{" + pad[1] + b'"order_id"' + pad[2] + b':"o-1001"}')
    for raw in spellings:
        request = gateway_pb2.InvokeRequest(capability_id="orders.get", input_json=raw)
        output(await env.gateway().Invoke(request, metadata=bearer, timeout=10))
    assert await env.upstream_calls(GET) == 1
