"""Notification bodies: Slack-compatible and generic shapes, a deep link, never input data."""

from __future__ import annotations

import orjson

from gateway.audit.notify import messages, sign, verify
from gateway.audit.notify.messages import CapabilityFacts

EVENT = {
    "event": "capability.approval_requested",
    "time": "2026-01-02T03:04:05.000+00:00",
    "execution_id": "exec-1",
    "capability_id": "orders.refund",
    "surface": "agent",
    "actor_id": "<@U123> & <!channel>",
    "actor_issuer": "idp",
    "actor_kind": "user",
    "approval_id": "apr/1?x#y",
    "reasons": ["Refund above <b>500</b>"],
    "expires_at": 1767323045.0,
    "input_hmac": "deadbeefdeadbeef",
    "input": {"card": "4111111111111111"},  # never present in real events; must not leak
}
FACTS = CapabilityFacts(risk="high", side_effect="write", description="Refund an order.")
LINK = messages.deep_link("https://inbox.example/base/", "apr/1?x#y")


def test_the_deep_link_quotes_the_approval_id_into_one_path_segment():
    assert LINK == "https://inbox.example/base/approvals/apr%2F1%3Fx%23y"


def test_the_generic_message_carries_facts_and_link_but_no_input_data():
    body = messages.generic(EVENT, FACTS, LINK)
    assert body["approval_id"] == "apr/1?x#y"
    assert body["risk"] == "high"
    assert body["side_effect"] == "write"
    assert body["requester"] == {"id": "<@U123> & <!channel>", "issuer": "idp", "kind": "user"}
    assert body["expires_at"] == "2026-01-02T03:04:05+00:00"
    assert body["url"] == LINK
    text = orjson.dumps(body).decode()
    assert "4111" not in text
    assert "input" not in text
    assert "deadbeef" not in text


def test_the_slack_message_has_text_and_blocks_with_escaped_free_text():
    body = messages.slack(EVENT, FACTS, LINK)
    assert set(body) == {"text", "blocks"}
    section, actions = body["blocks"]
    shown = section["text"]["text"]
    # A requester id cannot mention a user or a channel, a reason cannot inject markup.
    assert "&lt;@U123&gt; &amp; &lt;!channel&gt;" in shown
    assert "<!channel>" not in shown
    assert "Refund above &lt;b&gt;500&lt;/b&gt;" in shown
    assert "*high*" in shown
    assert actions["elements"][0]["url"] == LINK
    assert LINK in body["text"]
    assert "4111" not in orjson.dumps(body).decode()


def test_reasons_are_bounded_in_number_and_length():
    event = {**EVENT, "reasons": ["x" * 1000] * 20}
    body = messages.generic(event, FACTS, LINK)
    assert len(body["reasons"]) == messages.MAX_REASONS
    assert all(len(r) == messages.MAX_TEXT for r in body["reasons"])


def test_a_signature_verifies_only_for_the_same_body_secret_and_a_recent_timestamp():
    secret, body = "s" * 32, b'{"a":1}'
    signature = sign(secret, 1000, body)
    assert signature.startswith("sha256=")
    assert len(signature) == 7 + 64
    assert verify(secret, body, timestamp="1000", signature=signature, now=1100)
    assert not verify(secret, b'{"a":2}', timestamp="1000", signature=signature, now=1100)
    assert not verify("t" * 32, body, timestamp="1000", signature=signature, now=1100)
    assert not verify(secret, body, timestamp="1001", signature=signature, now=1100)
    assert not verify(secret, body, timestamp="1000", signature=signature, now=1000 + 301)
    assert not verify(secret, body, timestamp="-5", signature=signature, now=1000)
