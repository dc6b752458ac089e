"""Webhook notifications for approvers (DESIGN §12: webhooks carry no input).

`WebhookNotifier` is an audit observer: it reacts to `capability.approval_requested` and
`capability.approval_escalated` and POSTs a
Slack-compatible or a generic JSON message with a deep link to the approver inbox, signed with
HMAC-SHA256, retried with bounded backoff. The audit log is drained in the background, so a slow
or failing receiver never blocks or fails the governed call.
"""

from gateway.audit.notify.signing import sign, verify
from gateway.audit.notify.sink import WebhookNotifier

__all__ = ["WebhookNotifier", "sign", "verify"]
