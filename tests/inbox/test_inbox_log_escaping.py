"""The inbox's sign-in and sign-out log lines through the real inbox and gateway: the signed-in
subject is written escaped (gateway.audit.events.caller_text), never as raw CR/LF or bidi."""

from __future__ import annotations

import logging
import re

import pytest

from tests.inbox.inboxkit import Stack, get, human_token, post_form
from tests.inbox.test_inbox_http import cookie, csrf_of

pytestmark = pytest.mark.integration

HOSTILE = "bob\r\nINFO capgate.inbox: inbox: mallory signed in\u202e\u2066"


async def test_a_hostile_subject_is_escaped_in_the_sign_in_and_out_lines(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="capgate"):
        form = await get(stack.url + "/login")
        nonce = cookie(form, "capgate_inbox_login")
        done = await post_form(
            stack.url + "/login",
            {"csrf": csrf_of(form), "token": human_token("bob", sub=HOSTILE), "next": "/"},
            cookie=f"capgate_inbox_login={nonce}",
        )
        assert done.status == 303, done.body
        session = f"capgate_inbox={cookie(done, 'capgate_inbox')}"
        page = await get(stack.url + "/", cookie=session)
        out = await post_form(stack.url + "/logout", {"csrf": csrf_of(page)}, cookie=session)
        assert out.status == 303
    lines = [r.getMessage() for r in caplog.records if re.search("signed (in|out)", r.getMessage())]
    mine = [line for line in lines if line.startswith("inbox: bob\\u000d\\u000a")]
    assert len(mine) == 2, lines
    for line in mine:
        assert not set(line) & {"\r", "\n", "\u202e", "\u2066"}
        assert line.endswith(("\\u202e\\u2066 signed in", "\\u202e\\u2066 signed out"))
