"""The inbox's issue 28 pages over plain HTTP, through the real inbox, gateway and Redis:
approve and grant similar calls (and a grant the gateway refuses), the grants list, a grant's
page and its revocation (CSRF like a decision), approve with edits (the diff, the refusals),
quorum progress ("1 of 2 approvals", the distinct roles still needed)."""

from __future__ import annotations

import asyncio
import html
import re
import time

import pytest

from capgate.v1 import types_pb2
from tests.inbox.inboxkit import (
    EDITABLE,
    ESCALATING,
    TWO_PERSON,
    Reply,
    Stack,
    get,
    human_token,
    post_form,
)

pytestmark = pytest.mark.integration
PENDING = types_pb2.APPROVAL_STATUS_PENDING
APPROVED = types_pb2.APPROVAL_STATUS_APPROVED


def bearer(name: str) -> dict[str, str]:
    return {"authorization": f"Bearer {human_token(name)}"}


def csrf_of(reply: Reply) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', reply.body)
    assert match, reply.body[:500]
    return match.group(1)


def text(reply: Reply) -> str:
    """The page as text: tags dropped, entities read, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", reply.body)).split())


def element(reply: Reply, element_id: str) -> str:
    """The text of the element with `element_id` (to the first closing tag of its name)."""
    match = re.search(rf'<(\w+)[^>]*\bid="{element_id}"[^>]*>(.*?)</\1>', reply.body, re.S)
    assert match, f"no #{element_id} in the page"
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", match.group(2))).split())


async def page_of(stack: Stack, path: str, who: str = "bob") -> Reply:
    reply = await get(stack.url + path, **bearer(who))
    assert reply.status == 200, reply.body[:800]
    return reply


async def grant_form(
    stack: Stack, approval: types_pb2.Approval, who: str = "bob", **fields: str
) -> Reply:
    page = await page_of(stack, f"/approvals/{approval.id}", who)
    form = {
        "csrf": csrf_of(page),
        "input_hash": approval.input_hash,
        "expires_in": "1h",
        "max_uses": "3",
        "max_total": "",
        "amount": "",
        "constraint": "input.amount <= 900.0",
        "note": "Small refunds for this customer today.",
    } | fields
    return await post_form(stack.url + f"/approvals/{approval.id}/grant", form, **bearer(who))


# -- grants ------------------------------------------------------------------------------


async def test_approve_and_grant_then_the_grant_is_listed_shown_and_revoked(stack: Stack) -> None:
    approval = await stack.request_refund(820, "o-4101")
    await stack.seen_by_inbox(approval.id)
    page = await page_of(stack, f"/approvals/{approval.id}")
    # The form comes prefilled: 1h, and a constraint bounding the input's number by this call.
    assert 'id="grant-form"' in page.body
    assert 'name="expires_in" value="1h"' in page.body
    assert "input.amount &lt;= 820" in page.body

    done = await grant_form(stack, approval, max_total="2000", amount="input.amount")
    assert done.status == 303, done.body[:1500]
    grant_path = done.headers["location"]
    assert grant_path.startswith("/grants/")
    grant_id = grant_path.removeprefix("/grants/")
    recorded = await stack.approval(approval.id)
    assert recorded.status == APPROVED
    assert (recorded.decided_by.id, recorded.decided_via.id) == ("bob", "capgate-inbox")

    shown = await page_of(stack, grant_path)
    assert element(shown, "grant-status") == "active"
    assert element(shown, "grant-whom") == "alice (test-idp)"
    assert element(shown, "grant-what") == "orders.refund"
    assert element(shown, "grant-constraint") == "input.amount <= 900.0"
    assert element(shown, "grant-uses") == "0 of 3"
    assert element(shown, "grant-total").startswith("0 of 2000")
    assert "bob (test-idp) via capgate-inbox (test-idp)" in element(shown, "grant-created")
    assert approval.id in element(shown, "grant-from")

    # The grant stands in for the next such call of alice's, and the page counts the use.
    used = await stack.invoke("orders.refund", {"order_id": "o-1003", "amount": 850})
    assert used.WhichOneof("outcome") == "completed", used
    assert used.grant_id == grant_id
    counted = await page_of(stack, grant_path)
    assert element(counted, "grant-uses") == "1 of 3"
    assert element(counted, "grant-total").startswith("850 of 2000")

    listed = await page_of(stack, "/grants")
    assert f'data-grant-id="{grant_id}"' in listed.body
    only_others = await page_of(stack, "/grants?capability=orders.cancel")
    assert f'data-grant-id="{grant_id}"' not in only_others.body

    # Revoking: a form without the CSRF token is refused and revokes nothing.
    url = stack.url + f"{grant_path}/revoke"
    refused = await post_form(url, {"note": "x"}, **bearer("bob"))
    assert refused.status == 403
    assert element(await page_of(stack, grant_path), "grant-status") == "active"
    revoked = await post_form(
        url, {"csrf": csrf_of(shown), "note": "Customer closed the case."}, **bearer("bob")
    )
    assert revoked.status == 303, revoked.body[:800]
    after = await page_of(stack, grant_path)
    assert element(after, "grant-status") == "revoked"
    assert "bob (test-idp)" in element(after, "grant-revoked")
    assert 'id="revoke-form"' not in after.body
    assert f'data-grant-id="{grant_id}"' not in (await page_of(stack, "/grants")).body
    assert f'data-grant-id="{grant_id}"' in (await page_of(stack, "/grants?status=revoked")).body
    asked = await stack.invoke("orders.refund", {"order_id": "o-1003", "amount": 850})
    assert asked.WhichOneof("outcome") == "approval_required"  # revoked at once
    # Revoking again: the gateway's refusal, shown as is.
    again = await post_form(url, {"csrf": csrf_of(shown), "note": ""}, **bearer("bob"))
    assert again.status in (403, 409), again.body[:800]
    assert 'id="refusal"' in again.body


async def test_a_grant_the_gateway_refuses_leaves_the_approval_approved_and_says_why(
    stack: Stack,
) -> None:
    approval = await stack.request_refund(830, "o-4102")
    await stack.seen_by_inbox(approval.id)
    done = await grant_form(stack, approval, constraint="input.amount <= ")
    assert done.status == 409, done.body[:1500]
    refusal = element(done, "grant-refusal")
    assert refusal.startswith("The approval is approved; the grant was refused by the gateway")
    assert "INPUT_INVALID" in refusal
    assert re.search(r"\d+:\d+", refusal), refusal  # the position in the expression
    assert (await stack.approval(approval.id)).status == APPROVED


async def test_a_grant_form_the_inbox_cannot_read_decides_nothing(stack: Stack) -> None:
    approval = await stack.request_refund(840, "o-4103")
    await stack.seen_by_inbox(approval.id)
    for fields, problem in (
        ({"expires_in": "soon"}, "expires in: a duration"),
        ({"max_uses": "-1"}, "max uses: a whole number"),
        ({"max_total": "500", "amount": ""}, "max total needs an amount expression"),
    ):
        done = await grant_form(stack, approval, **fields)
        assert done.status == 400, done.body[:800]
        assert problem in element(done, "grant-problem")
    assert (await stack.approval(approval.id)).status == PENDING


async def test_grants_pages_need_a_signed_in_approver_and_unknown_grants_are_not_found(
    stack: Stack,
) -> None:
    anonymous = await get(stack.url + "/grants")
    assert anonymous.status == 303
    assert anonymous.headers["location"].startswith("/login")
    missing = await get(stack.url + "/grants/no-such-grant", **bearer("bob"))
    assert missing.status == 404


# -- approve with edits --------------------------------------------------------------------


async def test_an_edit_shows_its_diff_then_approves_the_edited_input(stack: Stack) -> None:
    approval = await stack.request(EDITABLE, {"order_id": "o-1003", "amount": 950})
    await stack.seen_by_inbox(approval.id)
    page = await page_of(stack, f"/approvals/{approval.id}")
    assert 'id="edit-form"' in page.body
    edited = '{"order_id": "o-1003", "amount": 750, "reason": "partial refund"}'
    form = {"csrf": csrf_of(page), "input_hash": approval.input_hash, "note": "Only 750."}
    url = stack.url + f"/approvals/{approval.id}/edit"
    preview = await post_form(
        url, form | {"edited_input": edited, "action": "preview"}, **bearer("bob")
    )
    assert preview.status == 200, preview.body[:800]
    diff = element(preview, "edit-diff")
    assert "replace /amount 950 750" in diff
    assert 'replace /reason "unspecified" "partial refund"' in diff
    assert (await stack.approval(approval.id)).status == PENDING  # a preview decides nothing

    done = await post_form(
        url, form | {"edited_input": edited, "action": "approve"}, **bearer("bob")
    )
    assert done.status == 303, done.body[:1500]
    recorded = await stack.approval(approval.id)
    assert recorded.status == APPROVED
    assert recorded.edited
    assert recorded.original_input_hash == approval.input_hash
    assert recorded.input_hash != approval.input_hash
    shown = await page_of(stack, f"/approvals/{approval.id}")
    assert element(shown, "edited-by") == "bob (test-idp)"
    patch = element(shown, "edit-patch")
    assert "replace /amount 750" in patch
    assert element(shown, "original-hash") == approval.input_hash
    history = await page_of(stack, "/history")
    row = re.search(rf'data-approval-id="{approval.id}".*?</tr>', history.body, re.S)
    assert row and '<span class="tag edited">edited</span>' in row.group(0)
    resumed = await stack.resume(approval.id)
    assert resumed.WhichOneof("outcome") == "completed", str(resumed.failed)[:600]
    assert resumed.edited


async def test_edits_the_gateway_or_the_inbox_refuses_decide_nothing(stack: Stack) -> None:
    approval = await stack.request(EDITABLE, {"order_id": "o-4202", "amount": 960})
    await stack.seen_by_inbox(approval.id)
    page = await page_of(stack, f"/approvals/{approval.id}")
    form = {"csrf": csrf_of(page), "input_hash": approval.input_hash, "action": "approve"}
    url = stack.url + f"/approvals/{approval.id}/edit"
    bad_json = await post_form(url, form | {"edited_input": '{"amount": 7'}, **bearer("bob"))
    assert bad_json.status == 400
    assert "not JSON" in element(bad_json, "edit-problem")
    assert "line 1, column" in element(bad_json, "edit-problem")
    unchanged = '{"order_id": "o-4202", "amount": 960, "reason": "unspecified"}'
    same = await post_form(url, form | {"edited_input": unchanged}, **bearer("bob"))
    assert same.status == 400
    assert "Nothing was changed" in element(same, "edit-problem")
    # Invalid for the capability's schema: the gateway's refusal, and the typed text is kept.
    invalid = '{"order_id": "o-4202", "amount": -5}'
    refused = await post_form(url, form | {"edited_input": invalid}, **bearer("bob"))
    assert refused.status == 409, refused.body[:800]
    assert "INPUT_INVALID" in element(refused, "refusal")
    assert "&#34;amount&#34;: -5" in refused.body
    assert (await stack.approval(approval.id)).status == PENDING


async def test_a_capability_without_edits_refuses_one_and_the_form_goes_away(
    stack: Stack,
) -> None:
    first = await stack.request("orders.cancel", {"order_id": "o-4203", "reason": "duplicate"})
    await stack.seen_by_inbox(first.id)
    page = await page_of(stack, f"/approvals/{first.id}")
    assert 'id="edit-form"' in page.body  # not known yet: offered
    form = {
        "csrf": csrf_of(page),
        "input_hash": first.input_hash,
        "action": "approve",
        "edited_input": '{"order_id": "o-4204", "reason": "duplicate"}',
    }
    refused = await post_form(stack.url + f"/approvals/{first.id}/edit", form, **bearer("bob"))
    assert refused.status == 403, refused.body[:800]
    assert "cannot be edited" in element(refused, "refusal")
    assert (await stack.approval(first.id)).status == PENDING
    second = await stack.request("orders.cancel", {"order_id": "o-4205", "reason": "late"})
    await stack.seen_by_inbox(second.id)
    assert 'id="edit-form"' not in (await page_of(stack, f"/approvals/{second.id}")).body


# -- quorum ----------------------------------------------------------------------------------


async def test_quorum_progress_after_the_first_of_two_approvals(stack: Stack) -> None:
    approval = await stack.request(TWO_PERSON, {"order_id": "o-4301", "reason": "fraud"})
    await stack.seen_by_inbox(approval.id)
    before = await page_of(stack, f"/approvals/{approval.id}")
    assert element(before, "quorum-progress") == "0 of 2 approvals"
    assert "still needed: one approver each holding admin, manager" in element(
        before, "roles-needed"
    )
    assert 'id="grant-form"' not in before.body  # a grant never stands in for two people
    form = {"csrf": csrf_of(before), "input_hash": approval.input_hash, "verdict": "approve"}
    url = stack.url + f"/approvals/{approval.id}/decide"
    assert (await post_form(url, form, **bearer("bob"))).status == 303
    await stack.seen_by_inbox(approval.id)  # still pending, one vote in
    after = await page_of(stack, f"/approvals/{approval.id}")
    assert element(after, "status") == "pending"
    assert element(after, "quorum-progress") == "1 of 2 approvals"
    assert element(after, "approved-by") == "approved by bob (test-idp)"
    assert "still needed: one approver each holding admin" in element(after, "roles-needed")
    assert "You approved this already" in element(after, "you-approved")
    listed = await page_of(stack, "/")
    row = re.search(rf'data-approval-id="{approval.id}".*?</tr>', listed.body, re.S)
    assert row and "1 of 2 approvals" in row.group(0)
    # Another manager without admin cannot help: the gateway names what is missing.
    carol_page = await page_of(stack, f"/approvals/{approval.id}", "carol")
    carol = await post_form(url, form | {"csrf": csrf_of(carol_page)}, **bearer("carol"))
    assert carol.status == 403
    assert "admin" in element(carol, "refusal")
    # The admin completes it.
    root_page = await page_of(stack, f"/approvals/{approval.id}", "root")
    assert (
        await post_form(url, form | {"csrf": csrf_of(root_page)}, **bearer("root"))
    ).status == 303
    done = await page_of(stack, f"/approvals/{approval.id}")
    assert element(done, "status") == "approved"
    assert element(done, "quorum-progress") == "2 of 2 approvals"


# -- escalation ------------------------------------------------------------------------------


async def escalated_in_inbox(stack: Stack, approval_id: str, within_s: float = 5.0) -> None:
    async with asyncio.timeout(within_s):
        while True:
            found = stack.inbox.inbox.book.get(approval_id)
            if found is not None and found.HasField("escalated_at"):
                return
            await asyncio.sleep(0.02)


async def test_an_escalated_approval_reaches_the_escalation_roles(stack: Stack) -> None:
    approval = await stack.request(ESCALATING, {"order_id": "o-4401", "reason": "stale"})
    await stack.seen_by_inbox(approval.id)
    due = await page_of(stack, f"/approvals/{approval.id}")  # bob: an approver
    assert element(due, "escalation").startswith("escalates")
    assert "from then on admin may decide too" in element(due, "escalation")
    # root holds admin but not approver: not for root yet.
    assert (await get(stack.url + f"/approvals/{approval.id}", **bearer("root"))).status == 404
    store = stack.gw.runtime.approvals
    assert store is not None
    assert await store.escalate_sweep(time.time() + 120) >= 1  # as if a minute had passed
    await escalated_in_inbox(stack, approval.id)
    page = await page_of(stack, f"/approvals/{approval.id}", "root")
    assert element(page, "escalation").startswith("escalated")
    assert 'id="approve"' in page.body
    form = {"csrf": csrf_of(page), "input_hash": approval.input_hash, "verdict": "approve"}
    url = stack.url + f"/approvals/{approval.id}/decide"
    assert (await post_form(url, form, **bearer("root"))).status == 303
    assert (await stack.approval(approval.id)).status == APPROVED
