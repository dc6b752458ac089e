"""Inbox parts on their own: CSRF tokens, the inbox's own JWT, the approval
book's merge order, visibility and filters, durations."""

from __future__ import annotations

from pathlib import Path

import pytest

from capgate.v1 import types_pb2
from gateway.config.settings import JwtAuth, JwtKey
from gateway.inbox import views
from gateway.inbox.admin import TokenMinter
from gateway.inbox.book import ApprovalBook
from gateway.inbox.session import CsrfKeys, identity_binding, login_binding
from gateway.inbox.settings import ServiceToken
from gateway.inbox.web import safe_next
from gateway.model import Actor
from gateway.transport.auth.jwt import JwtAuthenticator
from tests.inbox.browserkit import chromium

SECRET = b"s" * 32
BOB = Actor(id="bob", kind="user", issuer="idp", roles=("manager",))


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_csrf_tokens_are_bound_to_their_identity_or_sign_in_nonce() -> None:
    keys = CsrfKeys(SECRET)
    token = keys.token(identity_binding(BOB))
    assert keys.ok(identity_binding(BOB), token)
    carol = Actor(id="carol", kind="user", issuer="idp")
    assert not keys.ok(identity_binding(carol), token)
    assert not keys.ok(identity_binding(BOB), "")
    assert not CsrfKeys(b"t" * 32).ok(identity_binding(BOB), token)
    assert keys.token(login_binding("n")) != keys.token(identity_binding(BOB))
    with pytest.raises(ValueError):
        CsrfKeys(b"short")


def test_the_inbox_mints_a_token_the_admin_listener_accepts_and_reuses_it() -> None:
    clock = Clock(1_700_000_000.0)
    secret = "k" * 40
    minter = TokenMinter(
        ServiceToken(
            issuer="idp",
            subject="capgate-inbox",
            audience="admin",
            kid="hs1",
            secret=secret,
            lifetime_s=300,
        ),
        clock=clock,
    )
    verifier = JwtAuthenticator(
        JwtAuth(keys=(JwtKey("hs1", "HS256", secret),), issuers=("idp",), audience="admin"),
        clock=clock,
    )
    first = minter.bearer()
    actor = verifier.authenticate([("authorization", f"Bearer {first}")], {}, "")
    assert (actor.issuer, actor.id, actor.kind, actor.roles) == (
        "idp",
        "capgate-inbox",
        "service",
        (),
    )
    clock.now += 100
    assert minter.bearer() == first
    clock.now += 100  # past half the lifetime: a fresh token
    assert minter.bearer() != first
    with pytest.raises(ValueError):
        TokenMinter(ServiceToken(issuer="i", subject="s", audience="a", secret="short"))
    with pytest.raises(ValueError):
        TokenMinter(ServiceToken(issuer="i", subject="s", audience="a", alg="ES256"))


def approval(
    status: int, *, roles: tuple[str, ...] = ("manager",), risk: str = "high", decided: int = 0
) -> types_pb2.Approval:
    a = types_pb2.Approval(
        id="a1",
        capability_id="orders.refund",
        status=status,
        risk=risk,  # type: ignore[arg-type]
        approvers=types_pb2.ApproverConstraint(roles=roles),
    )
    if decided:
        a.decided_at.seconds = decided
    return a


def test_the_book_keeps_the_later_lifecycle_state_whatever_the_arrival_order() -> None:
    book = ApprovalBook(client=None, history_limit=10)  # type: ignore[arg-type]
    assert book.merge(approval(types_pb2.APPROVAL_STATUS_APPROVED, decided=5))
    version = book.version
    assert not book.merge(approval(types_pb2.APPROVAL_STATUS_PENDING))  # a stale listing
    assert not book.merge(approval(types_pb2.APPROVAL_STATUS_APPROVED, decided=5))
    assert book.version == version
    assert book.merge(approval(types_pb2.APPROVAL_STATUS_EXECUTED, decided=5))
    assert [a.id for a in book.changed_since(version)] == ["a1"]
    assert book.pending() == []
    assert len(book.history()) == 1


def test_the_book_keeps_only_the_newest_history() -> None:
    book = ApprovalBook(client=None, history_limit=2)  # type: ignore[arg-type]
    for n in range(4):
        a = approval(types_pb2.APPROVAL_STATUS_REJECTED, decided=100 + n)
        a.id = f"a{n}"
        book.merge(a)
    assert [a.id for a in book.history()] == ["a3", "a2"]


def test_visibility_and_filters() -> None:
    refund = approval(types_pb2.APPROVAL_STATUS_PENDING, roles=("manager",), risk="high")
    purge = approval(types_pb2.APPROVAL_STATUS_PENDING, roles=("admin", "manager"), risk="critical")
    assert views.visible(BOB, refund, ["auditor"])
    assert not views.visible(BOB, purge, ["auditor"])
    auditor = Actor(id="a", kind="user", issuer="idp", roles=("auditor",))
    assert views.visible(auditor, purge, ["auditor"])
    only = views.Filters.parse("", "critical")
    assert only.keep(purge)
    assert not only.keep(refund)
    assert views.Filters.parse("x", "<script>").risk == ""


def test_durations_and_return_paths_read_well_and_stay_on_site() -> None:
    assert [views.span(s) for s in (5, 192, 7500, 273600)] == ["5s", "3m 12s", "2h 5m", "3d 4h"]
    assert safe_next("/approvals/a1") == "/approvals/a1"
    for hostile in ("//evil.example", "https://evil.example", "/\\evil", "javascript:x", None):
        assert safe_next(hostile) == "/"


def test_the_input_summary_takes_the_first_scalar_fields_truncated() -> None:
    text = '{"order": {"id": 1}, "a": "x", "b": 2, "c": true, "d": null}'
    assert views.summary(text) == [("a", "x"), ("b", "2"), ("c", "true")]
    long = views.summary('{"k": "' + "y" * 100 + '"}')
    assert len(long[0][1]) == views.SUMMARY_CHARS
    assert long[0][1].endswith("…")
    for other in ("", "[1, 2]", '"text"', "not json", "{" * 10):
        assert views.summary(other) == []


def test_the_input_tree_nests_and_stays_bounded() -> None:
    tree = views.input_tree('{"a": 1, "b": {"c": [true, null, "s"]}}')
    assert [(n.key, n.kind, n.value) for n in tree] == [
        ("a", "number", "1"),
        ("b", "object", "1 field"),
    ]
    (c,) = tree[1].children or ()
    assert (c.key, c.kind, c.value) == ("c", "array", "3 items")
    assert [(n.key, n.kind, n.value) for n in c.children or ()] == [
        ("[0]", "bool", "true"),
        ("[1]", "null", "null"),
        ("[2]", "string", "s"),
    ]
    wide = views.input_tree("[" + ",".join(["1"] * 5000) + "]")
    assert len(wide) == views.MAX_TREE_NODES + 1
    assert (wide[-1].kind, wide[-1].value) == ("more", "4000 more in the raw JSON")
    deep = views.input_tree('{"x": ' * 30 + "1" + "}" * 30)
    node = deep[0]
    depth = 1
    while node.children:
        node, depth = node.children[0], depth + 1
    assert node.kind == "more"
    assert depth == views.MAX_TREE_DEPTH
    assert views.input_tree("7") == [views.Node("(value)", "number", "7")]


def test_who_may_decide_is_said_naming_what_is_missing() -> None:
    approval = types_pb2.Approval(
        approvers=types_pb2.ApproverConstraint(roles=["manager", "finance"]),
        requester=types_pb2.Actor(id="bob", issuer="idp", kind="agent"),
        self_approval_refused=True,  # the gateway's word
    )
    nobody = Actor(id="eve", kind="user", issuer="idp", roles=("manager",))
    assert views.decision_block(approval, nobody) == (
        "You cannot decide this: you lack the role finance."
    )
    bob = Actor(id="bob", kind="user", issuer="idp", roles=("manager", "finance"))
    assert "refuses self-approval" in views.decision_block(approval, bob)
    approval.self_approval_refused = False
    assert views.decision_block(approval, bob) == ""
    assert views.asking(approval.requester) == "an agent"


def test_a_missing_browser_fails_the_browser_test_and_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Outside CI as well: a browser test must never pass by skipping itself.
    monkeypatch.delenv("CI", raising=False)
    missing = chromium(tmp_path / "chromium", tmp_path / "chromedriver")
    with pytest.raises(pytest.fail.Exception) as failed:
        next(missing)
    assert "make browser" in str(failed.value)
    assert "scripts/install_browser.sh" in str(failed.value)
