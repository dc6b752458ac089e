"""Approve with edits end to end (docs/approvals.md "Edits", ADR 0040): the real server, the real
Redis, the example upstream and an admin listener. An approver's edit is governed as the
requester's call before anything is stored; Resume runs the edited input and says so."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from capgate.v1 import admin_pb2, gateway_pb2, types_pb2
from gateway.cli.approvals import main as cli
from gateway.state.approvals.records import ApprovalRecord, Status
from tests.gateway.harness import Env, token
from tests.mcp.mcpkit import McpEnv

pytestmark = pytest.mark.integration

REFUND = "/orders.v1.Orders/RefundOrder"
ASKED = {"order_id": "o-1001", "amount": 50.0, "reason": "damaged in transit"}
SHOWN = {**ASKED, "reason": "****"}  # as approvers see it (refund.reviewed masks the reason)


def code(error: types_pb2.CapabilityError) -> str:
    return types_pb2.ErrorCode.Name(error.code).removeprefix("ERROR_CODE_")


def outcome_code(result: gateway_pb2.ExecutionResult) -> str:
    return code(result.failed)


def admin_as(name: str, **claims: Any) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token(name, audience='capgate-admin', **claims)}")]


FINANCE = {"sub": "frank", "roles": ["manager", "finance"]}


async def request(
    env: Env, capability: str = "refund.reviewed", value: Any = None, **fields: Any
) -> types_pb2.Approval:
    result = await env.invoke(capability, ASKED if value is None else value, **fields)
    assert result.WhichOneof("outcome") == "approval_required", result
    return result.approval_required.approval


async def decide(
    env: Env,
    approval_id: str,
    seen: str,
    edited: Any = None,
    *,
    by: list[tuple[str, str]] | None = None,
    verdict: int = admin_pb2.VERDICT_APPROVE,
    raw: bytes | None = None,
) -> admin_pb2.DecideApprovalResponse:
    body = raw if raw is not None else (b"" if edited is None else orjson.dumps(edited))
    reply: admin_pb2.DecideApprovalResponse = await env.admin().DecideApproval(
        admin_pb2.DecideApprovalRequest(
            approval_id=approval_id,
            verdict=verdict,
            input_hash=seen,
            edited_input_json=body,
        ),
        metadata=by or admin_as("bob"),
    )
    return reply


async def stored(env: Env, approval_id: str) -> ApprovalRecord:
    record = await env.gw.runtime.approvals.get(approval_id)
    assert record is not None
    return record


async def assert_untouched(env: Env, approval: types_pb2.Approval) -> None:
    """Nothing was stored as approved: pending, the requester's input and hash, no vote."""
    record = await stored(env, approval.id)
    assert record.status is Status.PENDING
    assert record.input_hash == approval.input_hash
    assert record.input == ASKED
    assert not record.edited and record.original_input_hash == "" and record.votes == ()
    await env.gw.runtime.audit.flush()  # type: ignore[attr-defined]
    decided = {"capability.approval_edited", "capability.approved", "capability.approval_voted"}
    assert not [
        e for e in env.audit.events if e.get("approval_id") == approval.id and e["event"] in decided
    ]


async def test_an_edited_approval_runs_the_edited_input_and_says_so(env: Env) -> None:
    approval = await request(env)
    edited = {**SHOWN, "amount": 40.0}
    reply = await decide(env, approval.id, approval.input_hash, edited)
    assert not reply.HasField("error"), reply.error
    shown = reply.approval
    assert shown.status == types_pb2.APPROVAL_STATUS_APPROVED and shown.edited
    assert shown.original_input_hash == approval.input_hash != shown.input_hash
    assert shown.edited_by.id == "bob"
    patch = [{"op": "replace", "path": "/amount", "value": 40.0}]
    assert orjson.loads(shown.patch_json) == patch
    assert await env.upstream_calls(REFUND) == 0  # deciding executes nothing

    resumed = await env.resume(approval.id)
    assert resumed.WhichOneof("outcome") == "completed", resumed
    assert orjson.loads(resumed.completed.output_json)["amount"] == 40.0  # the upstream's answer
    assert resumed.edited and orjson.loads(resumed.patch_json) == patch
    assert await env.upstream_calls(REFUND) == 1
    again = await env.resume(approval.id)  # the stored envelope, edited marks included
    assert again == resumed and await env.upstream_calls(REFUND) == 1

    # The requester's own view: edited, both hashes and the patch, never the input.
    own = await env.gateway().GetApproval(
        gateway_pb2.GetApprovalRequest(approval_id=approval.id),
        metadata=env.metadata("agents", "alice"),
    )
    assert own.approval.edited and own.approval.original_input_hash == approval.input_hash
    assert orjson.loads(own.approval.patch_json) == patch and not own.approval.input_json


async def test_a_capability_without_editable_refuses_edits(env: Env) -> None:
    approval = await request(env, "refund.fixed")
    reply = await decide(env, approval.id, approval.input_hash, {**SHOWN, "amount": 40.0})
    assert code(reply.error) == "FORBIDDEN"
    assert reply.error.message == "This capability's approvals cannot be edited."
    record = await stored(env, approval.id)
    assert record.status is Status.PENDING and record.input_hash == approval.input_hash


@pytest.mark.parametrize(
    ("edited", "expected", "message"),
    [
        ({**SHOWN, "amount": "forty"}, "INPUT_INVALID", "The input is invalid."),
        ({**SHOWN, "amount": -5.0}, "INPUT_INVALID", "The input is invalid."),
        ({**SHOWN, "amount": 2500.0}, "POLICY_DENIED", "Refunds of 2000 or more are not allowed."),
        ({**SHOWN, "order_id": "o-hidden"}, "CAPABILITY_NOT_FOUND", "Capability not found."),
        ({**SHOWN, "amount": 1500.0}, "RATE_LIMITED", None),  # over the 1000 budget
    ],
    ids=["invalid", "out-of-schema", "denied", "hidden", "over-budget"],
)
async def test_an_edit_refused_as_the_call_would_be_stores_nothing(
    env: Env, edited: Any, expected: str, message: str | None
) -> None:
    approval = await request(env)
    reply = await decide(
        env, approval.id, approval.input_hash, edited, by=admin_as("bob", **FINANCE)
    )
    assert code(reply.error) == expected, reply
    if message is not None:
        assert reply.error.message == message
    if expected == "INPUT_INVALID":
        assert reply.error.issues and all("forty" not in i.message for i in reply.error.issues)
    await assert_untouched(env, approval)
    # The approver may still approve what was asked: the refusal spent nothing.
    plain = await decide(env, approval.id, approval.input_hash)
    assert plain.approval.status == types_pb2.APPROVAL_STATUS_APPROVED and not plain.approval.edited


async def test_a_concealed_edit_answers_exactly_as_a_missing_capability(env: Env) -> None:
    approval = await request(env)
    hidden = await decide(env, approval.id, approval.input_hash, {**SHOWN, "order_id": "o-hidden"})
    check = await env.gateway().Check(
        gateway_pb2.CheckRequest(capability_id="refund.nope", input_json=orjson.dumps(ASKED)),
        metadata=env.metadata("agents", "alice"),
    )
    assert hidden.error.code == check.error.code and hidden.error.message == check.error.message


async def test_malformed_and_rejecting_edits_are_input_invalid(env: Env) -> None:
    approval = await request(env)
    broken = await decide(env, approval.id, approval.input_hash, raw=b'{"amount": ')
    assert code(broken.error) == "INPUT_INVALID"
    rejecting = await decide(
        env, approval.id, "", {**SHOWN, "amount": 1.0}, verdict=admin_pb2.VERDICT_REJECT
    )
    assert code(rejecting.error) == "INPUT_INVALID"
    assert [i.path for i in rejecting.error.issues] == ["edited_input_json"]
    await assert_untouched(env, approval)


async def test_an_edit_needing_roles_the_approver_lacks_is_forbidden(env: Env) -> None:
    approval = await request(env)
    larger = {**SHOWN, "amount": 600.0}  # a policy asks finance from 500
    reply = await decide(env, approval.id, approval.input_hash, larger)
    assert code(reply.error) == "FORBIDDEN"
    assert reply.error.message == "The edited input needs an approval this approver cannot give."
    await assert_untouched(env, approval)
    granted = await decide(
        env, approval.id, approval.input_hash, larger, by=admin_as("bob", **FINANCE)
    )
    assert not granted.HasField("error") and granted.approval.edited
    resumed = await env.resume(approval.id)
    assert orjson.loads(resumed.completed.output_json)["amount"] == 600.0


async def test_who_may_not_decide_learns_nothing_of_the_edit(env: Env) -> None:
    approval = await request(env)
    invalid = {**SHOWN, "amount": "forty"}
    agent = await decide(env, approval.id, approval.input_hash, invalid, by=admin_as("alice"))
    assert code(agent.error) == "FORBIDDEN"  # no manager role: not INPUT_INVALID
    own = await decide(
        env, approval.id, approval.input_hash, invalid, by=admin_as("alice", roles=["manager"])
    )
    assert code(own.error) == "APPROVAL_SELF_APPROVAL"
    unknown = await decide(env, "nope-0000", approval.input_hash, invalid)
    assert code(unknown.error) == "APPROVAL_NOT_FOUND"
    await assert_untouched(env, approval)


async def test_approving_the_input_another_approver_edited_meanwhile_is_a_mismatch(
    env: Env,
) -> None:
    approval = await request(env, "refund.dual")
    edited = await decide(env, approval.id, approval.input_hash, {**SHOWN, "amount": 30.0})
    assert edited.approval.status == types_pb2.APPROVAL_STATUS_PENDING
    assert edited.approval.approvals_received == 1 and edited.approval.edited
    stale = await decide(env, approval.id, approval.input_hash, by=admin_as("carol"))
    assert code(stale.error) == "APPROVAL_INPUT_MISMATCH"
    stale_edit = await decide(
        env, approval.id, approval.input_hash, {**SHOWN, "amount": 20.0}, by=admin_as("carol")
    )
    assert code(stale_edit.error) == "APPROVAL_INPUT_MISMATCH"
    record = await stored(env, approval.id)
    assert record.input["amount"] == 30.0 and len(record.votes) == 1
    second = await decide(env, approval.id, edited.approval.input_hash, by=admin_as("carol"))
    assert second.approval.status == types_pb2.APPROVAL_STATUS_APPROVED
    resumed = await env.resume(approval.id)
    assert orjson.loads(resumed.completed.output_json)["amount"] == 30.0 and resumed.edited


async def test_a_retried_edit_gets_the_record_back(env: Env) -> None:
    approval = await request(env, "refund.dual")
    edited = {**SHOWN, "amount": 30.0}
    first = await decide(env, approval.id, approval.input_hash, edited)
    again = await decide(env, approval.id, approval.input_hash, edited)  # a lost reply's retry
    assert not again.HasField("error") and again.approval.input_hash == first.approval.input_hash
    assert again.approval.approvals_received == 1


async def test_an_edit_of_a_masked_value_is_refused_and_the_shown_mask_is_kept_as_is(
    env: Env,
) -> None:
    """Approvers edit what they see: "****" sent back unchanged keeps the real reason, and a
    changed masked value is INPUT_INVALID naming its path, nothing stored."""
    approval = await request(env)
    secret = "call me at 555-0100"
    refused = await decide(env, approval.id, approval.input_hash, {**SHOWN, "reason": secret})
    assert code(refused.error) == "INPUT_INVALID"
    assert refused.error.message == "An edit cannot change a value hidden from approvers."
    assert [i.path for i in refused.error.issues] == ["/reason"]
    await assert_untouched(env, approval)
    reply = await decide(env, approval.id, approval.input_hash, {**SHOWN, "amount": 40.0})
    assert not reply.HasField("error"), reply.error
    assert (await stored(env, approval.id)).input == {**ASKED, "amount": 40.0}
    assert orjson.loads(reply.approval.patch_json) == [
        {"op": "replace", "path": "/amount", "value": 40.0}
    ]
    resumed = await env.resume(approval.id)
    assert resumed.WhichOneof("outcome") == "completed", resumed


async def test_the_audit_events_of_an_edit_carry_both_hashes_and_no_input(env: Env) -> None:
    approval = await request(env)
    reply = await decide(env, approval.id, approval.input_hash, {**SHOWN, "amount": 41.5})
    new_hash = reply.approval.input_hash
    events = await env.events_for(approval.requesting_execution_id, settle_s=1.0)
    decision = [
        e
        for e in events
        if e.get("approval_id") == approval.id
        and e["event"] in ("capability.approval_edited", "capability.approved")
    ]
    names = [e["event"] for e in decision]
    assert names == ["capability.approval_edited", "capability.approved"], names
    for event in decision:
        assert event["edited"] is True
        assert event["approval_input_hash"] == new_hash
        assert event["original_input_hash"] == approval.input_hash
        text = orjson.dumps(event).decode()
        assert "41.5" not in text and ASKED["reason"] not in text


async def test_the_key_binds_the_edited_input(env: Env) -> None:
    """ADR 0040: a repeat of the original Invoke with the same key, once the edited call ran,
    is IDEMPOTENCY_CONFLICT (the key ran another input); the edited input with it replays."""
    approval = await request(env, idempotency_key="refund-7")
    edited = {**ASKED, "amount": 45.0}
    await decide(env, approval.id, approval.input_hash, {**SHOWN, "amount": 45.0})
    resumed = await env.resume(approval.id)
    assert resumed.WhichOneof("outcome") == "completed" and resumed.edited
    repeat = await env.invoke("refund.reviewed", ASKED, idempotency_key="refund-7")
    assert outcome_code(repeat) == "IDEMPOTENCY_CONFLICT"
    replay = await env.invoke("refund.reviewed", edited, idempotency_key="refund-7")
    assert replay.completed == resumed.completed and replay.edited
    assert await env.upstream_calls(REFUND) == 1


async def test_the_cli_approves_with_an_edited_input(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    approval = await request(env)
    base = ["--admin", f"127.0.0.1:{env.port('admin')}", "--insecure"]
    base += ["--token", token("bob", audience="capgate-admin")]
    edited = orjson.dumps({**SHOWN, "amount": 35.0}).decode()
    argv = [*base, "approve", approval.id, "--hash", approval.input_hash[:12]]
    assert await asyncio.to_thread(cli, [*argv, "--edit-input", "{not json"]) == 2
    assert "{not json" not in capsys.readouterr().err  # the text is not echoed
    assert await asyncio.to_thread(cli, [*argv, "--edit-input", edited]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{approval.id}: approved (edited: ") and '"/amount"' in out
    resumed = await env.resume(approval.id)
    assert orjson.loads(resumed.completed.output_json)["amount"] == 35.0
    assert await asyncio.to_thread(cli, [*base, "show", approval.id]) == 0
    shown = capsys.readouterr().out
    assert f"original input hash: {approval.input_hash}" in shown and "edit (patch):" in shown


async def test_the_mcp_approval_tool_says_the_input_was_edited(env: Env) -> None:
    mcp = McpEnv(gw=env.gw, audit=env.audit, orders_address=env.orders_address)
    async with mcp.client() as client:
        asked = await client.call_tool("refund_reviewed", ASKED)
        assert asked.structured_content is not None, asked
        approval_id = asked.structured_content["approval_id"]
        record = await stored(env, approval_id)
        edited = {**SHOWN, "amount": 33.0}
        reply = await decide(env, approval_id, record.input_hash, edited)
        assert not reply.HasField("error"), reply.error
        status = await client.call_tool(
            "capgate_approval_status", {"approval_id": approval_id, "resume": False}
        )
        resumed = await client.call_tool("capgate_approval_status", {"approval_id": approval_id})
    assert status.structured_content is not None
    assert status.structured_content["edited"] is True
    paths = [op["path"] for op in status.structured_content["patch"]]
    assert paths == ["/amount"]
    assert resumed.is_error is False and resumed.structured_content is not None
    assert resumed.structured_content["amount"] == 33.0  # the output, untouched
    assert resumed.meta is not None and resumed.meta["dev.capgate/edited"] is True
    assert resumed.meta["dev.capgate/patch"] == status.structured_content["patch"]
    texts = [c.text for c in resumed.content]  # type: ignore[union-attr]
    assert any("edited the input" in t for t in texts)
    assert not any(ASKED["reason"] in t for t in [*texts, str(status.structured_content)])
