"""The inbox stack, started once per test session for tests/inbox."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from examples.orders.server import serve as serve_orders
from gateway.inbox.server import start_inbox
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.inbox.inboxkit import Stack, gateway_settings, inbox_settings


@pytest.fixture(scope="session")
async def stack(redis_server: RedisProcess) -> AsyncIterator[Stack]:
    orders, port = await serve_orders("127.0.0.1:0")
    gw = await start(gateway_settings(f"127.0.0.1:{port}", redis_server.url))
    inbox = await start_inbox(inbox_settings(gw.ports()["admin"], redis_server.url))
    yield Stack(gw, inbox, redis_server.url)
    await inbox.stop()
    await gw.stop(0.5)
    await orders.stop(0)
