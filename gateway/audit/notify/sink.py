"""`WebhookNotifier`: the audit observer that notifies approvers of new approval requests and
of escalated ones (`capability.approval_escalated`, naming the roles that may now decide).

`write` only schedules deliveries — one task per (event, webhook) — and returns, so the audit
drain (already off the request path) is not held up by a slow receiver either. Each delivery
retries connection failures, timeouts, 408, 429 and 5xx with exponential backoff and jitter, up
to `max_attempts`; other statuses are final. At most `max_pending` deliveries exist at once;
beyond that new ones are dropped and counted. Logs name the webhook, never its URL (a Slack URL
is a credential) and never the body.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import orjson

from gateway.audit.notify import messages
from gateway.audit.notify.http import DeliveryError, Reply, post
from gateway.audit.notify.messages import CapabilityFacts
from gateway.audit.notify.signing import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    sign,
)
from gateway.config.settings import NotifySettings, Webhook
from gateway.errors import Event

log = logging.getLogger("capgate.notify")

Send = Callable[..., Awaitable[Reply]]
Facts = Callable[[str], CapabilityFacts | None]
_RETRY_STATUSES = frozenset({408, 425, 429})
_SHAPES = {"slack": messages.slack, "generic": messages.generic}
_NOTIFIED = frozenset({Event.APPROVAL_REQUESTED.value, Event.APPROVAL_ESCALATED.value})


def snapshot_facts(current: Callable[[], Any]) -> Facts:
    """A lookup of risk, side effect and description in the current config snapshot."""

    def lookup(capability_id: str) -> CapabilityFacts | None:
        prepared = current().capabilities.get(capability_id)
        if prepared is None:
            return None
        cap = prepared.capability
        return CapabilityFacts(cap.risk, cap.side_effect, cap.description)

    return lookup


def _decided(event: Mapping[str, Any]) -> bool:
    """An escalation found due by the decision that also decided the approval: nobody is left
    to ask (its audit event stays; only the notification is not sent)."""
    return (
        event.get("event") == Event.APPROVAL_ESCALATED.value
        and event.get("status", "pending") != "pending"
    )


class WebhookNotifier:
    """An audit observer (a `Sink` the audit log never counts as a record, since it drops
    every event but `capability.approval_requested` and `.approval_escalated`) that POSTs
    approval notifications."""

    name = "webhooks"

    def __init__(
        self,
        settings: NotifySettings,
        *,
        facts: Facts | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
        send: Send = post,
    ) -> None:
        self.settings = settings
        self._facts = facts
        self._clock = clock
        self._sleep = sleep
        self._jitter = jitter
        self._send = send
        self._tasks: set[asyncio.Task[None]] = set()
        self.delivered = 0
        self.failed = 0
        self.dropped = 0

    def bind(self, facts: Facts) -> None:
        """Set the capability lookup (the snapshot exists only after the sinks)."""
        self._facts = facts

    async def write(self, events: Sequence[Mapping[str, Any]]) -> None:
        for event in events:
            if event.get("event") in _NOTIFIED and not _decided(event):
                self._schedule(event)

    def _schedule(self, event: Mapping[str, Any]) -> None:
        capability_id = str(event.get("capability_id", ""))
        facts = (self._facts(capability_id) if self._facts else None) or CapabilityFacts()
        link = messages.deep_link(self.settings.inbox_base_url, str(event.get("approval_id", "")))
        for hook in self.settings.webhooks:
            if len(self._tasks) >= self.settings.max_pending:
                self.dropped += 1
                log.warning(
                    "webhook %s: notification dropped, %d deliveries pending",
                    hook.name,
                    len(self._tasks),
                )
                continue
            body = orjson.dumps(_SHAPES[hook.kind](event, facts, link))
            kind = str(event["event"])
            task = asyncio.get_running_loop().create_task(
                self._deliver(hook, body, uuid.uuid4().hex, kind), name=f"webhook-{hook.name}"
            )
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _headers(self, hook: Webhook, body: bytes, delivery_id: str, kind: str) -> dict[str, str]:
        now = int(self._clock())
        return {
            "Content-Type": "application/json",
            "User-Agent": "capgate-notify/1",
            EVENT_HEADER: kind,
            DELIVERY_HEADER: delivery_id,  # the same on every attempt: receivers de-duplicate
            TIMESTAMP_HEADER: str(now),
            SIGNATURE_HEADER: sign(hook.secret, now, body),  # re-signed per attempt
        }

    def backoff(self, attempt: int, hint_s: float | None = None) -> float:
        """Wait after failed attempt `attempt` (1-based): doubling, capped, half jittered."""
        s = self.settings
        base = min(s.max_backoff_s, s.initial_backoff_s * 2.0 ** (attempt - 1))
        delay = base / 2 + self._jitter() * base / 2
        if hint_s is not None:  # Retry-After, bounded like everything else
            delay = max(delay, min(hint_s, s.max_backoff_s))
        return delay

    async def _deliver(self, hook: Webhook, body: bytes, delivery_id: str, kind: str) -> None:
        attempts = self.settings.max_attempts
        for attempt in range(1, attempts + 1):
            hint: float | None = None
            try:
                reply = await self._send(
                    hook.url,
                    body,
                    self._headers(hook, body, delivery_id, kind),
                    timeout_s=hook.timeout_s,
                )
            except DeliveryError as exc:
                outcome, retry = str(exc), True
            else:
                if 200 <= reply.status < 300:
                    self.delivered += 1
                    return
                outcome = f"HTTP {reply.status}"
                retry = reply.status >= 500 or reply.status in _RETRY_STATUSES
                hint = reply.retry_after_s
            if not retry or attempt == attempts:
                self.failed += 1
                log.warning(
                    "webhook %s: delivery %s failed after %d attempt(s): %s",
                    hook.name,
                    delivery_id,
                    attempt,
                    outcome,
                )
                return
            log.info("webhook %s: attempt %d failed (%s), retrying", hook.name, attempt, outcome)
            await self._sleep(self.backoff(attempt, hint))

    @property
    def pending(self) -> int:
        return len(self._tasks)

    async def drain(self, timeout_s: float) -> None:
        """Wait until every scheduled delivery finished (tests, orderly shutdown)."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout_s)

    async def run(self) -> None:
        """Live until cancelled (the gateway's task list), then cancel pending deliveries."""
        try:
            await asyncio.Event().wait()
        finally:
            await self.close()

    async def close(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.difference_update(tasks)  # done-callbacks run one loop turn later
