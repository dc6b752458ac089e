"""A standing grant's use, as issue 28's review asked (ADR 0038), through the real gateway, a real
Redis and the example upstream.

A stage-9 deny gives the use back (as budgets are given back); the execution phase sees a grant's
use as `approval` with `grant: true` (an approval: `grant: false`), so a deny about approvers is
not lifted by a grant; a
capability with an inline approver is never covered; MCP names the grant in `_meta`; Check fails
as Invoke does when the grant store cannot answer; `approval.grant_exhausted` is emitted each time
a use exhausts the grant; a tag grant covers a capability tagged later only where its constraint
compiles against that capability's input.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from capgate.v1 import admin_pb2, gateway_pb2, types_pb2
from gateway.errors import CapabilityError, Code
from gateway.state.approvals.grants import GrantRecord, GrantStatus, RedisGrantStore
from tests.gateway.harness import Env, terminal_events, token
from tests.grants.conftest import new_grant, outcome
from tests.mcp.mcpkit import McpEnv, request, session_headers

pytestmark = pytest.mark.integration

REFUND = {"order_id": "o-1003", "amount": 50, "reason": "damaged"}


def store(env: Env) -> RedisGrantStore:
    grants = env.gw.runtime.grants
    assert isinstance(grants, RedisGrantStore)
    return grants


async def make(env: Env, **fields: Any) -> GrantRecord:
    return await store(env).create(new_grant(env.gw.runtime.wall(), **fields))


async def now_of(env: Env, grant: GrantRecord) -> GrantRecord:
    found = await store(env).get(grant.id)
    assert found is not None
    return found


async def test_a_stage_9_deny_gives_the_use_back(env: Env) -> None:
    grant = await make(env, max_uses=1)
    for _ in range(2):  # given back each time: the one use is there for the next call
        denied = await env.invoke("pay.refund", {**REFUND, "order_id": "o-late"})
        assert outcome(denied) == "POLICY_DENIED", denied
        assert denied.failed.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
        assert denied.grant_id == grant.id
        now = await now_of(env, grant)
        assert now.uses == 0 and now.status == GrantStatus.ACTIVE
        (terminal,) = terminal_events(await env.events_for(denied.execution_id))
        assert terminal["grant_id"] == grant.id and terminal["grant_released"] is True
    assert outcome(await env.invoke("pay.refund", REFUND)) == "completed"
    assert (await now_of(env, grant)).status == GrantStatus.EXHAUSTED


async def test_an_execution_deny_about_approvers_is_not_lifted_by_a_grant(env: Env) -> None:
    grant = await make(env)  # made by fiona: finance and approver, no manager
    denied = await env.invoke("pay.refund", {**REFUND, "order_id": "o-manager"})
    assert outcome(denied) == "POLICY_DENIED", denied
    assert denied.grant_id == grant.id
    # A call that needed no approval has none bound: the rule leaves it alone.
    assert outcome(await env.invoke("pay.refund", {**REFUND, "amount": 5})) == "completed"


async def test_an_execution_policy_tells_a_grant_from_an_approval(env: Env) -> None:
    grant = await make(env)
    denied = await env.invoke("pay.refund", {**REFUND, "order_id": "o-nogrant"})
    assert outcome(denied) == "POLICY_DENIED", denied
    assert denied.grant_id == grant.id
    assert (await now_of(env, grant)).uses == 0  # never reached the upstream: given back


async def test_an_approval_binds_grant_false(env: Env) -> None:
    asked = await env.invoke("pay.refund", {**REFUND, "order_id": "o-nogrant"})
    assert outcome(asked) == "approval_required", asked
    approval = asked.approval_required.approval
    approval_id, digest = approval.id, approval.input_hash
    fiona = token("bob", audience="capgate-admin", sub="fiona", roles=["finance", "approver"])
    decided = await env.admin().DecideApproval(
        admin_pb2.DecideApprovalRequest(
            approval_id=approval_id, verdict=admin_pb2.VERDICT_APPROVE, input_hash=digest
        ),
        metadata=[("authorization", f"Bearer {fiona}")],
    )
    assert not decided.HasField("error"), decided.error
    resumed = await env.resume(approval_id)
    # The rule about grants let it through: the upstream ran it (and knows no such order).
    assert outcome(resumed) == "EXECUTION_FAILED", resumed
    assert resumed.failed.execution_state != types_pb2.EXECUTION_STATE_NOT_STARTED


async def test_a_capability_with_an_inline_approver_is_never_covered(env: Env) -> None:
    grant = await make(env, capability_id="pay.inline")
    result = await env.invoke("pay.inline", REFUND)
    assert outcome(result) != "completed", result  # its Approver (unreachable) was asked
    assert result.grant_id == ""
    assert (await now_of(env, grant)).uses == 0


async def test_mcp_names_the_grant_in_meta(env: Env) -> None:
    grant = await make(env)
    mcp = McpEnv(gw=env.gw, audit=env.audit, orders_address=env.orders_address)
    async with mcp.http() as http:
        session = await mcp.initialize(http)
        call = request(2, "tools/call", {"name": "pay_refund", "arguments": REFUND})
        reply = await http.post("/mcp", json=call, headers=session_headers(session))
        assert reply.status_code == 200, reply.text
        result = reply.json()["result"]
        assert result["isError"] is False, reply.text
        assert result["_meta"]["dev.capgate/grantId"] == grant.id
        small = {**REFUND, "amount": 5}  # needs no approval: no grant named
        call = request(3, "tools/call", {"name": "pay_refund", "arguments": small})
        reply = await http.post("/mcp", json=call, headers=session_headers(session))
    assert "dev.capgate/grantId" not in reply.json()["result"]["_meta"], reply.text


async def test_check_fails_as_invoke_when_the_grant_store_cannot_answer(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    await make(env)

    async def unavailable(*_args: Any, **_kwargs: Any) -> Any:
        raise CapabilityError(Code.APPROVAL_UNAVAILABLE, reason="grant store down (test)")

    monkeypatch.setattr(store(env), "candidates", unavailable)
    invoked = await env.invoke("pay.refund", REFUND)
    assert outcome(invoked) == "APPROVAL_UNAVAILABLE", invoked
    checked = await env.gateway().Check(
        gateway_pb2.CheckRequest(capability_id="pay.refund", input_json=orjson.dumps(REFUND)),
        metadata=env.metadata("agents", "alice"),
    )
    assert checked.error.code == types_pb2.ERROR_CODE_APPROVAL_UNAVAILABLE, checked


async def test_grant_exhausted_is_emitted_each_time_a_use_exhausts_it(env: Env) -> None:
    grant = await make(env, max_uses=1)
    gone = await env.invoke("pay.refund", {**REFUND, "order_id": "o-late"})  # taken, given back
    assert outcome(gone) == "POLICY_DENIED"
    done = await env.invoke("pay.refund", REFUND)
    assert outcome(done) == "completed"
    for result in (gone, done):
        events = await env.events_for(result.execution_id)
        (exhausted,) = [e for e in events if e["event"] == "approval.grant_exhausted"]
        assert exhausted["grant_id"] == grant.id


async def test_a_tag_grant_covers_only_where_its_constraint_compiles(env: Env) -> None:
    # A tag grant whose constraint reads a field only some tagged capabilities' inputs have
    # (as after a capability without it is tagged later) covers nothing of the others.
    grant = await make(env, capability_id="", tag="payments", constraint="input.nope == 1")
    result = await env.invoke("pay.refund", REFUND)
    assert outcome(result) == "approval_required", result
    assert (await now_of(env, grant)).uses == 0
