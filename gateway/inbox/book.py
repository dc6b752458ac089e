"""The inbox's view of approvals: listed once, then kept current by WatchApprovals.

One Watch stream per inbox process (as the inbox identity, which sees every approval) feeds an
in-memory book; each browser's live updates (SSE) wait on the book's version instead of opening
streams of their own. Merging is by lifecycle rank (pending < decided < consumed < executed), so
a listing and a stream event arriving in either order converge on the later state. A trimmed
watch position (OUT_OF_RANGE) or a lost connection re-lists; a periodic re-list heals anything a
reconnect could have missed. Decided approvals are kept up to `history_limit`, newest first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

import grpc

from capgate.v1 import types_pb2
from gateway.inbox.admin import AdminClient

log = logging.getLogger("capgate.inbox")

Approval = types_pb2.Approval
PENDING: Final = types_pb2.APPROVAL_STATUS_PENDING
HISTORY: Final = (
    types_pb2.APPROVAL_STATUS_APPROVED,
    types_pb2.APPROVAL_STATUS_REJECTED,
    types_pb2.APPROVAL_STATUS_EXPIRED,
    types_pb2.APPROVAL_STATUS_CONSUMED,
    types_pb2.APPROVAL_STATUS_EXECUTED,
)
_RANK: Final = {
    PENDING: 0,
    types_pb2.APPROVAL_STATUS_APPROVED: 1,
    types_pb2.APPROVAL_STATUS_REJECTED: 1,
    types_pb2.APPROVAL_STATUS_EXPIRED: 1,
    types_pb2.APPROVAL_STATUS_CONSUMED: 2,
    types_pb2.APPROVAL_STATUS_EXECUTED: 3,
}
MAX_PAGES: Final = 20  # per status group and sync: bounds start-up work on a huge history


def _seconds(stamp: Any) -> float:
    return float(stamp.seconds + stamp.nanos / 1e9)


class ApprovalBook:
    def __init__(
        self,
        client: AdminClient,
        *,
        history_limit: int = 200,
        relist_s: float = 60.0,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        clock: Callable[[], float] = time.time,
        configured_self_approval: bool | None = None,
    ) -> None:
        self._client = client
        # The deprecated inbox setting reject_self_approval, if set: only compared with what
        # the gateway says (each approval carries it), a difference logged once per value.
        self._configured_self_approval = configured_self_approval
        self._warned_self_approval: set[bool] = set()
        self._history_limit = history_limit
        self._relist_s = relist_s
        self._sleep = sleep
        self._clock = clock
        self._items: dict[str, Approval] = {}
        self._changed: dict[str, int] = {}  # approval id -> version of its last change
        self._event = asyncio.Event()
        self.version = 0
        self.live = False  # the watch stream is connected
        self.synced_at: float | None = None
        # Whether the admin listener allow-lists this inbox (on_behalf_of); None until the
        # first contact answered it.
        self.acts_for_humans: bool | None = None

    # -- reading ---------------------------------------------------------------------------

    def get(self, approval_id: str) -> Approval | None:
        return self._items.get(approval_id)

    def pending(self) -> list[Approval]:
        """Pending approvals, the soonest to expire first."""
        found = [a for a in self._items.values() if a.status == PENDING]
        return sorted(found, key=lambda a: (_seconds(a.expires_at), a.id))

    def history(self) -> list[Approval]:
        """Decided, expired and executed approvals, the latest first."""
        found = [a for a in self._items.values() if a.status != PENDING]
        return sorted(found, key=self._decided_key, reverse=True)

    def changed_since(self, version: int) -> list[Approval]:
        return [self._items[i] for i, v in self._changed.items() if v > version]

    async def wait_change(self, since: int, timeout_s: float) -> int:
        """The current version once it is past `since`, or after `timeout_s` regardless."""
        if self.version <= since:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._event.wait(), timeout_s)
        return self.version

    # -- writing ---------------------------------------------------------------------------

    def merge(self, approval: Approval) -> bool:
        """Take `approval` unless the book already holds the same or a later state."""
        self._compare_self_approval(approval.self_approval_refused)
        old = self._items.get(approval.id)
        if old is not None and (old == approval or _RANK[old.status] > _RANK[approval.status]):
            return False
        self._items[approval.id] = approval
        self._bump(approval.id)
        self._trim()
        return True

    def _compare_self_approval(self, refused: bool) -> None:
        configured = self._configured_self_approval
        if configured is None or refused == configured or refused in self._warned_self_approval:
            return
        self._warned_self_approval.add(refused)
        log.warning(
            "inbox: reject_self_approval is %s in the inbox's config but the gateway %s "
            "self-approval; the pages follow the gateway (the inbox setting is deprecated: "
            "remove it)",
            str(configured).lower(),
            "refuses" if refused else "allows",
        )

    def _bump(self, approval_id: str) -> None:
        self.version += 1
        self._changed[approval_id] = self.version
        event, self._event = self._event, asyncio.Event()
        event.set()  # wakes every waiting SSE stream once

    @staticmethod
    def _decided_key(a: Approval) -> tuple[float, str]:
        decided = _seconds(a.decided_at) if a.HasField("decided_at") else 0.0
        return (decided or _seconds(a.created_at), a.id)

    def _trim(self) -> None:
        decided = self.history()
        for old in decided[self._history_limit :]:
            del self._items[old.id]
            self._changed.pop(old.id, None)

    async def _list_all(self, statuses: tuple[Any, ...]) -> list[Approval]:
        out: list[Approval] = []
        token = ""
        for _ in range(MAX_PAGES):
            reply = await self._client.list(statuses, page_token=token)
            if reply.HasField("error"):
                raise RuntimeError(f"ListApprovals refused: {reply.error.message}")
            out.extend(reply.approvals)
            token = reply.next_page_token
            if not token:
                break
        return out

    async def sync(self) -> None:
        """List pending and recent history; drop pending entries the listing no longer has
        (unless the stream updated them meanwhile)."""
        started = self.version
        pending = await self._list_all((PENDING,))
        history = await self._list_all(HISTORY)
        for approval in [*history, *pending]:
            self.merge(approval)
        listed = {a.id for a in pending}
        for stale in [a for a in self.pending() if a.id not in listed]:
            if self._changed.get(stale.id, 0) <= started:
                del self._items[stale.id]
                self._bump(stale.id)
        self.synced_at = self._clock()

    # -- running ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Watch forever: (re)connect, list, apply events; back off on failures."""
        after, backoff = "", 0.5
        relist = asyncio.get_running_loop().create_task(self._relist_loop())
        try:
            while True:
                call = self._client.watch(after)  # started before listing: nothing falls between
                try:
                    await self.sync()
                    if self.acts_for_humans is None:
                        await self._check_allow_list()
                    self.live, backoff = True, 0.5
                    async for event in call:
                        after = event.event_id
                        self.merge(event.approval)
                except grpc.aio.AioRpcError as exc:
                    if exc.code() == grpc.StatusCode.OUT_OF_RANGE:
                        after = ""  # the position was trimmed: the next sync re-lists
                    log.warning("inbox: approval stream interrupted: %s", exc.code().name)
                except RuntimeError as exc:
                    log.warning("inbox: %s", exc)
                finally:
                    self.live = False
                    call.cancel()
                await self._sleep(backoff)
                backoff = min(backoff * 2, 10.0)
        finally:
            relist.cancel()

    async def _check_allow_list(self) -> None:
        """At the first contact, once: an admin listener that does not allow-list this inbox
        in its `on_behalf_of` shows it only what the inbox identity itself may decide (most
        often nothing) and refuses every decision made here. The inbox config does not say
        what the gateway's does, so this is found here, not at start, and said loudly."""
        self.acts_for_humans = await self._client.acts_for_humans()
        if not self.acts_for_humans:
            log.error(
                "inbox: the gateway's admin listener does not allow-list this inbox "
                "(%s) in its on_behalf_of: approvers will see only what that identity may "
                "decide itself (most often nothing: 'Nothing is waiting for you') and every "
                "decision made here is refused (FORBIDDEN). Add it to that listener's "
                "on_behalf_of (docs/inbox.md; a listener change takes a gateway restart)",
                self._client.identity(),
            )

    async def _relist_loop(self) -> None:
        while True:
            await self._sleep(self._relist_s)
            if self.live:
                with contextlib.suppress(grpc.aio.AioRpcError, RuntimeError):
                    await self.sync()
