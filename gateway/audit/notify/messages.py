"""The two message shapes of an approval notification (a new request, or an escalated one);
neither carries input data (§12).

Only named fields of the audit event are read (ids, names, reasons, times) — never the input
HMAC or anything else — so a future field on the event cannot leak into a webhook. Free text
that callers or policy authors control (actor ids, reasons) is escaped for Slack's mrkdwn, where
`<...>` would otherwise become a link or a mention.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import quote

MAX_REASONS: Final = 5
MAX_ROLES: Final = 10
MAX_TEXT: Final = 300
REQUESTED: Final = "capability.approval_requested"
ESCALATED: Final = "capability.approval_escalated"


@dataclass(frozen=True, slots=True)
class CapabilityFacts:
    """What the notification says about the capability (from the config, not the call)."""

    risk: str = ""
    side_effect: str = ""
    description: str = ""


def deep_link(inbox_base_url: str, approval_id: str) -> str:
    return f"{inbox_base_url.rstrip('/')}/approvals/{quote(approval_id, safe='')}"


def _text(value: Any) -> str:
    return str(value)[:MAX_TEXT] if value is not None else ""


def _expires(value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC).isoformat(timespec="seconds")
    return ""


def _escalated(event: Mapping[str, Any]) -> bool:
    return event.get("event") == ESCALATED


def _roles(value: Any) -> list[str]:
    return [_text(r) for r in value[:MAX_ROLES]] if isinstance(value, list) else []


def generic(event: Mapping[str, Any], facts: CapabilityFacts, link: str) -> dict[str, Any]:
    """A flat JSON message for any receiver: a new request, or an escalated one (its
    `escalated_at` and the `escalation_roles` that may now decide, instead of `requested_at`).
    """
    reasons = event.get("reasons")
    # A request's actor is its requester; an escalation's event names the requester apart.
    who = "requester_" if _escalated(event) else "actor_"
    body: dict[str, Any] = {
        "type": ESCALATED if _escalated(event) else REQUESTED,
        "approval_id": _text(event.get("approval_id")),
        "capability_id": _text(event.get("capability_id")),
        "risk": facts.risk,
        "side_effect": facts.side_effect,
        "surface": _text(event.get("surface")),
        "execution_id": _text(event.get("execution_id")),
        "requester": {
            "id": _text(event.get(who + "id")),
            "issuer": _text(event.get(who + "issuer")),
            "kind": _text(event.get(who + "kind")),
        },
        "reasons": [_text(r) for r in reasons[:MAX_REASONS]] if isinstance(reasons, list) else [],
        "expires_at": _expires(event.get("expires_at")),
        "url": link,
    }
    if _escalated(event):
        body["escalated_at"] = _text(event.get("time"))
        body["escalation_roles"] = _roles(event.get("escalation_roles"))
    else:
        body["requested_at"] = _text(event.get("time"))
    return body


def _mrkdwn(text: str) -> str:
    # Slack's own escaping rules: only &, < and > are control characters in mrkdwn.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack(event: Mapping[str, Any], facts: CapabilityFacts, link: str) -> dict[str, Any]:
    """A Slack incoming-webhook message: `text` (fallback) and Block Kit `blocks`."""
    body = generic(event, facts, link)
    capability = _mrkdwn(body["capability_id"])
    requester = _mrkdwn(body["requester"]["id"])
    headline = "Approval escalated" if _escalated(event) else "Approval needed"
    lines = [
        f"*{headline}* for `{capability}`",
        f"Risk: *{_mrkdwn(facts.risk or 'unknown')}*"
        f" · Side effect: {_mrkdwn(facts.side_effect or 'unknown')}",
        f"Requested by: {requester}",
    ]
    if _escalated(event):
        roles = ", ".join(_mrkdwn(r) for r in body["escalation_roles"]) or "none"
        lines.append(f"Undecided in time; may now also decide: {roles}")
    lines += [f"Reason: {_mrkdwn(r)}" for r in body["reasons"]]
    if body["expires_at"]:
        lines.append(f"Expires: {body['expires_at']}")
    return {
        "text": f"{headline} for {capability} (requested by {requester}): {link}",
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)}},
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": "Review in the inbox"},
                        "url": link,
                        "style": "primary",
                    }
                ],
            },
        ],
    }
