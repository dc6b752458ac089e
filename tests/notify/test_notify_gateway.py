"""Webhooks end to end: a real gateway (real upstream, real Redis) notifies loopback receivers
when a call needs approval; slow and failing receivers never block or fail the call."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import grpc
import orjson
import pytest

from capgate.v1 import gateway_pb2, gateway_pb2_grpc
from examples.orders.server import serve as serve_orders
from gateway.audit.notify import WebhookNotifier, verify
from gateway.config.settings import NotifySettings, RedisSettings, Webhook
from gateway.process.serve import Gateway
from gateway.state.embedded import RedisProcess
from tests.gateway.harness import token
from tests.notify.notifykit import Receiver, settings_for, start_gateway

pytestmark = pytest.mark.integration
SECRET = "webhook-secret-0123456789-abcdefgh"
INBOX = "https://inbox.test/capgate"


@pytest.fixture(scope="module")
async def receivers() -> AsyncIterator[dict[str, Receiver]]:
    found = {
        "slack": await Receiver().start(),
        "flaky": await Receiver(statuses=[500, 503, 200]).start(),
        "hanging": await Receiver(hang=True).start(),
    }
    yield found
    for r in found.values():
        await r.stop()


@pytest.fixture(scope="module")
async def gateway(
    receivers: dict[str, Receiver], redis_server: RedisProcess
) -> AsyncIterator[Gateway]:
    orders, port = await serve_orders("127.0.0.1:0")
    hooks = (
        Webhook(name="chat", url=receivers["slack"].url, kind="slack", secret=SECRET),
        Webhook(name="flaky", url=receivers["flaky"].url, kind="generic", secret=SECRET),
        Webhook(
            name="slow", url=receivers["hanging"].url, kind="generic", secret=SECRET, timeout_s=30.0
        ),
    )
    notify = NotifySettings(
        webhooks=hooks,
        inbox_base_url=INBOX,
        initial_backoff_s=0.01,
        max_backoff_s=0.05,
        max_attempts=4,
    )
    settings = settings_for(
        f"127.0.0.1:{port}",
        redis_server.url,
        notify=notify,
        redis=RedisSettings(url=redis_server.url, key_prefix="capgate-notify"),
    )
    gw = await start_gateway(settings)
    yield gw
    await gw.stop(0.5)
    await orders.stop(0)


def notifier_of(gw: Gateway) -> WebhookNotifier:
    sinks = gw.runtime.audit.observers  # type: ignore[attr-defined]
    return next(s for s in sinks if isinstance(s, WebhookNotifier))


async def refund(gw: Gateway, amount: float) -> gateway_pb2.ExecutionResult:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}") as channel:
        request = gateway_pb2.InvokeRequest(
            capability_id="orders.refund",
            input_json=orjson.dumps({"order_id": "o-1001", "amount": amount, "reason": "r-secret"}),
        )
        return await gateway_pb2_grpc.CapabilityGatewayStub(channel).Invoke(
            request, metadata=[("authorization", f"Bearer {token('alice')}")], timeout=10
        )


async def test_an_approval_request_notifies_every_webhook_without_blocking_the_call(
    gateway: Gateway, receivers: dict[str, Receiver]
) -> None:
    started = time.monotonic()
    result = await refund(gateway, 800)
    elapsed = time.monotonic() - started
    assert result.WhichOneof("outcome") == "approval_required"
    # One receiver never answers (30 s limit) and another fails twice: the call does not wait.
    assert elapsed < 1.0
    approval_id = result.approval_required.approval.id

    (chat,) = await receivers["slack"].wait_for(1)
    flaky = await receivers["flaky"].wait_for(3)
    await receivers["hanging"].wait_for(1)
    link = f"{INBOX}/approvals/{approval_id}"
    slack_body = orjson.loads(chat.body)
    assert set(slack_body) == {"text", "blocks"}
    assert link in slack_body["text"]
    assert "*high*" in slack_body["blocks"][0]["text"]["text"]
    generic = orjson.loads(flaky[-1].body)
    assert generic["approval_id"] == approval_id
    assert generic["url"] == link
    assert generic["requester"]["id"] == "alice"
    assert generic["side_effect"] == "write"
    for request in [chat, *flaky]:
        h = request.headers
        assert verify(
            SECRET,
            request.body,
            timestamp=h["x-capgate-timestamp"],
            signature=h["x-capgate-signature"],
            now=time.time(),
        )
        # No input data: not the order, not the amount's field, not the reason.
        assert b"o-1001" not in request.body
        assert b"r-secret" not in request.body
        assert b"amount" not in request.body
        assert b"input" not in request.body
    assert len({r.headers["x-capgate-delivery"] for r in flaky}) == 1  # one delivery, 3 tries


async def test_calls_that_need_no_approval_send_nothing(
    gateway: Gateway, receivers: dict[str, Receiver]
) -> None:
    before = len(receivers["slack"].requests)
    result = await refund(gateway, 20)
    assert result.WhichOneof("outcome") == "completed"
    await gateway.runtime.audit.flush()  # type: ignore[attr-defined]
    assert notifier_of(gateway).pending <= 1  # only the hanging delivery of the first test
    assert len(receivers["slack"].requests) == before
