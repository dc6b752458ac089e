"""The inbox end to end in a real headless Chromium: a request made through the gateway shows
up live, is approved or rejected in the page and the requester's Resume follows; ApprovalAdmin's
refusals reach the approver; hostile inputs render inert; a form without its CSRF token is
refused; a grant made from an approval is listed and revoked; an edit shows its diff; a
two-person approval shows its progress. Also saves docs/img/inbox.png, the screenshot the
README shows."""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import duration_pb2
from selenium.webdriver.remote.webdriver import WebDriver

from capgate.v1 import admin_pb2, admin_pb2_grpc, types_pb2
from gateway.inbox.server import start_inbox
from gateway.process.serve import start
from tests.gateway.harness import token
from tests.inbox.browserkit import Browser, ForeignPage, chromium
from tests.inbox.inboxkit import (
    EDITABLE,
    TWO_PERSON,
    Stack,
    gateway_settings,
    human_token,
    inbox_settings,
)

pytestmark = pytest.mark.e2e
# The README's screenshot is refreshed only on request (UPDATE_SCREENSHOT=1), so that a test
# run leaves the work tree clean; otherwise the screenshot goes to a temporary file.
_README_SHOT = Path(__file__).resolve().parents[2] / "docs" / "img" / "inbox.png"
SCREENSHOT = (
    _README_SHOT
    if os.environ.get("UPDATE_SCREENSHOT") == "1"
    else Path(tempfile.gettempdir()) / "capgate-inbox.png"
)
PENDING = types_pb2.APPROVAL_STATUS_PENDING
APPROVED = types_pb2.APPROVAL_STATUS_APPROVED
# docs/inbox.md's screenshots, refreshed the same way (UPDATE_SCREENSHOT=1).
SHOTS = (
    _README_SHOT.parent
    if os.environ.get("UPDATE_SCREENSHOT") == "1"
    else Path(tempfile.gettempdir()) / "capgate-inbox-shots"
)


@pytest.fixture(scope="module")
def driver() -> Iterator[WebDriver]:
    yield from chromium()


@pytest.fixture
def page(driver: WebDriver, stack: Stack) -> Browser:
    return Browser(driver, stack.url)


def code(result: object) -> str:
    err = result.failed  # type: ignore[attr-defined]
    return types_pb2.ErrorCode.Name(err.code).removeprefix("ERROR_CODE_")


async def clear_pending(stack: Stack) -> None:
    """Reject what earlier tests left pending, so the screenshot shows only its own rows."""
    async with await stack._channel("admin") as channel:
        stub = admin_pb2_grpc.ApprovalAdminStub(channel)
        md = [("authorization", f"Bearer {token('root', audience='capgate-admin')}")]
        listed = await stub.ListApprovals(
            admin_pb2.ListApprovalsRequest(page_size=500), metadata=md
        )
        for a in listed.approvals:
            await stub.DecideApproval(
                admin_pb2.DecideApprovalRequest(
                    approval_id=a.id,
                    verdict=admin_pb2.VERDICT_REJECT,
                    input_hash=a.input_hash,
                    note="cleared by the test",
                ),
                metadata=md,
            )


async def grant_from(stack: Stack, approval: types_pb2.Approval, constraint: str) -> str:
    """A standing grant bob makes from `approval` for 8 hours (ApprovalAdmin, not the page)."""
    async with await stack._channel("admin") as channel:
        stub = admin_pb2_grpc.ApprovalAdminStub(channel)
        md = [("authorization", f"Bearer {token('bob', audience='capgate-admin')}")]
        reply = await stub.CreateGrant(
            admin_pb2.CreateGrantRequest(
                from_approval_id=approval.id,
                expires_in=duration_pb2.Duration(seconds=8 * 3600),
                max_uses=20,
                constraint=constraint,
                note="Refunds of this order today.",
            ),
            metadata=md,
        )
    assert not reply.HasField("error"), reply.error
    return str(reply.grant.id)


async def test_the_inbox_lists_pending_approvals_and_saves_the_screenshot(
    page: Browser, stack: Stack
) -> None:
    await clear_pending(stack)
    created = [
        await stack.request_refund(2400, "o-1002", actor="carol"),
        await stack.request(
            "admin.orders.purge",
            {"older_than_days": 90},
            actor="root",
            sub="ops-bot",
            roles=["admin"],
        ),
        await stack.request("orders.cancel", {"order_id": "o-1003", "reason": "duplicate"}),
        await stack.request_refund(800, "o-1001"),
    ]
    for approval in created:
        await stack.seen_by_inbox(approval.id)
    await page.sign_in(human_token("root"), "root")  # admin and manager: sees all four
    await page.open("/")
    for approval in created:
        await page.wait_for(f'tr[data-approval-id="{approval.id}"]')
    assert await page.text("#pending-count") == "4"
    purge = await page.text(f'tr[data-approval-id="{created[1].id}"]')
    assert "admin.orders.purge" in purge
    assert "critical" in purge
    assert "destructive" in purge
    assert "ops-bot (test-idp)" in purge
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    assert await page.do(page.driver.save_screenshot, str(SCREENSHOT))
    assert SCREENSHOT.stat().st_size > 10_000
    # Filters narrow the list to one risk.
    await page.open("/?risk=critical")
    await page.wait_for(f'tr[data-approval-id="{created[1].id}"]')
    assert await page.script("return document.querySelectorAll('#pending tbody tr').length") == 1


async def test_a_new_request_appears_live_is_approved_and_the_requester_resumes(
    page: Browser, stack: Stack
) -> None:
    await page.sign_in(human_token("bob"), "bob")
    await page.open("/")
    approval = await stack.request_refund(900, "o-1001")
    # No reload: the row arrives over server-sent events.
    await page.wait_for(f'tr[data-approval-id="{approval.id}"]')
    await page.click(f'tr[data-approval-id="{approval.id}"] a.open')
    await page.wait_for("#decide")
    table = await page.text("#input-table")
    assert "order_id o-1001" in table
    assert "amount 900" in table
    await page.click("#raw-json summary")  # the raw JSON, one click away
    shown = await page.text("#input")
    assert '"order_id": "o-1001"' in shown
    assert '"amount": 900' in shown
    assert '"reason": "****"' in shown  # the capability's approval_input redaction
    assert await page.text("#input-hash") == approval.input_hash
    await page.type("#note", "Customer sent photos of the damage.")
    await page.click("#approve")
    await page.wait_text("#status", "approved")
    assert "bob (test-idp) via capgate-inbox (test-idp)" in await page.text("#decided")

    recorded = await stack.approval(approval.id)
    assert (recorded.decided_by.issuer, recorded.decided_by.id) == ("test-idp", "bob")
    assert (recorded.decided_via.issuer, recorded.decided_via.id) == ("test-idp", "capgate-inbox")
    assert recorded.decision_note == "Customer sent photos of the damage."
    resumed = await stack.resume(approval.id)
    assert resumed.WhichOneof("outcome") == "completed", resumed


async def test_a_rejection_is_final_for_the_requester(page: Browser, stack: Stack) -> None:
    await page.sign_in(human_token("bob"), "bob")
    approval = await stack.request_refund(1200, "o-1002")
    await stack.seen_by_inbox(approval.id)
    await page.open(f"/approvals/{approval.id}")
    await page.type("#note", "Not covered by the policy.")
    await page.click("#reject")
    await page.wait_text("#status", "rejected")
    await page.open("/history")
    await page.wait_for(f'tr[data-approval-id="{approval.id}"]')
    assert "Not covered by the policy." in await page.text(f'tr[data-approval-id="{approval.id}"]')
    assert code(await stack.resume(approval.id)) == "APPROVAL_REJECTED"


async def test_only_those_who_may_decide_get_the_buttons_and_the_gateway_still_refuses(
    page: Browser, stack: Stack
) -> None:
    # An auditor sees every approval but lacks the manager role the refund requires.
    approval = await stack.request_refund(700, "o-1003")
    await stack.seen_by_inbox(approval.id)
    await page.sign_in(human_token("auditor"), "audrey")
    await page.open(f"/approvals/{approval.id}")
    why = await page.text("#cannot-decide")
    assert "you lack the role manager" in why
    assert await page.script("return document.querySelectorAll('#decide, #approve').length") == 0
    # The page is no control: a hand-made form post is refused by ApprovalAdmin.
    await page.script(
        "const f = document.createElement('form'); f.method = 'post';"
        " f.action = location.pathname + '/decide';"
        " for (const [k, v] of [['verdict', 'approve'], ['input_hash', arguments[0]],"
        "   ['csrf', arguments[1]]]) {"
        "   const i = document.createElement('input'); i.type = 'hidden'; i.name = k;"
        "   i.value = v; f.appendChild(i); }"
        " document.body.appendChild(f); f.submit();",
        approval.input_hash,
        await page.script("return document.querySelector('header input[name=csrf]').value;"),
    )
    await page.wait_text("#refusal", "FORBIDDEN")
    assert (await stack.approval(approval.id)).status == PENDING

    mine = await stack.request_refund(750, "o-1004", actor="carol")
    await stack.seen_by_inbox(mine.id)
    await page.sign_in(human_token("carol"), "carol")
    await page.open(f"/approvals/{mine.id}")
    assert "the gateway refuses self-approval" in await page.text("#cannot-decide")
    assert await page.script("return document.querySelectorAll('#approve').length") == 0
    assert (await stack.approval(mine.id)).status == PENDING


async def test_hostile_input_and_identities_render_as_inert_text(
    page: Browser, stack: Stack
) -> None:
    evil_id = "<img src=x onerror=window.__pwned=1>"
    evil_order = "<script>window.__pwned=2</script><b>bold</b>"
    approval = await stack.request_refund(990, evil_order, sub=evil_id)
    await page.sign_in(human_token("bob"), "bob")
    await page.open("/")
    row = await page.wait_for(f'tr[data-approval-id="{approval.id}"]')
    assert evil_id in await page.do(lambda: row.text)
    await page.open(f"/approvals/{approval.id}")
    await page.wait_for("#input")
    assert evil_order in await page.text("#input-table")
    await page.click("#raw-json summary")
    assert evil_order in await page.text("#input")
    assert evil_id in await page.text("#requester")
    counts = await page.script(
        "return [document.querySelectorAll('main script, main img, main b').length,"
        " typeof window.__pwned];"
    )
    assert counts == [0, "undefined"]


async def test_a_decision_without_the_csrf_token_is_refused(page: Browser, stack: Stack) -> None:
    approval = await stack.request_refund(880, "o-1005")
    await stack.seen_by_inbox(approval.id)
    await page.sign_in(human_token("bob"), "bob")
    await page.open(f"/approvals/{approval.id}")
    await page.script("document.querySelector('#decide input[name=csrf]').remove();")
    await page.click("#approve")
    await page.wait_text("#error", "CSRF")
    assert (await stack.approval(approval.id)).status == PENDING


async def test_a_same_site_page_with_a_leaked_csrf_token_cannot_decide(
    page: Browser, stack: Stack
) -> None:
    """Another port on the same host is the same site: the browser sends the SameSite=Strict
    cookie and `Sec-Fetch-Site: same-site`. The Origin check refuses it anyway."""
    approval = await stack.request_refund(870, "o-1011")
    await stack.seen_by_inbox(approval.id)
    await page.sign_in(human_token("bob"), "bob")
    await page.open(f"/approvals/{approval.id}")
    csrf = await page.script("return document.querySelector('#decide input[name=csrf]').value;")
    action = f"{stack.url}/approvals/{approval.id}/decide"
    evil = (
        f'<form method="post" action="{action}">'
        f'<input type="hidden" name="csrf" value="{csrf}">'
        f'<input type="hidden" name="input_hash" value="{approval.input_hash}">'
        '<button name="verdict" value="approve" id="go">Win a prize</button></form>'
    )
    with ForeignPage(evil) as foreign:
        await page.do(page.driver.get, foreign.url)
        await page.click("#go")
        await page.wait_text("#error", "did not come from this inbox")
    assert (await stack.approval(approval.id)).status == PENDING
    # The inbox's own form, same token, still works.
    await page.open(f"/approvals/{approval.id}")
    await page.click("#approve")
    await page.wait_text("#status", "approved")


async def test_after_sign_out_the_old_session_cookie_is_refused(
    page: Browser, stack: Stack
) -> None:
    await page.sign_in(human_token("bob"), "bob")
    await page.open("/")
    stolen = await page.do(page.driver.get_cookie, "capgate_inbox")
    assert stolen is not None
    await page.click("header form button.link")  # Sign out
    await page.wait_for("#login")
    # Someone kept the cookie (a copied value, another tab restored): it opens nothing now.
    await page.do(
        page.driver.add_cookie,
        {"name": "capgate_inbox", "value": stolen["value"], "path": "/"},
    )
    await page.open("/history")
    await page.wait_for("#login")
    assert "/login" in await page.do(lambda: page.driver.current_url)


async def test_bidi_and_invisible_characters_show_as_escapes_not_as_reordered_text(
    page: Browser, stack: Stack
) -> None:
    account = "Refund to account \u202e9876-5432\u202c"
    approval = await stack.request_refund(640, account, sub="mal\u200blory")
    await stack.seen_by_inbox(approval.id)
    await page.sign_in(human_token("bob"), "bob")
    await page.open("/")
    row = await page.text(f'tr[data-approval-id="{approval.id}"]')
    assert "mal\\u200blory" in row
    assert "\u200b" not in row
    assert "contains invisible characters" in row
    await page.open(f"/approvals/{approval.id}")
    await page.wait_for("#input")
    assert "Refund to account \\u202e9876-5432\\u202c" in await page.text("#input-table")
    await page.click("#raw-json summary")
    shown = await page.text("#input")  # element.text: what Chromium lays out, in order
    assert "Refund to account \\u202e9876-5432\\u202c" in shown
    assert "\u202e" not in shown
    assert "2345-6789" not in shown
    assert "contains invisible characters" in shown
    assert "mal\\u200blory" in await page.text("#requester")
    # The escape is marked: a span named after the character.
    title = await page.script(
        "return document.querySelector('#input .invisible').getAttribute('title');"
    )
    assert title == "U+202E RIGHT-TO-LEFT OVERRIDE"
    # A note with an override reads as typed in the history.
    await page.type("#note", "ok \u2066reversed\u2069")
    await page.click("#reject")
    await page.wait_text("#status", "rejected")
    assert "ok \\u2066reversed\\u2069" in await page.text("#decision-note")


async def test_what_an_approver_needs_to_decide_is_on_the_page(page: Browser, stack: Stack) -> None:
    await clear_pending(stack)
    small = await stack.request_refund(610, "o-2001")
    large = await stack.request_refund(4200, "o-2002")
    bulk = await stack.request(
        "orders.bulk_refund",
        {
            "customer": "c-77",
            "orders": [{"order_id": "o-3001", "amount": 25, "lines": [{"sku": "mug-2"}]}],
            "notify": {"email": True},
        },
        actor="bot",
    )
    for approval in (small, large, bulk):
        await stack.seen_by_inbox(approval.id)
    await page.do(
        page.driver.execute_cdp_cmd, "Emulation.setTimezoneOverride", {"timezoneId": "Asia/Tokyo"}
    )
    await page.sign_in(human_token("bob"), "bob")
    await page.open("/")
    # Rows tell the requests apart by their input's key fields.
    rows = {}
    for approval in (small, large, bulk):
        rows[approval.id] = await page.text(f'tr[data-approval-id="{approval.id}"] .input-summary')
    assert "order_id: o-2001" in rows[small.id].replace("\n", " ")
    assert "amount: 4200" in rows[large.id].replace("\n", " ")
    assert "customer: c-77" in rows[bulk.id].replace("\n", " ")
    assert len(set(rows.values())) == 3

    await page.open(f"/approvals/{bulk.id}")
    await page.wait_for("#input-table")
    assert "an agent: bot-7 (test-idp)" in await page.text("#requester")
    assert "Bulk refunds are reviewed by a manager." in await page.text("#reasons")
    assert await page.text("#policy-message")
    table = await page.text("#input-table")
    assert "customer c-77" in table
    assert "1 item" in table
    assert "o-3001" not in table  # nested values start folded
    await page.click("#input-table details > summary")  # orders: 1 item
    assert "[0]\n3 fields" in await page.text("#input-table")
    await page.click("#input-table details details > summary")  # [0]: 3 fields
    assert "order_id o-3001" in await page.text("#input-table")
    assert await page.text("#input") == ""  # raw JSON: folded, one click away
    await page.click("#raw-json summary")
    assert '"customer": "c-77"' in await page.text("#input")
    # Local time beside UTC, from the static script (the CSP allows no inline script).
    utc = await page.text("#requested time.utc")
    local = await page.text("#requested span.local")
    assert utc.endswith("UTC")
    assert "GMT+9" in local or "JST" in local, local
    assert await page.script("return document.querySelectorAll('main script').length") == 0

    await page.type("#note", "Checked with the customer.")
    await page.click("#approve")
    await page.wait_text("#status", "approved")
    await page.open("/history")
    history = await page.text(f'tr[data-approval-id="{bulk.id}"]')
    assert "approved" in history
    assert "Checked with the customer." in history
    assert bulk.input_hash[:12] in history
    assert "customer: c-77" in history.replace("\n", " ")
    assert "bob (test-idp)" in history


async def test_the_self_approval_warning_follows_the_gateways_setting(
    page: Browser, stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    mine = await stack.request_refund(760, "o-2003", actor="carol")
    await stack.seen_by_inbox(mine.id)
    await page.sign_in(human_token("carol"), "carol")
    await page.open(f"/approvals/{mine.id}")
    assert "refuses self-approval" in await page.text("#cannot-decide")
    assert await page.script("return document.getElementById('approve')") is None
    # A gateway that allows self-approval (approvals.reject_self_approval: false, the same
    # Redis, so the same approvals) says so in every approval: its inbox shows no warning and
    # offers the buttons, although that inbox still carries the deprecated setting saying
    # otherwise, which it only reports.
    base = gateway_settings(stack.gw.settings.upstreams["orders"].address, stack.redis_url)
    gw = await start(
        dataclasses.replace(
            base, approvals=dataclasses.replace(base.approvals, reject_self_approval=False)
        )
    )
    caplog.set_level(logging.WARNING, logger="capgate.inbox")
    running = await start_inbox(
        inbox_settings(gw.ports()["admin"], stack.redis_url, reject_self_approval=True)
    )
    try:
        other = Browser(page.driver, running.url)
        await other.sign_in(human_token("carol"), "carol")
        await other.open(f"/approvals/{mine.id}")
        await other.wait_for("#approve")
        assert "self-approval" not in await other.text("main")
        warnings = [r.getMessage() for r in caplog.records if "reject_self_approval" in r.message]
        assert warnings == [
            "inbox: reject_self_approval is true in the inbox's config but the gateway allows "
            "self-approval; the pages follow the gateway (the inbox setting is deprecated: "
            "remove it)"
        ]
        # And the gateway does let carol decide her own request.
        await other.click("#approve")
        await other.wait_text("#status", "approved")
    finally:
        await running.stop()
        await gw.stop(0.5)


async def test_the_capabilitys_description_and_on_whose_behalf_an_agent_asks(
    page: Browser, stack: Stack
) -> None:
    await clear_pending(stack)
    # An agent's token names the human it acts for in RFC 8693's `act` claim (the agents
    # listener's on_behalf_of_claim: act.sub in tests/gateway/gateway.yaml); the gateway keeps it.
    delegated = await stack.request(
        "orders.bulk_refund",
        {"customer": "c-78", "orders": [{"order_id": "o-3101", "amount": 30}]},
        actor="bot",
        act={"sub": "alice@example.com"},
    )
    plain = await stack.request_refund(640, "o-3102")
    for approval in (delegated, plain):
        await stack.seen_by_inbox(approval.id)
    await page.sign_in(human_token("bob"), "bob")
    await page.open(f"/approvals/{delegated.id}")
    await page.wait_for("#input-table")
    assert (
        await page.text("#capability-description")
        == "Refund several orders of one customer at once."
    )
    requester = await page.text("#requester")
    assert requester.startswith("an agent: bot-7 (test-idp) on behalf of alice@example.com")
    assert await page.text("#on-behalf-of") == "on behalf of alice@example.com"

    await page.open(f"/approvals/{plain.id}")
    await page.wait_for("#requester")
    refund = next(c for c in stack.gw.settings.capabilities if c.id == "orders.refund")
    assert refund.description
    assert await page.text("#capability-description") == refund.description
    assert await page.script("return document.getElementById('on-behalf-of')") is None
    assert "on behalf of" not in await page.text("#requester")


async def test_a_grant_from_an_approval_is_listed_and_revoked(page: Browser, stack: Stack) -> None:
    approval = await stack.request_refund(870, "o-5001")
    await stack.seen_by_inbox(approval.id)
    await page.sign_in(human_token("bob"), "bob")
    await page.open(f"/approvals/{approval.id}")
    await page.click("#grant-box summary")
    # Prefilled: an hour, and a constraint bounding this call's amount.
    assert await page.script("return document.getElementById('grant-expires').value") == "1h"
    constraint = await page.script("return document.getElementById('grant-constraint').value")
    assert constraint == "input.amount <= 870"
    await page.type("#grant-expires", "2h")
    await page.type("#grant-max-uses", "5")
    evil_note = "<img src=x onerror=window.__pwned=3>"
    await page.type("#grant-note", evil_note)
    await page.click("#approve-grant")
    await page.wait_text("#grant-status", "active")
    assert await page.text("#grant-whom") == "alice (test-idp)"
    assert await page.text("#grant-constraint") == "input.amount <= 870"
    assert await page.text("#grant-uses") == "0 of 5"
    assert approval.id in await page.text("#grant-from")
    assert await page.text("#grant-note") == evil_note
    assert await page.script("return typeof window.__pwned") == "undefined"
    grant_id = await page.text("#grant-id")
    assert (await stack.approval(approval.id)).status == APPROVED

    await page.click("#nav-grants")
    await page.wait_for(f'tr[data-grant-id="{grant_id}"]')
    row = await page.text(f'tr[data-grant-id="{grant_id}"]')
    assert "orders.refund" in row
    assert "input.amount <= 870" in row
    await page.click(f'tr[data-grant-id="{grant_id}"] a.open')
    await page.type("#revoke-note", "The customer's case is closed.")
    await page.click("#revoke")
    await page.wait_text("#grant-status", "revoked")
    assert "bob (test-idp)" in await page.text("#grant-revoked")
    assert await page.script("return document.getElementById('revoke')") is None
    await page.open("/grants")
    await page.wait_for("h1")
    gone = f"return document.querySelector('tr[data-grant-id=\"{grant_id}\"]')"
    assert await page.script(gone) is None  # active grants only, by default
    await page.open("/grants?status=revoked")
    await page.wait_for(f'tr[data-grant-id="{grant_id}"]')


async def test_a_grant_the_gateway_refuses_says_so_beside_the_approval(
    page: Browser, stack: Stack
) -> None:
    approval = await stack.request_refund(880, "o-5002")
    await stack.seen_by_inbox(approval.id)
    await page.sign_in(human_token("bob"), "bob")
    await page.open(f"/approvals/{approval.id}")
    await page.click("#grant-box summary")
    await page.type("#grant-constraint", "input.amount <= ")
    await page.click("#approve-grant")
    await page.wait_text("#grant-refusal", "INPUT_INVALID")
    assert "The approval is approved; the grant was refused" in await page.text("#grant-refusal")
    assert await page.text("#status") == "approved"


async def test_an_edit_shows_its_diff_and_approves_the_edited_input(
    page: Browser, stack: Stack
) -> None:
    approval = await stack.request(EDITABLE, {"order_id": "o-1003", "amount": 990})
    await stack.seen_by_inbox(approval.id)
    await page.sign_in(human_token("bob"), "bob")
    await page.open(f"/approvals/{approval.id}")
    await page.click("#edit-box summary")
    shown = await page.script("return JSON.parse(document.getElementById('edited-input').value)")
    assert shown == {"order_id": "o-1003", "amount": 990, "reason": "unspecified"}
    await page.type("#edited-input", '{"order_id": "o-1003", "amount": 640, "reason": "partial"}')
    await page.click("#preview-edit")
    await page.wait_for("#edit-diff")
    diff = await page.text("#edit-diff")
    assert "replace /amount 990 640" in diff
    assert 'replace /reason "unspecified" "partial"' in diff
    assert (await stack.approval(approval.id)).status == PENDING  # a preview decides nothing
    await page.type("#edit-note", "Only part of the order.")
    await page.click("#approve-edited")
    await page.wait_text("#status", "approved")
    assert await page.text("#edited-by") == "bob (test-idp)"
    assert "replace /amount 640" in await page.text("#edit-patch")
    assert await page.text("#original-hash") == approval.input_hash
    recorded = await stack.approval(approval.id)
    assert recorded.edited
    assert recorded.original_input_hash == approval.input_hash


async def test_quorum_progress_after_the_first_of_two_approvals(
    page: Browser, stack: Stack
) -> None:
    approval = await stack.request(TWO_PERSON, {"order_id": "o-5003", "reason": "fraud"})
    await stack.seen_by_inbox(approval.id)
    await page.sign_in(human_token("bob"), "bob")
    await page.open(f"/approvals/{approval.id}")
    assert await page.text("#quorum-progress") == "0 of 2 approvals"
    assert await page.script("return document.getElementById('grant-box')") is None
    await page.click("#approve")
    await page.wait_text("#quorum-progress", "1 of 2 approvals")
    assert await page.text("#status") == "pending"
    assert await page.text("#approved-by") == "approved by bob (test-idp)"
    assert "still needed: one approver each holding admin" in await page.text("#roles-needed")
    assert "You approved this already" in await page.text("#you-approved")
    await page.sign_in(human_token("root"), "root")
    await page.open(f"/approvals/{approval.id}")
    assert await page.text("#quorum-progress") == "1 of 2 approvals"
    await page.click("#approve")
    await page.wait_text("#status", "approved")
    assert await page.text("#quorum-progress") == "2 of 2 approvals"
    assert "bob (test-idp)" in await page.text("#approved-by")
    assert "root (test-idp)" in await page.text("#approved-by")


SIZES = ((390, 844), (1280, 800))


async def fits(page: Browser, width: int, height: int, control: str) -> dict[str, Any]:
    """Lay the current page out at width x height (a phone's viewport when narrow) and measure
    it: nothing wider than the viewport, `control` inside it."""
    await page.do(
        page.driver.execute_cdp_cmd,
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600},
    )
    await page.do(page.driver.refresh)
    await page.wait_for(control)
    found: dict[str, Any] = await page.script(
        "const r = document.querySelector(arguments[0]).getBoundingClientRect();"
        "return {scroll: document.documentElement.scrollWidth, inner: window.innerWidth,"
        " left: r.left, right: r.right, top: r.top, bottom: r.bottom, w: r.width, h: r.height};",
        control,
    )
    return found


async def test_every_page_fits_a_phone_and_a_desktop(page: Browser, stack: Stack) -> None:
    long_id = "o-" + "9" * 60
    approval = await stack.request_refund(990, long_id)
    bulk = await stack.request(
        "orders.bulk_refund",
        {
            "customer": "customer-with-a-rather-long-identifier-0123456789",
            "reason": "x" * 300,
            "orders": [{"order_id": long_id, "amount": 1, "lines": [{"sku": "s" * 80}]}],
        },
        actor="bot",
    )
    await stack.seen_by_inbox(approval.id)
    await stack.seen_by_inbox(bulk.id)
    decided = await stack.request_refund(995, "o-4001")
    await stack.seen_by_inbox(decided.id)
    await page.sign_in(human_token("bob"), "bob")
    await page.open(f"/approvals/{decided.id}")
    await page.type("#note", "n" * 200)
    await page.click("#reject")
    await page.wait_text("#status", "rejected")
    pages = [
        ("/", "header form button.link"),
        ("/history", "header form button.link"),
        (f"/approvals/{bulk.id}", "header form button.link"),
        (f"/approvals/{approval.id}", "#approve"),
        ("/grants", "header form button.link"),
    ]
    try:
        for width, height in SIZES:
            await page.open("/login?next=/")
            await page.do(page.driver.delete_all_cookies)
            measured = await fits(page, width, height, "#sign-in")
            assert measured["scroll"] <= width, ("/login", width, measured)
            assert measured["left"] >= 0 and measured["right"] <= width, ("/login", measured)
            await page.sign_in(human_token("bob"), "bob")
            for path, control in pages:
                await page.open(path)
                measured = await fits(page, width, height, control)
                assert measured["inner"] == width, (path, width, measured)
                wide = await page.script(
                    "return Array.from(document.querySelectorAll('main *'))"
                    ".filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)"
                    ".slice(-3).map(e => e.tagName + '.' + e.className + ': '"
                    " + e.textContent.slice(0, 80));"
                )
                assert measured["scroll"] <= width, (path, width, measured, wide)
                assert measured["w"] > 0 and measured["h"] > 0, (path, width, measured)
                assert measured["left"] >= 0 and measured["right"] <= width, (path, measured)
                assert measured["top"] >= 0, (path, measured)
            await page.open("/")
            sign_out = await fits(page, width, height, "header form button.link")
            assert sign_out["bottom"] <= height, sign_out  # on screen without scrolling
    finally:
        await page.do(page.driver.execute_cdp_cmd, "Emulation.clearDeviceMetricsOverride", {})


async def test_screenshots_of_every_page_on_a_desktop_and_a_phone(
    page: Browser, stack: Stack
) -> None:
    """docs/img/inbox-{desktop,mobile}-{list,detail,history,grants}.png."""
    await clear_pending(stack)
    carols = await stack.request_refund(2400, "o-1002", actor="carol")
    purge = await stack.request(
        "admin.orders.purge", {"older_than_days": 90}, actor="root", sub="ops-bot", roles=["admin"]
    )
    bulk = await stack.request(
        "orders.bulk_refund",
        {
            "customer": "c-77",
            "reason": "Damaged in transit",
            "orders": [
                {"order_id": "o-3001", "amount": 25, "lines": [{"sku": "mug-2", "qty": 1}]},
                {"order_id": "o-3002", "amount": 40, "lines": [{"sku": "pot-1", "qty": 2}]},
            ],
            "notify": {"email": True, "sms": False},
        },
        actor="bot",
        act={"sub": "dana@example.com"},  # the agent acts for dana (shown on the detail page)
    )
    await stack.request("orders.cancel", {"order_id": "o-1003", "reason": "duplicate"})
    rejected = await stack.request_refund(1200, "o-1005")
    for approval in (purge, bulk, rejected):
        await stack.seen_by_inbox(approval.id)
    await grant_from(stack, carols, 'input.amount <= 2500.0 && input.order_id == "o-1002"')
    await page.sign_in(human_token("root"), "root")
    await page.open(f"/approvals/{rejected.id}")
    await page.type("#note", "Outside the refund window.")
    await page.click("#reject")
    await page.wait_text("#status", "rejected")
    SHOTS.mkdir(parents=True, exist_ok=True)
    await page.do(
        page.driver.execute_cdp_cmd,
        "Emulation.setTimezoneOverride",
        {"timezoneId": "Europe/Berlin"},
    )
    views = {"list": "/", "detail": f"/approvals/{bulk.id}", "history": "/history"}
    try:
        for device, (width, height) in zip(("mobile", "desktop"), SIZES, strict=True):
            for name, path in views.items():
                await page.open(path)
                await fits(page, width, height, "main h1")
                if name == "detail":
                    await page.click("#input-table details > summary")
                shot = SHOTS / f"inbox-{device}-{name}.png"
                assert await page.do(page.driver.save_screenshot, str(shot))
                assert shot.stat().st_size > 10_000
        # The grant is bob's (root lacks its approver role, so does not see it).
        await page.sign_in(human_token("bob"), "bob")
        for device, (width, height) in zip(("mobile", "desktop"), SIZES, strict=True):
            await page.open("/grants")
            await fits(page, width, height, "#grants")
            shot = SHOTS / f"inbox-{device}-grants.png"
            assert await page.do(page.driver.save_screenshot, str(shot))
            assert shot.stat().st_size > 10_000
    finally:
        await page.do(page.driver.execute_cdp_cmd, "Emulation.clearDeviceMetricsOverride", {})
