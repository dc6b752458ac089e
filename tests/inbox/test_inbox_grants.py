"""The inbox's issue 28 pages over plain HTTP, through the real inbox, gateway and Redis:
approve and grant similar calls (and a grant the gateway refuses), the grants list, a grant's
page and its revocation (CSRF like a decision), approve with edits (the diff, the refusals),
quorum progress ("1 of 2 approvals", the distinct roles still needed)."""

from __future__ import annotations

import html
import re

import pytest

from capgate.v1 import types_pb2
from tests.inbox.inboxkit import (
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
