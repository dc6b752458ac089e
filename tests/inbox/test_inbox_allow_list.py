"""Issue 27 defect 6: an inbox whose gateway admin listener does not allow-list it in
`on_behalf_of` says so loudly at its first contact (the inbox config does not say what the
gateway's does, so it cannot refuse at start). A real gateway (real admin listener, real Redis)
and the real inbox served by uvicorn."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time

import pytest

from examples.orders.server import serve as serve_orders
from gateway.inbox.server import RunningInbox, start_inbox
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.inbox.inboxkit import gateway_settings, inbox_settings

pytestmark = [pytest.mark.integration]


async def _first_contact(inbox: RunningInbox) -> bool:
    """What the inbox's first contact found (awaited: the book sets it once answered)."""
    book = inbox.inbox.book
    deadline = time.monotonic() + 30
    while book.acts_for_humans is None:
        assert time.monotonic() < deadline, "the inbox never reached the gateway"
        await asyncio.sleep(0.05)
    return book.acts_for_humans


@pytest.mark.parametrize("allow_listed", [False, True])
async def test_an_inbox_not_allow_listed_says_so_at_its_first_contact(
    redis_server: RedisProcess, caplog: pytest.LogCaptureFixture, allow_listed: bool
) -> None:
    orders, port = await serve_orders("127.0.0.1:0")
    settings = gateway_settings(f"127.0.0.1:{port}", redis_server.url)
    if not allow_listed:
        listeners = tuple(dataclasses.replace(x, on_behalf_of=()) for x in settings.listeners)
        settings = dataclasses.replace(settings, listeners=listeners)
    gw = await start(settings)
    try:
        with caplog.at_level(logging.ERROR, logger="capgate.inbox"):
            inbox = await start_inbox(inbox_settings(gw.ports()["admin"], redis_server.url))
            try:
                assert await _first_contact(inbox) is allow_listed
            finally:
                await inbox.stop()
    finally:
        await gw.stop(0.2)
        await orders.stop(0)
    said = [r.getMessage() for r in caplog.records if "allow-list this inbox" in r.getMessage()]
    if allow_listed:
        assert said == []
    else:
        assert len(said) == 1, said
        assert "{issuer: test-idp, id: capgate-inbox}" in said[0]
        assert "on_behalf_of" in said[0]
