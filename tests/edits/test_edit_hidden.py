"""Edits against what approvers cannot see, budgets and escalation (docs/approvals.md "Edits",
ADR 0040), through the real server and Redis: an approver edits the input as shown (after
`redact.approval_input`), the hidden values stay as the requester sent them, a change touching
one is refused; no patch names what a rule hides; an edit over a `require-approval` budget the
record does not name is RATE_LIMITED; an edit whose escalation is stricter is FORBIDDEN."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from capgate.v1 import admin_pb2, types_pb2
from gateway.model import Actor
from gateway.state.approvals.store import EditedInput
from gateway.values.canonical import input_hash
from tests.edits.test_edit_flow import admin_as, code, decide, request, stored
from tests.gateway.harness import Env

pytestmark = pytest.mark.integration

PRIVATE = "refund.private"
ASKED = {"order_id": "o-1001", "amount": 50.0, "reason": "wrong size"}


async def shown_input(env: Env, approval_id: str) -> Any:
    """The input exactly as approvers get it (ListApprovals, redacted server-side)."""
    reply = await env.admin().ListApprovals(
        admin_pb2.ListApprovalsRequest(capability_id=PRIVATE), metadata=admin_as("bob")
    )
    [approval] = [a for a in reply.approvals if a.id == approval_id]
    return orjson.loads(approval.input_json)


async def test_an_edit_applies_to_the_real_input_and_keeps_every_hidden_value(env: Env) -> None:
    value = {**ASKED, "items": [{"sku": "a", "card": "4111"}]}
    approval = await request(env, PRIVATE, value)
    shown = await shown_input(env, approval.id)
    assert shown["reason"].startswith("hmac:") and shown["items"][0]["card"] == "****"
    shown["amount"] = 40.0
    shown["items"][0]["sku"] = "b"
    reply = await decide(env, approval.id, approval.input_hash, shown)
    assert not reply.HasField("error"), reply.error
    record = await stored(env, approval.id)
    assert record.input == {**value, "amount": 40.0, "items": [{"sku": "b", "card": "4111"}]}
    assert record.input_hash == input_hash(record.input) == reply.approval.input_hash


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (lambda v: v.update(reason="other words"), "/reason"),  # an hmac'd value
        (lambda v: v.update(accounts={"DE-1": "x"}), "/accounts"),  # a dropped member, re-added
        (lambda v: v["items"][0].update(card="5500"), "/items/0/card"),  # masked under [*]
        (lambda v: v["items"].append({"sku": "c"}), "/items"),  # a parent of hidden values
    ],
)
async def test_an_edit_touching_a_hidden_value_is_refused_naming_its_path(
    env: Env, change: Any, path: str
) -> None:
    value = {**ASKED, "accounts": {"DE-1": "x"}, "items": [{"sku": "a", "card": "4111"}]}
    approval = await request(env, PRIVATE, value)
    shown = await shown_input(env, approval.id)
    assert "accounts" not in shown
    change(shown)
    reply = await decide(env, approval.id, approval.input_hash, shown)
    assert code(reply.error) == "INPUT_INVALID"
    assert reply.error.message == "An edit cannot change a value hidden from approvers."
    assert [i.path for i in reply.error.issues] == [path]
    record = await stored(env, approval.id)
    assert record.input == value and not record.edited and record.votes == ()


async def test_a_patch_never_names_keys_under_a_redacted_path(env: Env) -> None:
    """An edit reaching the store with changes under a dropped member (say by a pre-hook's
    rewrite) shows one `replace` of that member with REDACTED: its keys stay unsaid."""
    value = {**ASKED, "accounts": {"DE-secret-key": "x"}}
    approval = await request(env, PRIVATE, value)
    edited = {**ASKED, "amount": 40.0, "accounts": {"DE-secret-key": "y", "FR-other-key": "z"}}
    store = env.gw.runtime.approvals
    bob = Actor(id="bob", issuer="test-idp", kind="user", roles=("manager",))
    await store.decide(
        approval.id,
        approve=True,
        approver=bob,
        via=None,
        note="",
        input_hash=approval.input_hash,
        edit=EditedInput(input=edited, input_hash=input_hash(edited)),
    )
    reply = await env.admin().ListApprovals(
        admin_pb2.ListApprovalsRequest(
            capability_id=PRIVATE, statuses=[types_pb2.APPROVAL_STATUS_APPROVED]
        ),
        metadata=admin_as("bob"),
    )
    [shown] = [a for a in reply.approvals if a.id == approval.id]
    assert orjson.loads(shown.patch_json) == [
        {"op": "replace", "path": "/amount", "value": 40.0},
        {"op": "replace", "path": "/accounts", "value": "REDACTED"},
    ]
    assert "secret-key" not in shown.patch_json and "other-key" not in shown.patch_json


async def test_an_edit_over_an_approval_budget_the_record_does_not_name_is_rate_limited(
    env: Env,
) -> None:
    """private_budget (100, require-approval): its Resume would be refused, so the edit is."""
    approval = await request(env, PRIVATE, ASKED)
    assert list(approval.reasons) == ["The capability requires approval."]
    shown = await shown_input(env, approval.id)
    reply = await decide(env, approval.id, approval.input_hash, {**shown, "amount": 150.0})
    assert code(reply.error) == "RATE_LIMITED", reply
    record = await stored(env, approval.id)
    assert record.input == ASKED and not record.edited and record.votes == ()
    ok = await decide(env, approval.id, approval.input_hash, {**shown, "amount": 90.0})
    assert not ok.HasField("error"), ok.error
    resumed = await env.resume(approval.id)
    assert resumed.WhichOneof("outcome") == "completed", resumed


async def test_an_edit_whose_escalation_is_stricter_than_the_records_is_forbidden(
    env: Env,
) -> None:
    """The record escalates to a director after an hour (a policy on o-escalate); the edited
    call never escalates, so the record's escalation would let a director decide it."""
    approval = await request(env, PRIVATE, {**ASKED, "order_id": "o-escalate"})
    record = await stored(env, approval.id)
    assert record.escalate_at is not None and "director" in record.escalation_roles
    shown = await shown_input(env, approval.id)
    reply = await decide(env, approval.id, approval.input_hash, {**shown, "order_id": "o-2002"})
    assert code(reply.error) == "FORBIDDEN", reply
    assert reply.error.message == "The edited input needs an approval this approver cannot give."
    assert not (await stored(env, approval.id)).edited
    same = await decide(env, approval.id, approval.input_hash, {**shown, "amount": 45.0})
    assert not same.HasField("error"), same.error  # the same escalation: accepted
