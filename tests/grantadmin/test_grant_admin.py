"""ApprovalAdmin's CreateGrant / ListGrants / GetGrant / RevokeGrant through the real gateway
(tests/grantadmin/gateway.yaml: its admin listener, JWT credentials, a real Redis): every
creation check, who sees and revokes which grant, and the audit events."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from google.protobuf.duration_pb2 import Duration

from capgate.v1 import admin_pb2, types_pb2
from tests.gateway.harness import Env
from tests.grantadmin.conftest import admin_md

pytestmark = pytest.mark.integration

ISSUER = "test-idp"
FINANCE = admin_md("fiona", "approver", "finance")
FINANCE_2 = admin_md("frank", "approver", "finance")
APPROVER = admin_md("bob", "approver")
OPS = admin_md("olga", "approver", "ops")
AUDITOR = admin_md("audrey", "auditor")
INBOX = admin_md("inbox")
ALICE = types_pb2.Actor(id="alice", issuer=ISSUER)
HOUR = Duration(seconds=3600)


def _code(name: str) -> int:
    return types_pb2.ErrorCode.Value(f"ERROR_CODE_{name}")


async def _create(env: Env, md: Any = FINANCE, **fields: Any) -> admin_pb2.GrantResponse:
    fields.setdefault("expires_in", HOUR)
    if "role" not in fields and "actor" not in fields and "from_approval_id" not in fields:
        fields["actor"] = ALICE
    if "tag" not in fields and "from_approval_id" not in fields:
        fields.setdefault("capability_id", "pay.refund")
    request = admin_pb2.CreateGrantRequest(**fields)
    reply: admin_pb2.GrantResponse = await env.admin().CreateGrant(request, metadata=md)
    return reply


async def _refused(env: Env, code: str, path: str = "", md: Any = FINANCE, **fields: Any) -> str:
    """The refusal's message, after checking its code and (for INPUT_INVALID) its issue path."""
    reply = await _create(env, md, **fields)
    assert reply.HasField("error"), reply
    assert reply.error.code == _code(code), reply.error
    if path:
        assert [i.path for i in reply.error.issues] == [path]
        return reply.error.issues[0].message
    return reply.error.message


async def _events(env: Env, name: str) -> list[dict[str, Any]]:
    await env.gw.runtime.audit.flush()  # type: ignore[attr-defined]
    return [e for e in env.audit.events if e.get("event") == name]


async def _list(env: Env, md: Any, **fields: Any) -> list[str]:
    reply = await env.admin().ListGrants(admin_pb2.ListGrantsRequest(**fields), metadata=md)
    assert not reply.HasField("error"), reply.error
    return [g.id for g in reply.grants]


async def test_a_grant_is_created_shown_and_recorded(env: Env) -> None:
    reply = await _create(
        env,
        constraint='input.currency == "EUR"',
        amount="input.amount",
        max_total=500,
        max_uses=3,
        note="month-end refunds",
    )
    assert not reply.HasField("error"), reply.error
    grant = reply.grant
    assert grant.id.startswith("grt_")
    assert grant.status == types_pb2.GRANT_STATUS_ACTIVE
    assert (grant.actor.id, grant.actor.issuer) == ("alice", ISSUER)
    assert (grant.capability_id, grant.constraint, grant.amount) == (
        "pay.refund",
        'input.currency == "EUR"',
        "input.amount",
    )
    assert (grant.max_total, grant.max_uses, grant.uses, grant.total) == (500, 3, 0, 0)
    assert grant.created_by.id == "fiona"
    assert list(grant.approver_roles) == ["finance"]  # what covering needs, not all fiona's
    lifetime = grant.expires_at.ToSeconds() - grant.created_at.ToSeconds()
    assert 3599 <= lifetime <= 3600
    got = await env.admin().GetGrant(admin_pb2.GetGrantRequest(grant_id=grant.id), metadata=FINANCE)
    assert got.grant == grant
    assert await _list(env, FINANCE) == [grant.id]
    (event,) = await _events(env, "approval.grant_created")
    assert event["grant_id"] == grant.id
    assert event["capability_id"] == "pay.refund"
    assert (event["actor_id"], event["actor_issuer"]) == ("fiona", ISSUER)
    assert "EUR" not in str(event) and "month-end" not in str(event)


async def test_an_expression_that_does_not_compile_is_refused_at_its_position(env: Env) -> None:
    message = await _refused(env, "INPUT_INVALID", "constraint", constraint="input.amount >")
    assert message.startswith("constraint 1:15: Syntax error")
    message = await _refused(
        env, "INPUT_INVALID", "constraint", constraint='input.currency == "EUR" &&\n input.iban'
    )
    assert message.startswith("constraint 2:7: ") and "input.iban" in message
    message = await _refused(env, "INPUT_INVALID", "amount", amount="input.fee * 2.0", max_total=10)
    assert message.startswith("amount 1:6: ") and "input.fee" in message
    message = await _refused(env, "INPUT_INVALID", "amount", amount="input.order_id")
    assert "amount must be" in message


async def test_a_tag_grant_is_checked_against_every_capability_carrying_it(env: Env) -> None:
    message = await _refused(
        env, "INPUT_INVALID", "constraint", tag="payments", constraint='input.currency == "EUR"'
    )
    assert "pay.credit" in message  # pay.refund has a currency, pay.credit has not
    reply = await _create(env, tag="payments", constraint="input.amount <= 100.0")
    assert not reply.HasField("error"), reply.error
    assert reply.grant.tag == "payments"


async def test_exactly_one_whom_and_one_what(env: Env) -> None:
    await _refused(env, "INPUT_INVALID", "actor", actor=ALICE, role="agent")
    await _refused(env, "INPUT_INVALID", "actor", actor=types_pb2.Actor(id="alice"))
    request = admin_pb2.CreateGrantRequest(capability_id="pay.refund", expires_in=HOUR)
    reply = await env.admin().CreateGrant(request, metadata=FINANCE)  # no whom at all
    assert [i.path for i in reply.error.issues] == ["actor"]
    await _refused(env, "INPUT_INVALID", "capability_id", capability_id="pay.refund", tag="x")
    request = admin_pb2.CreateGrantRequest(role="agent", expires_in=HOUR)
    reply = await env.admin().CreateGrant(request, metadata=FINANCE)  # no what at all
    assert [i.path for i in reply.error.issues] == ["capability_id"]
    reply = await _create(env, role="agent")
    assert not reply.HasField("error") and reply.grant.role == "agent"


async def test_unknown_capability_or_tag(env: Env) -> None:
    await _refused(env, "INPUT_INVALID", "capability_id", capability_id="pay.nothing")
    await _refused(env, "INPUT_INVALID", "tag", tag="no-capability-has-it")


async def test_expires_in_is_required_positive_and_bounded(env: Env) -> None:
    request = admin_pb2.CreateGrantRequest(actor=ALICE, capability_id="pay.refund")
    reply = await env.admin().CreateGrant(request, metadata=FINANCE)
    assert [i.path for i in reply.error.issues] == ["expires_in"]
    await _refused(env, "INPUT_INVALID", "expires_in", expires_in=Duration(seconds=0))
    await _refused(env, "INPUT_INVALID", "expires_in", expires_in=Duration(seconds=-5))
    message = await _refused(
        env, "INPUT_INVALID", "expires_in", expires_in=Duration(seconds=2 * 3600 + 1)
    )
    assert "at most 7200s" in message
    reply = await _create(env, expires_in=Duration(seconds=2 * 3600))
    assert not reply.HasField("error"), reply.error


async def test_max_total_needs_an_amount(env: Env) -> None:
    await _refused(env, "INPUT_INVALID", "max_total", max_total=500)
    await _refused(env, "INPUT_INVALID", "max_uses", max_uses=-1)


async def test_the_creator_must_hold_the_approver_roles(env: Env) -> None:
    # pay.refund's approvals need finance; ops.restart's policy asks ops (and the capability
    # names no role, so the default approver role too).
    message = await _refused(env, "FORBIDDEN", md=APPROVER)
    assert "finance" in message
    message = await _refused(env, "FORBIDDEN", md=FINANCE, capability_id="ops.restart")
    assert "ops" in message
    reply = await _create(env, OPS, capability_id="ops.restart")
    assert not reply.HasField("error"), reply.error
    # A tag grant needs the roles of every capability carrying the tag.
    await _refused(env, "FORBIDDEN", md=APPROVER, tag="payments")
    created = await _events(env, "approval.grant_created")
    assert [e["actor_id"] for e in created] == ["olga"]  # nothing refused was recorded


async def test_what_must_be_approved_call_by_call_is_not_grantable(env: Env) -> None:
    message = await _refused(env, "INPUT_INVALID", "capability_id", capability_id="pay.wire")
    assert message.startswith("not grantable: ") and "grantable: false" in message
    message = await _refused(env, "INPUT_INVALID", "tag", tag="wires")
    assert message.startswith("not grantable: ")
    # ops.purge: its only approval comes from a policy that says grantable: false.
    message = await _refused(
        env, "INPUT_INVALID", "capability_id", md=OPS, capability_id="ops.purge"
    )
    assert message.startswith("not grantable: ") and "purge" in message


async def test_a_capability_with_an_inline_approver_is_not_grantable(env: Env) -> None:
    message = await _refused(env, "INPUT_INVALID", "capability_id", capability_id="pay.inline")
    assert message.startswith("not grantable: ") and "inline approver" in message
    message = await _refused(env, "INPUT_INVALID", "tag", tag="inline")
    assert message.startswith("not grantable: ")


async def test_from_an_approval_that_needs_more_than_one_approver_is_not_grantable(
    env: Env,
) -> None:
    result = await env.invoke("pay.pair", {"order_id": "o-1", "amount": 40})
    assert result.WhichOneof("outcome") == "approval_required", result
    approval_id = result.approval_required.approval.id
    message = await _refused(env, "INPUT_INVALID", "from_approval_id", from_approval_id=approval_id)
    assert message == "not grantable: needs more than one approver"


async def test_a_grant_never_covers_its_creator(env: Env) -> None:
    fiona = types_pb2.Actor(id="fiona", issuer=ISSUER)
    await _refused(env, "APPROVAL_SELF_APPROVAL", actor=fiona)


async def test_an_anonymous_creator_is_forbidden(env: Env) -> None:
    nobody = types_pb2.Actor(id="anonymous", issuer="capgate", kind="anonymous")
    await _refused(env, "FORBIDDEN", md=INBOX, on_behalf_of=nobody)


async def test_on_behalf_of_only_from_the_allow_listed_inbox(env: Env) -> None:
    fiona = types_pb2.Actor(id="fiona", issuer=ISSUER, roles=["approver", "finance"])
    await _refused(env, "FORBIDDEN", md=FINANCE_2, on_behalf_of=fiona)
    reply = await _create(env, INBOX, on_behalf_of=fiona)
    assert not reply.HasField("error"), reply.error
    assert (reply.grant.created_by.id, reply.grant.created_via.id) == ("fiona", "inbox")
    (event,) = await _events(env, "approval.grant_created")
    assert (event["actor_id"], event["via_id"]) == ("fiona", "inbox")


async def _pending_approval(env: Env) -> str:
    result = await env.invoke("pay.refund", {"order_id": "o-1", "amount": 40, "currency": "EUR"})
    assert result.WhichOneof("outcome") == "approval_required", result
    return str(result.approval_required.approval.id)


async def test_from_an_approval_whom_and_what_default_to_its_request(env: Env) -> None:
    approval_id = await _pending_approval(env)
    reply = await _create(
        env,
        from_approval_id=approval_id,
        amount="input.amount",
        max_total=500,
        constraint='input.currency == "EUR"',
    )
    assert not reply.HasField("error"), reply.error
    grant = reply.grant
    assert (grant.actor.id, grant.actor.issuer, grant.capability_id) == (
        "alice",
        ISSUER,
        "pay.refund",
    )
    assert grant.from_approval_id == approval_id
    (event,) = await _events(env, "approval.grant_created")
    assert event["approval_id"] == approval_id
    # Whom and what given explicitly win over the approval's.
    reply = await _create(env, from_approval_id=approval_id, role="agent", tag="payments")
    assert (reply.grant.role, reply.grant.tag) == ("agent", "payments")


async def test_from_an_approval_only_its_approvers_and_only_while_open(env: Env) -> None:
    approval_id = await _pending_approval(env)
    await _refused(env, "FORBIDDEN", md=OPS, from_approval_id=approval_id)
    await _refused(env, "APPROVAL_NOT_FOUND", from_approval_id="no-such-approval")
    decided = await env.admin().DecideApproval(
        admin_pb2.DecideApprovalRequest(approval_id=approval_id, verdict=admin_pb2.VERDICT_REJECT),
        metadata=FINANCE_2,
    )
    assert not decided.HasField("error"), decided.error
    message = await _refused(env, "INPUT_INVALID", "from_approval_id", from_approval_id=approval_id)
    assert "rejected" in message


async def test_who_sees_which_grant(env: Env) -> None:
    finance = (await _create(env)).grant.id
    ops = (await _create(env, OPS, capability_id="ops.restart")).grant.id
    assert set(await _list(env, FINANCE)) == {finance}
    assert set(await _list(env, FINANCE_2)) == {finance}  # holds the creator's roles
    assert set(await _list(env, OPS)) == {ops}
    assert await _list(env, APPROVER) == []
    assert set(await _list(env, AUDITOR)) == {finance, ops}
    assert set(await _list(env, INBOX)) == {finance, ops}
    assert await _list(env, AUDITOR, capability_id="ops.restart") == [ops]
    assert await _list(env, AUDITOR, actor_id="nobody") == []
    hidden = await env.admin().GetGrant(admin_pb2.GetGrantRequest(grant_id=finance), metadata=OPS)
    assert hidden.error.code == _code("APPROVAL_NOT_FOUND")


async def test_revocation(env: Env) -> None:
    grant = (await _create(env)).grant

    async def revoke(md: Any, **fields: Any) -> admin_pb2.GrantResponse:
        request = admin_pb2.RevokeGrantRequest(grant_id=grant.id, **fields)
        reply: admin_pb2.GrantResponse = await env.admin().RevokeGrant(request, metadata=md)
        return reply

    assert (await revoke(OPS)).error.code == _code("APPROVAL_NOT_FOUND")  # does not see it
    assert (await revoke(AUDITOR)).error.code == _code("FORBIDDEN")  # sees it, only reads
    reply = await revoke(FINANCE_2, note="no longer needed")  # another finance approver
    assert not reply.HasField("error"), reply.error
    assert reply.grant.status == types_pb2.GRANT_STATUS_REVOKED
    assert reply.grant.revoked_by.id == "frank"
    assert (await revoke(FINANCE)).error.code == _code("APPROVAL_ALREADY_DECIDED")
    (event,) = await _events(env, "approval.grant_revoked")
    assert (event["grant_id"], event["actor_id"]) == (grant.id, "frank")
    assert "no longer" not in str(event)
    assert await _list(env, FINANCE) == []  # ACTIVE by default
    revoked = [types_pb2.GRANT_STATUS_REVOKED]
    assert await _list(env, FINANCE, statuses=revoked) == [grant.id]


async def test_live_grants_are_capped(env: Env) -> None:
    made = await asyncio.gather(*(_create(env) for _ in range(6)))
    assert not any(r.HasField("error") for r in made)
    await _refused(env, "APPROVAL_LIMIT_EXCEEDED")


async def test_what_is_stored_is_bounded(env: Env) -> None:
    long = "true && " * 600 + "true"  # > 4096 characters
    message = await _refused(env, "INPUT_INVALID", "constraint", constraint=long)
    assert message == "at most 4096 characters"
    await _refused(env, "INPUT_INVALID", "note", note="n" * 1001)
