"""The inbox over plain HTTP: security headers, who is signed in (bearer JWT, proxy assertion,
session cookie), CSRF on every state change, refusals from ApprovalAdmin, live-update scoping."""

from __future__ import annotations

import asyncio
import http.client
import re
import time
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest

from capgate.v1 import types_pb2
from gateway.inbox.app import Inbox
from gateway.inbox.server import start_inbox
from gateway.inbox.web import CSP
from tests.inbox.inboxkit import (
    Reply,
    Stack,
    get,
    human_token,
    inbox_settings,
    post_form,
    proxy_assertion,
)

pytestmark = pytest.mark.integration
PENDING = types_pb2.APPROVAL_STATUS_PENDING


def bearer(name: str) -> dict[str, str]:
    return {"authorization": f"Bearer {human_token(name)}"}


def csrf_of(reply: Reply) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', reply.body)
    assert match, reply.body[:500]
    return match.group(1)


def cookie(reply: Reply, name: str) -> str:
    match = re.search(rf"{name}=([^;]+)", reply.headers.get("set-cookie", ""))
    assert match, reply.headers
    return match.group(1)


async def sign_in(stack: Stack, name: str) -> str:
    """A session cookie header value for `name`, through the sign-in form."""
    return await sign_in_at(stack.url, name)


async def sign_in_at(url: str, name: str, lifetime: int = 600) -> str:
    form = await get(url + "/login")
    nonce = cookie(form, "capgate_inbox_login")
    done = await post_form(
        url + "/login",
        {"csrf": csrf_of(form), "token": human_token(name, lifetime=lifetime), "next": "/"},
        cookie=f"capgate_inbox_login={nonce}",
    )
    assert done.status == 303, done.body
    return f"capgate_inbox={cookie(done, 'capgate_inbox')}"


async def test_every_response_carries_the_security_headers(stack: Stack) -> None:
    replies = [
        await get(stack.url + "/login"),
        await get(stack.url + "/", **bearer("bob")),
        await get(stack.url + "/static/inbox.js"),
        await get(stack.url + "/nope"),
    ]
    for reply in replies:
        assert reply.headers["content-security-policy"] == CSP
        assert reply.headers["x-content-type-options"] == "nosniff"
        assert reply.headers["x-frame-options"] == "DENY"
        assert reply.headers["cache-control"] == "no-store"
    assert "unsafe-inline" not in CSP
    assert "script-src 'self'" in CSP
    assert "frame-ancestors 'none'" in CSP
    assert replies[2].headers["content-type"].startswith("text/javascript")
    assert "<script>" not in replies[1].body.replace('<script src="/static/inbox.js" defer>', "")


async def test_pages_need_a_signed_in_approver(stack: Stack) -> None:
    anonymous = await get(stack.url + "/approvals/abc")
    assert anonymous.status == 303
    assert anonymous.headers["location"] == "/login?next=/approvals/abc"
    assert (await get(stack.url + "/events")).status == 401
    # A token for the gateway's agent listener has another audience: not an inbox credential.
    other = await get(
        stack.url + "/", authorization=f"Bearer {human_token('bob', audience='capgate')}"
    )
    assert other.status == 303
    forged = human_token("bob")[:-4] + "AAAA"
    assert (await get(stack.url + "/", authorization=f"Bearer {forged}")).status == 303
    assert 'id="me">bob<' in (await get(stack.url + "/", **bearer("bob"))).body


async def test_a_proxy_assertion_signs_in_and_a_forged_or_stale_one_does_not(
    stack: Stack,
) -> None:
    good = await get(stack.url + "/", x_capgate_identity=proxy_assertion("dana", ["manager"]))
    assert good.status == 200
    assert 'id="me">dana<' in good.body
    now = int(time.time())
    stale = proxy_assertion("dana", ["manager"], iat=now - 400, exp=now - 100)
    too_long = proxy_assertion("dana", ["manager"], lifetime=3600)
    wrong_key = human_token("bob", iss="auth-proxy")
    for bad in (stale, too_long, wrong_key):
        assert (await get(stack.url + "/", x_capgate_identity=bad)).status == 303


async def test_sign_in_sets_a_strict_http_only_session_cookie(stack: Stack) -> None:
    form = await get(stack.url + "/login?next=/history")
    nonce = cookie(form, "capgate_inbox_login")
    token = csrf_of(form)
    missing = await post_form(
        stack.url + "/login", {"token": human_token("bob")}, cookie=f"capgate_inbox_login={nonce}"
    )
    assert missing.status == 403
    assert not re.search(r"(^|\n)capgate_inbox=", missing.headers.get("set-cookie", ""))
    refused = await post_form(
        stack.url + "/login",
        {"csrf": token, "token": human_token("bob", audience="capgate")},
        cookie=f"capgate_inbox_login={nonce}",
    )
    assert refused.status == 401
    assert "The token was refused: wrong audience." in refused.body
    done = await post_form(
        stack.url + "/login",
        {"csrf": token, "token": human_token("bob"), "next": "/history"},
        cookie=f"capgate_inbox_login={nonce}",
    )
    assert done.status == 303
    assert done.headers["location"] == "/history"
    session = [c for c in done.headers["set-cookie"].split("\n") if c.startswith("capgate_inbox=")]
    assert len(session) == 1
    flags = session[0].lower()
    assert "httponly" in flags
    assert "samesite=strict" in flags
    assert "path=/" in flags
    page = await get(stack.url + "/history", cookie=session[0].split(";")[0])
    assert page.status == 200
    assert 'id="me">bob<' in page.body


async def test_a_guessed_or_altered_session_cookie_is_not_a_session(stack: Stack) -> None:
    session = await sign_in(stack, "alice")
    sid = session.removeprefix("capgate_inbox=")
    for bad in (sid[:-1] + ("A" if sid[-1] != "A" else "B"), sid + "x", "x" * 43, "a" * 5000):
        assert (await get(stack.url + "/", cookie=f"capgate_inbox={bad}")).status == 303
    assert (await get(stack.url + "/", cookie=session)).status == 200


async def test_after_sign_out_the_old_cookie_is_refused(stack: Stack) -> None:
    """The cookie is a handle on a server-side session: signing out ends it everywhere."""
    bob = await sign_in(stack, "bob")
    page = await get(stack.url + "/", cookie=bob)
    assert page.status == 200
    out = await post_form(stack.url + "/logout", {"csrf": csrf_of(page)}, cookie=bob)
    assert out.status == 303
    assert out.headers["location"] == "/login"
    replay = await get(stack.url + "/", cookie=bob)  # the same cookie, sent again
    assert replay.status == 303
    assert replay.headers["location"].startswith("/login")
    assert (await get(stack.url + "/events", cookie=bob)).status == 401
    assert (await get(stack.url + "/history", cookie=bob)).status == 303


async def test_a_role_removed_at_sign_in_is_gone_from_open_sessions_on_the_next_request(
    stack: Stack,
) -> None:
    approval = await stack.request_refund(845, "o-1012")
    await stack.seen_by_inbox(approval.id)
    old = await sign_in(stack, "bob")  # bob holds manager: the refund is his to decide
    assert approval.id in (await get(stack.url + "/", cookie=old)).body
    # bob's identity provider dropped manager; bob signs in again (another browser, say).
    form = await get(stack.url + "/login")
    nonce = cookie(form, "capgate_inbox_login")
    fewer = human_token("bob", roles=["approver"])
    done = await post_form(
        stack.url + "/login",
        {"csrf": csrf_of(form), "token": fewer, "next": "/"},
        cookie=f"capgate_inbox_login={nonce}",
    )
    assert done.status == 303
    listed = await get(stack.url + "/", cookie=old)  # the OLD session, next request
    assert listed.status == 200
    assert approval.id not in listed.body
    assert 'class="roles">approver<' in listed.body
    detail = await get(stack.url + f"/approvals/{approval.id}", cookie=old)
    assert detail.status == 404


async def test_sessions_end_when_idle_and_at_their_absolute_lifetime(stack: Stack) -> None:
    """A second inbox on the same stack, its session expiry judged by an injected clock."""

    class Clock:
        offset = 0.0

        def __call__(self) -> float:
            return time.time() + self.offset

    clock = Clock()
    settings = inbox_settings(
        stack.gw.ports()["admin"],
        stack.redis_url,
        session_idle_s=600,
        session_lifetime_s=1800,
    )
    running = await start_inbox(settings, inbox=Inbox(settings, session_clock=clock))
    try:
        url = running.url
        idle = await sign_in_at(url, "bob", lifetime=3000)
        active = await sign_in_at(url, "carol", lifetime=3000)
        for _ in range(3):  # carol works on; bob walked away
            clock.offset += 500
            assert (await get(url + "/", cookie=active)).status == 200
        assert (await get(url + "/", cookie=idle)).status == 303  # 1500 s without a request
        clock.offset += 300  # 1800 s after sign-in: the absolute limit, however active
        assert (await get(url + "/", cookie=active)).status == 303
    finally:
        await running.stop()


async def test_hsts_is_sent_behind_an_https_base_url_only(stack: Stack) -> None:
    assert "strict-transport-security" not in (await get(stack.url + "/login")).headers
    settings = inbox_settings(
        stack.gw.ports()["admin"], stack.redis_url, base_url="https://inbox.example"
    )
    running = await start_inbox(settings)
    try:
        for path in ("/login", "/", "/static/inbox.css", "/nope"):
            reply = await get(running.url + path)
            assert reply.headers["strict-transport-security"] == "max-age=31536000", path
    finally:
        await running.stop()


async def test_a_decision_needs_this_sessions_csrf_token_and_a_same_site_request(
    stack: Stack,
) -> None:
    approval = await stack.request_refund(820, "o-1006")
    await stack.seen_by_inbox(approval.id)
    bob, carol = await sign_in(stack, "bob"), await sign_in(stack, "carol")
    page = await get(stack.url + f"/approvals/{approval.id}", cookie=bob)
    others = csrf_of(await get(stack.url + "/", cookie=carol))
    url = stack.url + f"/approvals/{approval.id}/decide"
    form = {"verdict": "approve", "input_hash": approval.input_hash, "note": ""}
    attempts = [
        await post_form(url, form, cookie=bob),
        await post_form(url, form | {"csrf": others}, cookie=bob),
        await post_form(
            url, form | {"csrf": csrf_of(page)}, cookie=bob, sec_fetch_site="cross-site"
        ),
    ]
    assert [a.status for a in attempts] == [403, 403, 403]
    assert (await stack.approval(approval.id)).status == PENDING
    ok = await post_form(
        url, form | {"csrf": csrf_of(page)}, cookie=bob, sec_fetch_site="same-origin"
    )
    assert ok.status == 303
    assert ok.headers["location"] == f"/approvals/{approval.id}"
    assert (await stack.approval(approval.id)).status == types_pb2.APPROVAL_STATUS_APPROVED


async def test_header_authenticated_decisions_need_a_token_bound_to_the_identity(
    stack: Stack,
) -> None:
    approval = await stack.request_refund(830, "o-1007")
    await stack.seen_by_inbox(approval.id)
    url = stack.url + f"/approvals/{approval.id}/decide"
    token = csrf_of(await get(stack.url + f"/approvals/{approval.id}", **bearer("bob")))
    form = {"verdict": "reject", "input_hash": approval.input_hash, "csrf": token}
    assert (await post_form(url, form, **bearer("carol"))).status == 403
    assert (await post_form(url, form, **bearer("bob"))).status == 303


async def test_the_gateway_refuses_a_decision_on_a_hash_the_approver_did_not_see(
    stack: Stack,
) -> None:
    approval = await stack.request_refund(840, "o-1008")
    await stack.seen_by_inbox(approval.id)
    page = await get(stack.url + f"/approvals/{approval.id}", **bearer("bob"))
    reply = await post_form(
        stack.url + f"/approvals/{approval.id}/decide",
        {
            "verdict": "approve",
            "input_hash": "0" * 64,
            "csrf": csrf_of(page),
            "note": "<i>kept</i>",
        },
        **bearer("bob"),
    )
    assert reply.status == 409
    assert "APPROVAL_INPUT_MISMATCH" in reply.body
    assert "&lt;i&gt;kept&lt;/i&gt;</textarea>" in reply.body  # the note survives, escaped
    assert (await stack.approval(approval.id)).status == PENDING


def _first_change(
    url: str, headers: dict[str, str], ready: asyncio.Event, loop: asyncio.AbstractEventLoop
) -> dict[str, object]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        conn.request("GET", parts.path + "?" + parts.query, headers=headers)
        reply = conn.getresponse()
        assert reply.status == 200
        assert reply.getheader("content-type", "").startswith("text/event-stream")
        loop.call_soon_threadsafe(ready.set)
        while True:
            line = reply.readline().decode()
            if line.startswith("data: "):
                return dict(orjson.loads(line.removeprefix("data: ")))
    finally:
        conn.close()


async def test_live_updates_name_only_approvals_the_viewer_may_see(stack: Stack) -> None:
    version = stack.inbox.inbox.book.version
    ready = asyncio.Event()
    reader = asyncio.ensure_future(
        asyncio.to_thread(
            _first_change,
            f"{stack.url}/events?since={version}",
            bearer("bob"),
            ready,
            asyncio.get_running_loop(),
        )
    )
    await asyncio.wait_for(ready.wait(), 5)
    hidden = await stack.request("admin.orders.purge", {"older_than_days": 30}, actor="root")
    await stack.seen_by_inbox(hidden.id)
    shown = await stack.request_refund(850, "o-1009")
    change = await asyncio.wait_for(reader, 10)
    assert change["ids"] == [shown.id]  # bob is no admin: the purge request is not named
    assert set(change) == {"version", "ids"}  # ids only, never content


async def test_a_decision_from_another_origin_is_refused_even_with_a_valid_token(
    stack: Stack,
) -> None:
    """Origin (Referer as fallback) must be the inbox's own: scheme, host and port."""
    approval = await stack.request_refund(860, "o-1010")
    await stack.seen_by_inbox(approval.id)
    bob = await sign_in(stack, "bob")
    page = await get(stack.url + f"/approvals/{approval.id}", cookie=bob)
    url = stack.url + f"/approvals/{approval.id}/decide"
    form = {"verdict": "approve", "input_hash": approval.input_hash, "csrf": csrf_of(page)}
    parts = urlsplit(stack.url)
    other_port = f"http://{parts.hostname}:{(parts.port or 80) + 1}"
    refused = {
        "evil origin": {"origin": "http://evil.example"},
        "same-site": {"sec_fetch_site": "same-site"},
        "cross-site": {"sec_fetch_site": "cross-site"},
        "null origin": {"origin": "null"},
        "other port": {"origin": other_port},
        "other scheme": {"origin": stack.url.replace("http://", "https://")},
        "evil referer": {"origin": "", "referer": "http://evil.example/approvals/x"},
        "neither": {"origin": ""},
    }
    for name, headers in refused.items():
        reply = await post_form(url, form, cookie=bob, **headers)
        assert reply.status == 403, name
        assert "did not come from this inbox" in reply.body, name
    assert (await stack.approval(approval.id)).status == PENDING
    # The inbox's own page, told by Referer alone (an Origin-less client), is accepted.
    own = await post_form(
        url, form, cookie=bob, origin="", referer=f"{stack.url}/approvals/{approval.id}"
    )
    assert own.status == 303, own.body
    assert (await stack.approval(approval.id)).status == types_pb2.APPROVAL_STATUS_APPROVED


async def test_sign_in_and_out_need_the_configured_base_url_origin(stack: Stack) -> None:
    """With base_url set, the inbox's origin is the base URL's, not the address it answers on."""
    settings = inbox_settings(
        stack.gw.ports()["admin"], stack.redis_url, base_url="http://inbox.example:8443"
    )
    running = await start_inbox(settings)
    try:
        form = await get(running.url + "/login")
        nonce = cookie(form, "capgate_inbox_login")
        fields = {"csrf": csrf_of(form), "token": human_token("bob"), "next": "/"}
        login = running.url + "/login"
        jar = f"capgate_inbox_login={nonce}"
        wrong = await post_form(login, fields, cookie=jar)  # Origin: the address it answers on
        assert wrong.status == 403
        assert "did not come from this inbox (another origin)" in wrong.body
        ok = await post_form(login, fields, cookie=jar, origin="http://inbox.example:8443")
        assert ok.status == 303, ok.body
        session = f"capgate_inbox={cookie(ok, 'capgate_inbox')}"
        token = csrf_of(await get(running.url + "/", cookie=session))
        out = await post_form(running.url + "/logout", {"csrf": token}, cookie=session)
        assert out.status == 403
    finally:
        await running.stop()


def _stream_until_closed(url: str, headers: dict[str, str], ready: asyncio.Event, loop: Any) -> int:
    """Read an SSE stream to its end; the number of lines read."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=20)
    try:
        conn.request("GET", parts.path + "?" + parts.query, headers=headers)
        reply = conn.getresponse()
        assert reply.status == 200
        loop.call_soon_threadsafe(ready.set)
        lines = 0
        while reply.readline():
            lines += 1
        return lines
    finally:
        conn.close()


async def test_signing_out_ends_an_open_live_update_stream(stack: Stack) -> None:
    bob = await sign_in(stack, "bob")
    ready = asyncio.Event()
    version = stack.inbox.inbox.book.version
    reader = asyncio.ensure_future(
        asyncio.to_thread(
            _stream_until_closed,
            f"{stack.url}/events?since={version}",
            {"cookie": bob},
            ready,
            asyncio.get_running_loop(),
        )
    )
    await asyncio.wait_for(ready.wait(), 5)
    page = await get(stack.url + "/", cookie=bob)
    assert (
        await post_form(stack.url + "/logout", {"csrf": csrf_of(page)}, cookie=bob)
    ).status == 303
    await stack.request_refund(855, "o-1013")  # a change wakes the stream: it checks, and ends
    assert await asyncio.wait_for(reader, 10) >= 1


async def test_without_redis_cookie_pages_answer_503_and_header_credentials_still_work(
    stack: Stack,
) -> None:
    settings = inbox_settings(stack.gw.ports()["admin"], "redis://127.0.0.1:1/0")
    running = await start_inbox(settings)
    try:
        down = await get(running.url + "/", cookie="capgate_inbox=" + "a" * 43)
        assert down.status == 503
        assert "Sign-in unavailable" in down.body
        assert down.headers["content-security-policy"] == CSP
        assert (await get(running.url + "/", **bearer("bob"))).status == 200
    finally:
        await running.stop()
