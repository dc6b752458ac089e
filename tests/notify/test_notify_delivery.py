"""WebhookNotifier against a real HTTP receiver on loopback: signed deliveries, bounded retries
with backoff, final failures, time limits and the pending cap. Backoff sleeps are injected and
recorded, so no test waits for real backoff time."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from gateway.audit.notify import WebhookNotifier, verify
from gateway.audit.notify.messages import CapabilityFacts
from gateway.config.settings import NotifySettings, Webhook
from tests.notify.notifykit import Receiver

pytestmark = pytest.mark.integration
SECRET = "webhook-secret-0123456789-abcdefgh"
EVENT = {
    "event": "capability.approval_requested",
    "time": "2026-01-02T03:04:05.000+00:00",
    "capability_id": "orders.refund",
    "approval_id": "apr-1",
    "actor_id": "alice",
    "actor_issuer": "idp",
    "reasons": ["over 500"],
}


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = await Receiver().start()
    yield r
    await r.stop()


class Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.calls.append(delay)


def notifier(
    url: str,
    sleeps: Sleeps,
    *,
    kind: str = "generic",
    timeout_s: float = 2.0,
    jitter: float = 1.0,
    **settings: Any,
) -> WebhookNotifier:
    hook = Webhook(name="ops", url=url, kind=kind, secret=SECRET, timeout_s=timeout_s)  # type: ignore[arg-type]
    notify = NotifySettings(webhooks=(hook,), inbox_base_url="https://inbox.test", **settings)
    return WebhookNotifier(
        notify,
        facts=lambda _cid: CapabilityFacts("high", "write"),
        sleep=sleeps,
        jitter=lambda: jitter,
    )


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


async def test_a_delivery_is_a_signed_json_post_with_the_deep_link(receiver: Receiver) -> None:
    n = notifier(receiver.url, Sleeps())
    await n.write([EVENT])
    (request,) = await receiver.wait_for(1)
    await n.drain(5)
    h = request.headers
    assert request.path == "/hook"
    assert h["content-type"] == "application/json"
    assert h["x-capgate-event"] == "capability.approval_requested"
    assert verify(
        SECRET,
        request.body,
        timestamp=h["x-capgate-timestamp"],
        signature=h["x-capgate-signature"],
        now=float(h["x-capgate-timestamp"]),
    )
    body = orjson.loads(request.body)
    assert body["url"] == "https://inbox.test/approvals/apr-1"
    assert body["risk"] == "high"
    assert (n.delivered, n.failed, n.pending) == (1, 0, 0)


async def test_server_errors_are_retried_with_growing_backoff_and_one_delivery_id(
    receiver: Receiver,
) -> None:
    receiver.statuses = [500, 503, 200]
    sleeps = Sleeps()
    n = notifier(receiver.url, sleeps, initial_backoff_s=1.0, max_backoff_s=60.0)
    await n.write([EVENT])
    await receiver.wait_for(3)
    await n.drain(5)
    assert sleeps.calls == [1.0, 2.0]  # jitter 1.0: the full doubling delay
    assert len({r.headers["x-capgate-delivery"] for r in receiver.requests}) == 1
    assert (n.delivered, n.failed) == (1, 0)


async def test_retries_stop_at_max_attempts_and_backoff_is_capped(receiver: Receiver) -> None:
    receiver.statuses = [502]
    sleeps = Sleeps()
    n = notifier(
        receiver.url, sleeps, max_attempts=4, initial_backoff_s=1.0, max_backoff_s=3.0, jitter=0.0
    )
    await n.write([EVENT])
    await receiver.wait_for(4)
    await n.drain(5)
    await asyncio.sleep(0.05)
    assert len(receiver.requests) == 4
    assert sleeps.calls == [0.5, 1.0, 1.5]  # half of min(3, 1·2^k): equal jitter at 0
    assert (n.delivered, n.failed) == (0, 1)


async def test_a_client_error_is_final(receiver: Receiver) -> None:
    receiver.statuses = [404]
    sleeps = Sleeps()
    n = notifier(receiver.url, sleeps)
    await n.write([EVENT])
    await receiver.wait_for(1)
    await n.drain(5)
    assert len(receiver.requests) == 1
    assert sleeps.calls == []
    assert n.failed == 1


async def test_retry_after_is_honoured_but_bounded(receiver: Receiver) -> None:
    receiver.statuses = [429, 200]
    receiver.extra_headers = "Retry-After: 3600\r\n"
    sleeps = Sleeps()
    n = notifier(receiver.url, sleeps, initial_backoff_s=0.1, max_backoff_s=7.0)
    await n.write([EVENT])
    await receiver.wait_for(2)
    await n.drain(5)
    assert sleeps.calls == [7.0]
    assert n.delivered == 1


async def test_a_receiver_that_never_answers_is_cut_off_by_the_timeout(receiver: Receiver) -> None:
    receiver.hang = True
    n = notifier(receiver.url, Sleeps(), timeout_s=0.2, max_attempts=2)
    started = asyncio.get_running_loop().time()
    await n.write([EVENT])
    assert asyncio.get_running_loop().time() - started < 0.1  # write only schedules
    await n.drain(5)
    assert len(receiver.requests) == 2
    assert n.failed == 1


async def test_an_unreachable_receiver_fails_after_bounded_attempts() -> None:
    sleeps = Sleeps()
    n = notifier(closed_port_url(), sleeps, max_attempts=3)
    await n.write([EVENT])
    await n.drain(5)
    assert len(sleeps.calls) == 2
    assert n.failed == 1


async def test_deliveries_beyond_max_pending_are_dropped(receiver: Receiver) -> None:
    receiver.hang = True
    n = notifier(receiver.url, Sleeps(), max_pending=2)
    await n.write([EVENT, EVENT, EVENT])
    assert (n.pending, n.dropped) == (2, 1)
    await n.close()
    assert n.pending == 0


async def test_only_approval_requests_are_notified(receiver: Receiver) -> None:
    n = notifier(receiver.url, Sleeps())
    await n.write(
        [{**EVENT, "event": "capability.completed"}, {**EVENT, "event": "capability.denied"}]
    )
    assert n.pending == 0
    await asyncio.sleep(0.05)
    assert receiver.requests == []
