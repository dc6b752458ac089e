"""The inbox's issue 28 parts on their own: quorum progress and the distinct roles still
needed, escalation state and who it lets decide, the diff rows of an edit, the grant form read
into CreateGrant, its prefilled suggestion, grant rows and visibility, and what the inbox
learns of editable capabilities."""

from __future__ import annotations

import time

import pytest
from google.protobuf import timestamp_pb2

from capgate.v1 import types_pb2
from gateway.inbox import grantviews, views
from gateway.inbox.edits import Editability, not_editable
from gateway.inbox.grantviews import GrantFilters, GrantFormError, grant_request, suggestion
from gateway.model import Actor

BOB = Actor(id="bob", kind="user", issuer="idp", roles=("manager",))
ROOT = Actor(id="root", kind="user", issuer="idp", roles=("admin", "manager"))
AUDREY = Actor(id="audrey", kind="user", issuer="idp", roles=("auditor",))
NOW = 1_800_000_000.0


def proto_actor(actor: Actor) -> types_pb2.Actor:
    return types_pb2.Actor(id=actor.id, issuer=actor.issuer, kind=actor.kind, roles=actor.roles)


def two_person(*voters: Actor) -> types_pb2.Approval:
    return types_pb2.Approval(
        id="a-1",
        capability_id="orders.cancel",
        status=types_pb2.APPROVAL_STATUS_PENDING,
        approvers=types_pb2.ApproverConstraint(roles=["manager"]),
        quorum=2,
        distinct_roles=["manager", "admin"],
        approvals_received=len(voters),
        approved_by=[proto_actor(v) for v in voters],
        requester=types_pb2.Actor(id="alice", issuer="idp", kind="user"),
    )


def test_roles_still_needed_count_each_approver_for_one_role() -> None:
    need = views.roles_still_needed
    assert need(["manager", "admin"], []) == ["manager", "admin"]
    # One approver holding both roles covers only one of them.
    assert len(need(["manager", "admin"], [["manager", "admin"]])) == 1
    assert need(["manager", "admin"], [["manager"]]) == ["admin"]
    # The first approver is re-placed so that the second can be counted (augmenting path).
    assert need(["manager", "admin"], [["manager", "admin"], ["manager"]]) == []
    assert need(["finance", "risk"], [["finance"], ["finance"]]) == ["risk"]


def test_quorum_progress_reads_one_of_two_and_names_what_is_missing() -> None:
    one = views.quorum(two_person(BOB), BOB)
    assert one["text"] == "1 of 2 approvals"
    assert one["approved_by"] == ["bob (idp)"]
    assert one["roles_needed"] == ["admin"]
    assert one["mine"] is True
    assert views.quorum(two_person(BOB), ROOT)["mine"] is False
    done = views.quorum(two_person(BOB, ROOT), BOB)
    assert done["text"] == "2 of 2 approvals"
    assert done["roles_needed"] == []
    single = types_pb2.Approval(id="a-2", quorum=1)
    assert views.quorum(single, BOB) == {}
    assert views.quorum(types_pb2.Approval(id="a-3"), BOB) == {}  # older records: quorum 0


def test_escalation_state_and_who_it_lets_decide() -> None:
    approval = types_pb2.Approval(
        id="a-4",
        status=types_pb2.APPROVAL_STATUS_PENDING,
        approvers=types_pb2.ApproverConstraint(roles=["manager"]),
        escalation_roles=["admin"],
        escalate_at=timestamp_pb2.Timestamp(seconds=int(time.time()) + 3600),
        requester=types_pb2.Actor(id="alice", issuer="idp"),
    )
    admin = Actor(id="ada", kind="user", issuer="idp", roles=("admin",))
    due = views.escalation(approval)
    assert due["escalated"] is False
    assert due["roles"] == ["admin"]
    assert due["at"].endswith("UTC")
    assert not views.visible(admin, approval, ())  # not before its escalate_at
    assert "lack the role manager" in views.decision_block(approval, admin)
    # Due and not yet marked by the gateway's sweep: the gateway lets admin decide, so the
    # inbox shows it to admin already (as ListApprovals does).
    approval.escalate_at.CopyFrom(timestamp_pb2.Timestamp(seconds=int(time.time()) - 1))
    assert views.visible(admin, approval, ())
    assert views.decision_block(approval, admin) == ""
    approval.escalated_at.CopyFrom(timestamp_pb2.Timestamp(seconds=int(NOW) + 5))
    assert views.escalation(approval)["escalated"] is True
    assert views.visible(admin, approval, ())
    assert views.decision_block(approval, admin) == ""
    assert views.escalation(types_pb2.Approval(id="a-5")) == {}


def test_diff_rows_show_each_change_with_its_old_value() -> None:
    before = {"order_id": "o-1", "amount": 950, "reason": "x"}
    patch = [
        {"op": "replace", "path": "/amount", "value": 750},
        {"op": "remove", "path": "/reason"},
        {"op": "add", "path": "/note", "value": "<b>hi</b>"},
    ]
    rows = views.changes(patch, before)
    assert [(c.op, c.path, c.before, c.after) for c in rows] == [
        ("replace", "/amount", "950", "750"),
        ("remove", "/reason", '"x"', ""),
        ("add", "/note", "", '"<b>hi</b>"'),
    ]
    edited = types_pb2.Approval(
        edited=True,
        original_input_hash="h0",
        patch_json='[{"op":"replace","path":"/amount","value":750}]',
        edited_by=proto_actor(BOB),
    )
    view = views.edit_view(edited)
    assert view["by"] == "bob (idp)"
    assert [(c.op, c.after) for c in view["changes"]] == [("replace", "750")]
    assert views.edit_view(types_pb2.Approval()) == {}


def test_the_grant_form_becomes_a_create_grant_request_or_a_problem() -> None:
    request = grant_request(
        {
            "expires_in": "1h30m",
            "max_uses": "5",
            "max_total": "500",
            "amount": "input.amount",
            "constraint": " input.amount <= 200.0 ",
            "note": "n",
        },
        "a-9",
    )
    assert request.from_approval_id == "a-9"
    assert request.expires_in.seconds == 5400
    assert (request.max_uses, request.max_total, request.amount) == (5, 500.0, "input.amount")
    assert request.constraint == "input.amount <= 200.0"
    assert not request.HasField("on_behalf_of")  # set by the client, for the signed-in human
    # An amount expression without a max total is not sent (it would count nothing).
    assert grant_request({"expires_in": "1h", "amount": "input.amount"}, "a").amount == ""
    for form, problem in (
        ({}, "expires in"),
        ({"expires_in": "0"}, "expires in: more than 0"),
        ({"expires_in": "tomorrow"}, "expires in"),
        ({"expires_in": "1h", "max_uses": "2.5"}, "max uses"),
        ({"expires_in": "1h", "max_total": "-1", "amount": "input.amount"}, "max total"),
        ({"expires_in": "1h", "max_total": "nan", "amount": "input.amount"}, "max total"),
        ({"expires_in": "1h", "max_total": "10"}, "needs an amount expression"),
    ):
        with pytest.raises(GrantFormError, match=problem):
            grant_request(form, "a")


def test_the_suggested_constraint_bounds_the_inputs_numbers() -> None:
    assert suggestion('{"order_id": "o-1", "amount": 800, "flag": true}') == {
        "constraint": "input.amount <= 800",
        "amount": "input.amount",
    }
    many = suggestion('{"a": 1, "b": 2.5, "c": 3, "d": 4, "not-an-identifier": 5}')
    assert many["constraint"] == "input.a <= 1 && input.b <= 2.5 && input.c <= 3"
    assert suggestion('{"name": "x"}') == {"constraint": "", "amount": ""}
    assert suggestion("not json") == {"constraint": "", "amount": ""}


def grant(**fields: object) -> types_pb2.Grant:
    base: dict[str, object] = {
        "id": "g-1",
        "status": types_pb2.GRANT_STATUS_ACTIVE,
        "actor": types_pb2.Actor(id="alice", issuer="idp"),
        "capability_id": "orders.refund",
        "created_by": proto_actor(BOB),
        "approver_roles": ["manager"],
    }
    return types_pb2.Grant(**(base | fields))  # type: ignore[arg-type]


def test_grant_rows_and_who_sees_and_revokes_them() -> None:
    row = grantviews.row(
        grant(max_uses=3, uses=1, amount="input.amount", max_total=500, total=120.5)
    )
    assert (row["whom"], row["what"], row["status"]) == ("alice (idp)", "orders.refund", "active")
    assert (row["uses"], row["total"]) == ("1 of 3", "120.5 of 500")
    by_role = grantviews.row(grant(actor=None, role="support", capability_id="", tag="billing"))
    assert (by_role["whom"], by_role["what"]) == ("role support", "tag billing")
    assert grantviews.row(grant(uses=4))["uses"] == "4"
    made_by_root = grant(created_by=proto_actor(ROOT), approver_roles=["admin", "manager"])
    assert grantviews.visible(ROOT, made_by_root, ("auditor",))
    assert not grantviews.visible(BOB, made_by_root, ("auditor",))  # lacks admin
    assert grantviews.visible(AUDREY, made_by_root, ("auditor",))
    assert not grantviews.may_revoke(AUDREY, made_by_root)
    assert grantviews.may_revoke(BOB, grant())


def test_grant_filters_default_to_active() -> None:
    assert GrantFilters.parse({}).statuses() == [types_pb2.GRANT_STATUS_ACTIVE]
    assert GrantFilters.parse({"status": "bogus"}).status == "active"
    assert len(GrantFilters.parse({"status": "all"}).statuses()) == 4
    assert GrantFilters.parse({"capability": "x" * 500}).capability == "x" * 200


def test_editability_is_learned_from_refusals_and_edits_and_forgotten() -> None:
    now = [NOW]
    known = Editability(lambda: now[0])
    assert known.offered("orders.cancel")  # unknown: offered
    refusal = {"code": "FORBIDDEN", "message": "This capability's approvals cannot be edited."}
    assert not_editable(refusal)
    assert not not_editable({"code": "FORBIDDEN", "message": "You lack the role manager."})
    known.learn("orders.cancel", editable=False)
    assert not known.offered("orders.cancel")
    now[0] += 301
    assert known.offered("orders.cancel")  # a reload may have changed it
    known.learn("orders.cancel", editable=True)
    assert known.offered("orders.cancel")
