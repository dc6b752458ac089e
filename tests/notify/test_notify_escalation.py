"""The escalation notification's shapes (docs/approvals.md "Escalation"): the roles that may now
decide, the requester named from the event's requester fields, never input data; the notifier
sends it like a request, with its own X-Capgate-Event, to a real loopback receiver."""

from __future__ import annotations

import orjson
import pytest

from gateway.audit.notify import WebhookNotifier, messages
from gateway.audit.notify.messages import CapabilityFacts
from gateway.config.settings import NotifySettings, Webhook
from tests.notify.notifykit import Receiver

SECRET = "webhook-secret-0123456789-abcdefgh"
ESCALATED = {
    "event": "capability.approval_escalated",
    "time": "2026-01-02T03:19:05.000+00:00",
    "execution_id": "exec-1",
    "capability_id": "orders.refund",
    "surface": "agent",
    "approval_id": "apr-1",
    "requester_id": "alice",
    "requester_issuer": "idp",
    "requester_kind": "user",
    "escalation_roles": ["manager", "<!channel>"],
    "reasons": ["Refund above 500"],
    "expires_at": 1767323045.0,
    "input": {"card": "4111111111111111"},  # never present in real events; must not leak
}
FACTS = CapabilityFacts(risk="high", side_effect="write")
LINK = messages.deep_link("https://inbox.example", "apr-1")


def test_the_generic_escalation_names_the_roles_and_the_requester() -> None:
    body = messages.generic(ESCALATED, FACTS, LINK)
    assert body["type"] == "capability.approval_escalated"
    assert body["escalation_roles"] == ["manager", "<!channel>"]
    assert body["escalated_at"] == "2026-01-02T03:19:05.000+00:00"
    assert "requested_at" not in body
    assert body["requester"] == {"id": "alice", "issuer": "idp", "kind": "user"}
    assert "4111" not in orjson.dumps(body).decode()


def test_the_slack_escalation_says_so_and_escapes_the_roles() -> None:
    body = messages.slack(ESCALATED, FACTS, LINK)
    assert body["text"].startswith("Approval escalated for orders.refund")
    section = body["blocks"][0]["text"]["text"]
    assert "*Approval escalated*" in section
    assert "may now also decide: manager, &lt;!channel&gt;" in section
    assert "4111" not in orjson.dumps(body).decode()


@pytest.mark.integration
async def test_the_notifier_sends_an_escalation_with_its_event_header() -> None:
    receiver = await Receiver().start()
    try:
        hook = Webhook(name="ops", url=receiver.url, kind="generic", secret=SECRET)
        notifier = WebhookNotifier(
            NotifySettings(webhooks=(hook,), inbox_base_url="https://inbox.test"),
            facts=lambda _cid: FACTS,
        )
        await notifier.write([ESCALATED, {**ESCALATED, "event": "capability.approval_voted"}])
        (request,) = await receiver.wait_for(1)
        await notifier.drain(5)
        assert request.headers["x-capgate-event"] == "capability.approval_escalated"
        assert orjson.loads(request.body)["escalation_roles"] == ["manager", "<!channel>"]
        assert len(receiver.requests) == 1  # a vote notifies nobody
    finally:
        await receiver.stop()
