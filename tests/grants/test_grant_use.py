"""A standing grant on the call path (ADR 0038), through the real gateway, a real Redis and the
example upstream verifying the forwarded actor token.

A covered require-approval call completes as its own actor with the grant's id in the envelope,
in every event from stage 8 on and in the upstream's token; nothing else is lifted: a call
outside the constraint, a deny, a hide, invalid input, a limit, a `grantable: false` rule or
capability, a grant whose creator lacks the required role — each answers as without the grant,
and takes no use. A use whose call never reached the upstream is given back; Check names the
grant without using it; MCP's tools/call is covered the same way; an expired grant covers
nothing and its expiry is audited once.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from capgate.v1 import gateway_pb2, types_pb2
from gateway.model import Actor
from gateway.state.approvals.grants import GrantRecord, GrantStatus, RedisGrantStore
from tests.gateway.harness import Env, terminal_events
from tests.grants.conftest import ALICE, Claims, Clock, new_grant, outcome
from tests.mcp.mcpkit import McpEnv, request, session_headers

pytestmark = pytest.mark.integration

REFUND = {"order_id": "o-1003", "amount": 50, "reason": "damaged"}


def store(env: Env) -> RedisGrantStore:
    grants = env.gw.runtime.grants
    assert isinstance(grants, RedisGrantStore)
    return grants


async def make(env: Env, **fields: Any) -> GrantRecord:
    return await store(env).create(new_grant(env.gw.runtime.wall(), **fields))


async def uses(env: Env, grant: GrantRecord) -> int:
    now = await store(env).get(grant.id)
    assert now is not None
    return now.uses


async def test_a_grant_covers_a_require_approval_call(env: Env, claims: Claims) -> None:
    asked = await env.invoke("pay.refund", REFUND)
    assert outcome(asked) == "approval_required"  # without a grant: a human is asked
    grant = await make(env, constraint='input.amount <= 200.0 && input.reason == "damaged"')
    result = await env.invoke("pay.refund", REFUND)
    assert outcome(result) == "completed", result
    assert result.grant_id == grant.id and not result.approval_id
    assert await uses(env, grant) == 1
    # The upstream served alice, told which grant stood in and who made it.
    (seen,) = claims.seen
    assert seen["sub"] == "alice" and seen["actor_iss"] == "test-idp"
    assert seen["grant_id"] == grant.id and seen["approver"] == "fiona"
    assert "approval_id" not in seen
    events = await env.events_for(result.execution_id)
    names = [e["event"] for e in events]
    assert "capability.approval_requested" not in names
    used = events[names.index("approval.grant_used")]
    assert used["grant_id"] == grant.id and used["uses"] == 1
    assert used["input_hmac"] and used["capability_id"] == "pay.refund"
    after = events[names.index("approval.grant_used") :]
    assert all(e["grant_id"] == grant.id and e["input_hmac"] for e in after)
    (terminal,) = terminal_events(events)
    assert terminal["event"] == "capability.completed" and terminal["grant_id"] == grant.id
    assert "grant_released" not in terminal
    assert "input" not in used and "damaged" not in orjson.dumps(used).decode()  # no input


async def test_a_role_grant_never_covers_its_own_creators_calls(env: Env) -> None:
    """SI-4 for grants: alice holds the approver roles and the role the grant covers; her own
    grant for every `agent` covers nothing of hers (another agent's calls would be covered)."""
    creator = Actor(
        id="alice", kind="user", issuer="test-idp", roles=("agent", "approver", "finance")
    )
    grant = await make(env, actor=None, role="agent", created_by=creator)
    result = await env.invoke("pay.refund", REFUND)
    assert outcome(result) == "approval_required"
    assert not result.grant_id
    assert await uses(env, grant) == 0
    other = await make(env, actor=None, role="agent")  # made by fiona: covers alice
    covered = await env.invoke("pay.refund", REFUND)
    assert outcome(covered) == "completed" and covered.grant_id == other.id


async def test_a_call_outside_the_constraint_still_needs_approval(env: Env) -> None:
    grant = await make(env, constraint="input.amount <= 200.0")
    result = await env.invoke("pay.refund", {**REFUND, "amount": 500})
    assert outcome(result) == "approval_required"
    assert not result.grant_id
    assert await uses(env, grant) == 0


@pytest.mark.parametrize(
    ("order_id", "expected"),
    [("o-denied", "POLICY_DENIED"), ("o-hidden", "CAPABILITY_NOT_FOUND")],
)
async def test_deny_and_hide_win_over_a_grant(env: Env, order_id: str, expected: str) -> None:
    grant = await make(env)
    result = await env.invoke("pay.refund", {**REFUND, "order_id": order_id})
    assert outcome(result) == expected
    assert await uses(env, grant) == 0
    assert await env.upstream_calls("RefundOrder") == 0


async def test_invalid_input_is_still_invalid(env: Env) -> None:
    grant = await make(env)
    result = await env.invoke("pay.refund", {"order_id": "o-1003", "amount": "lots"})
    assert outcome(result) == "INPUT_INVALID"
    assert await uses(env, grant) == 0


async def test_limits_still_refuse(env: Env) -> None:
    grant = await make(env)
    first = await env.invoke("pay.refund", {**REFUND, "amount": 100000})
    assert outcome(first) == "completed" and first.grant_id == grant.id
    over = await env.invoke("pay.refund", REFUND)  # the daily budget of 100000 is spent
    assert outcome(over) == "RATE_LIMITED"
    assert await uses(env, grant) == 1


@pytest.mark.parametrize("capability", ["pay.wire", "pay.purge"])
async def test_a_requirement_that_is_not_grantable_is_never_covered(
    env: Env, capability: str
) -> None:
    """pay.wire: the capability's `approval.grantable: false`; pay.purge: a policy rule's. The
    grants are stored directly, as a creation check (tests/grantadmin) would refuse them."""
    grant = await make(env, capability_id=capability)
    result = await env.invoke(capability, REFUND)
    assert outcome(result) == "approval_required"
    assert await uses(env, grant) == 0


async def test_a_grant_whose_creator_lacks_a_required_role_covers_nothing(env: Env) -> None:
    grant = await make(env, approver_roles=("approver",))  # refunds over 10 need finance
    result = await env.invoke("pay.refund", REFUND)
    assert outcome(result) == "approval_required"
    assert await uses(env, grant) == 0


async def test_role_and_tag_grants_cover_and_the_earliest_expiry_goes_first(env: Env) -> None:
    now = env.gw.runtime.wall()
    later = await make(env, actor=None, role="agent", capability_id="", tag="payments")
    sooner = await make(env, expires_at=now + 600, max_uses=1)
    first = await env.invoke("pay.refund", REFUND)
    second = await env.invoke("pay.refund", REFUND)
    assert (first.grant_id, second.grant_id) == (sooner.id, later.id)
    exhausted = [
        e
        for e in await env.events_for(first.execution_id)
        if e["event"] == "approval.grant_exhausted"
    ]
    assert [(e["grant_id"], e["uses"]) for e in exhausted] == [(sooner.id, 1)]
    assert (await store(env).get(sooner.id)).status == GrantStatus.EXHAUSTED  # type: ignore[union-attr]
    other = await env.invoke("pay.refund", REFUND, actor="bot")  # no agent role
    assert outcome(other) == "approval_required"


async def test_a_use_that_never_reached_the_upstream_is_given_back(env: Env) -> None:
    grant = await make(env, capability_id="pay.remote", max_uses=1)
    for _ in range(2):  # given back each time: the one use is there for the next call
        failed = await env.invoke("pay.remote", REFUND)
        assert outcome(failed) == "UPSTREAM_UNAVAILABLE", failed
        assert failed.failed.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
        assert failed.grant_id == grant.id
        now = await store(env).get(grant.id)
        assert now is not None and now.uses == 0 and now.status == GrantStatus.ACTIVE
        events = await env.events_for(failed.execution_id)
        (terminal,) = terminal_events(events)
        assert terminal["grant_id"] == grant.id and terminal["grant_released"] is True


async def test_check_names_the_grant_without_using_it(env: Env) -> None:
    grant = await make(env, constraint="input.amount <= 200.0", max_uses=1)

    async def check(value: dict[str, Any]) -> gateway_pb2.CheckResponse:
        return await env.gateway().Check(
            gateway_pb2.CheckRequest(capability_id="pay.refund", input_json=orjson.dumps(value)),
            metadata=env.metadata("agents", "alice"),
        )

    covered = await check(REFUND)
    assert covered.decision == types_pb2.DECISION_REQUIRE_APPROVAL
    assert covered.grant_id == grant.id
    assert (await check({**REFUND, "amount": 500})).grant_id == ""
    assert await uses(env, grant) == 0
    assert (await env.invoke("pay.refund", REFUND)).grant_id == grant.id
    assert (await check(REFUND)).grant_id == ""  # no use left


async def test_mcp_tools_call_is_covered_the_same_way(env: Env, claims: Claims) -> None:
    grant = await make(env)
    mcp = McpEnv(gw=env.gw, audit=env.audit, orders_address=env.orders_address)
    mark = await mcp.mark()
    async with mcp.http() as http:
        session = await mcp.initialize(http)
        call = request(2, "tools/call", {"name": "pay_refund", "arguments": REFUND})
        reply = await http.post("/mcp", json=call, headers=session_headers(session))
    assert reply.status_code == 200, reply.text
    assert reply.json()["result"]["isError"] is False, reply.text
    assert await uses(env, grant) == 1
    assert claims.seen[-1]["grant_id"] == grant.id and claims.seen[-1]["surface"] == "mcp"
    (events,) = (await mcp.executions_since(mark)).values()
    (terminal,) = terminal_events(events)
    assert terminal["event"] == "capability.completed" and terminal["grant_id"] == grant.id
    assert any(e["event"] == "approval.grant_used" for e in events)


async def test_an_expired_grant_covers_nothing_and_its_expiry_is_audited_once(
    env: Env, clock: Clock
) -> None:
    grant = await make(env, expires_at=clock() + 60)
    clock.advance(61)
    result = await env.invoke("pay.refund", REFUND)
    assert outcome(result) == "approval_required"
    grants = store(env)
    await grants.expire_sweep(clock())
    await grants.expire_sweep(clock())
    expired = await grants.get(grant.id)
    assert expired is not None and expired.status == GrantStatus.EXPIRED and expired.uses == 0
    await env.gw.runtime.audit.flush()  # type: ignore[attr-defined]
    found = [e for e in env.audit.events if e["event"] == "approval.grant_expired"]
    assert len(found) == 1 and found[0]["grant_id"] == grant.id
    assert found[0]["capability_id"] == "pay.refund"


async def test_a_revoked_grant_covers_nothing_at_once(env: Env) -> None:
    grant = await make(env)
    assert (await env.invoke("pay.refund", REFUND)).grant_id == grant.id
    await store(env).revoke(grant.id, by=ALICE, via=None, note="")
    after = await env.invoke("pay.refund", REFUND)
    assert outcome(after) == "approval_required" and not after.grant_id


async def test_a_keyed_repeat_racing_its_covered_call_takes_no_use(env: Env) -> None:
    """ADRs 0034 and 0038: a client's retry of a keyed call that a grant covers, sent while the
    first is still running, is answered by the journal (IDEMPOTENCY_IN_PROGRESS) before any
    grant is tried: it takes no use, not even one it would give back."""
    grant = await make(env, max_uses=2)
    slow = {**REFUND, "order_id": "slow-900"}
    first = asyncio.ensure_future(env.invoke("pay.refund", slow, idempotency_key="k-race"))
    await asyncio.sleep(0.3)  # the first call is at the upstream, its key claimed
    repeat = await env.invoke("pay.refund", slow, idempotency_key="k-race")
    assert outcome(repeat) == "IDEMPOTENCY_IN_PROGRESS", repeat
    names = [e["event"] for e in await env.events_for(repeat.execution_id)]
    assert "approval.grant_used" not in names, names
    assert await uses(env, grant) == 1  # the first call's use only
    done = await first  # the book has no order "slow-900": the upstream answered NOT_FOUND
    assert outcome(done) == "EXECUTION_FAILED" and done.grant_id == grant.id
