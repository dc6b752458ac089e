"""The approval store on Redis: stage 8 records, Resume consumes (DESIGN §7, §12).

Each state transition is one Lua script on the record's own key (one Cluster slot), with `now`
passed in. The global indexes (pending by expiry, every id, per capability, per requester) and
the event stream are separate keys updated after the transition by whichever call made it, with
idempotent commands; `reconcile()` rebuilds them from the records. Redis being unreachable is
always `CapabilityError(APPROVAL_UNAVAILABLE)`, which is retryable.

Invariants: SI-4 (no self-approval, checked on decide and again on consume), SI-5 (decide binds
the hash the approver saw; `verify_input` re-hashes the stored input), SI-8 (another
requester's or surface's approval answers exactly like an unknown id), SI-12 (only one consume
of an approved record succeeds; a record left `consumed` is never consumed again).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import dataclass, replace
from typing import Any, Final

import orjson

from gateway.config.settings import ApprovalSettings
from gateway.errors import CapabilityError, Code
from gateway.model import Actor
from gateway.state.approvals import feed, listing, upkeep
from gateway.state.approvals.events import ApprovalEventRecord, EventLog, WatchGap
from gateway.state.approvals.failures import ApprovalConsumed, available, not_found
from gateway.state.approvals.keys import Keys, valid_id
from gateway.state.approvals.records import (
    ApprovalRecord,
    Status,
    actor_json,
    from_flat,
    from_hash,
    to_hash,
)
from gateway.state.approvals.records import verify_input as _verify_input
from gateway.state.approvals.scripts import ALL as SCRIPTS
from gateway.state.connections import RedisClient
from gateway.values.canonical import input_hash as _input_hash

__all__ = ["ApprovalConsumed", "EditedInput", "RedisApprovalStore", "WatchGap"]

DEFAULT_EVENTS_MAXLEN = 10_000


# Events after which a record is no longer pending (its pending indexes are cleared).
_LEAVES_PENDING: Final = frozenset({"approved", "rejected", "expired"})
_DISTINCT_ROLES: Final = "DISTINCT_ROLES"


def _flag(value: Any) -> bool:
    return bytes(value) == b"1"


@dataclass(frozen=True, slots=True)
class EditedInput:
    """An approver's changed input (approve with edits): the validated value and its hash."""

    input: Any
    input_hash: str


def _roles_missing(roles: list[str]) -> CapabilityError:
    """A vote that cannot help cover `distinct_roles`: counted nothing (docs/approvals.md)."""
    named = ", ".join(roles)
    return CapabilityError(
        Code.FORBIDDEN,
        message=f"This approval still needs approvers holding: {named}.",
        reason=f"vote cannot cover distinct roles (missing {named})",
    )


class RedisApprovalStore:
    """Approval records, their indexes and events in one Redis (standalone, Sentinel, Cluster)."""

    def __init__(
        self,
        redis: RedisClient,
        *,
        prefix: str = "capgate",
        settings: ApprovalSettings,
        clock: Callable[[], float],
        events_maxlen: int = DEFAULT_EVENTS_MAXLEN,
        on_transition: Callable[[str, ApprovalRecord], None] | None = None,
    ) -> None:
        self._redis = redis
        # Called once per transition this process made (audit, metrics): event type, record.
        self._on_transition = on_transition
        self._keys = Keys(prefix)
        self._settings = settings
        self._clock = clock
        self._scripts = {name: redis.register_script(src) for name, src in SCRIPTS.items()}
        # The stream lives `retention_s` past its newest event: its events name records that
        # are gone by then (a reader resuming after that gets WatchGap and re-lists).
        self._events = EventLog(
            redis, self._keys.events, events_maxlen, ttl_ms=math.ceil(settings.retention_s * 1000)
        )

    @property
    def keys(self) -> Keys:
        return self._keys

    @property
    def settings(self) -> ApprovalSettings:
        return self._settings

    def now(self) -> float:
        """The store's clock (what DECIDE is given as `now`): when escalations are due."""
        return self._clock()

    async def _run(self, script: str, key: str, *args: Any) -> list[Any]:
        # Exactly one key per script call: the one-slot rule is enforced by this signature.
        reply: list[Any] = await self._scripts[script](keys=[key], args=list(args))
        return reply

    # -- creation and reads -------------------------------------------------------------------

    async def create(self, record: ApprovalRecord) -> ApprovalRecord:
        """Store a new pending approval (stage 8) and publish `requested`.

        Refuses anonymous requesters (UNAUTHENTICATED: an approval must be resumable by one
        identity, DESIGN §12) and a requester already holding `max_pending_per_actor` pending
        approvals (APPROVAL_LIMIT_EXCEEDED). Without approver roles the default role applies:
        never "anyone may approve".
        """
        if record.requester.anonymous:
            raise CapabilityError(Code.UNAUTHENTICATED, reason="anonymous approval request")
        if not valid_id(record.id):
            raise ValueError("approval ids are 1-128 characters of [A-Za-z0-9_-]")
        now = self._clock()
        if not record.expires_at > now:
            raise ValueError("an approval must expire in the future")
        record = replace(
            record,
            approver_roles=record.approver_roles or (self._settings.default_approver_role,),
            status=Status.PENDING,
            decided_at=None,
            decided_by=None,
            decided_via=None,
            resumed_execution_id="",
            outcome_envelope=None,
            outcome_code=None,
            # Quorum is at least one approver per distinct role; nobody has voted, nothing
            # has been escalated yet.
            quorum=max(record.quorum, len(record.distinct_roles), 1),
            votes=(),
            escalated_at=None,
        )
        ttl_ms = math.ceil((record.expires_at - now + self._settings.retention_s) * 1000)
        fields = [item for pair in to_hash(record).items() for item in pair]
        with available():
            admitted = await self._scripts["reserve"](
                keys=[self._keys.actor(record.requester.identity)],
                args=[
                    now,
                    self._settings.max_pending_per_actor,
                    record.id,
                    record.expires_at,
                    ttl_ms,
                ],
            )
            if not admitted:
                raise CapabilityError(Code.APPROVAL_LIMIT_EXCEEDED, reason="pending cap reached")
            reply = await self._run("create", self._keys.record(record.id), now, ttl_ms, *fields)
            created = bytes(reply[0]) == b"OK"
            if not created:
                existing = from_flat(reply[2:])
                # A retry after a lost reply finds its own record; anything else is a collision
                # of random ids, which is a bug of the id generator.
                if (existing.requesting_execution_id, existing.input_hash) != (
                    record.requesting_execution_id,
                    record.input_hash,
                ):
                    raise CapabilityError(Code.APPROVAL_UNAVAILABLE, reason="approval id reused")
                record = existing
            await self._after(record, "requested" if created else None, created=ttl_ms)
        return record

    async def get(self, approval_id: str) -> ApprovalRecord | None:
        """The record, or None; a live record past its expiry is marked `expired` (once)."""
        if not valid_id(approval_id):
            return None
        with available():
            raw = await self._redis.hgetall(self._keys.record(approval_id))
        if not raw:
            return None
        record = from_hash(raw)
        return await self._expire_if_due(record)

    async def get_own(
        self, approval_id: str, *, requester: Actor, surface: str
    ) -> ApprovalRecord | None:
        """The record when it is `requester`'s (issuer, id) on `surface`, else None (SI-8).

        Ownership is compared first, inside Redis (`scripts.OWNED`): another requester's or
        surface's record costs what an unknown id costs — one script call, one HMGET, an empty
        reply, no record read or parsed. Only the owner's record is read (in the same round
        trip) and, like `get`, marked `expired` when it is past its expiry.
        """
        if not valid_id(approval_id):
            return None
        with available():
            reply = await self._run(
                "owned", self._keys.record(approval_id), requester.issuer, requester.id, surface
            )
        if not reply:
            return None
        return await self._expire_if_due(from_flat(reply))

    async def get_many(self, approval_ids: Collection[str]) -> dict[str, ApprovalRecord]:
        """Records by id (missing ids are absent), with the same lazy expiry as `get`."""
        ids = [i for i in dict.fromkeys(approval_ids) if valid_id(i)]
        if not ids:
            return {}
        with available():
            pipe = self._redis.pipeline(transaction=False)
            for approval_id in ids:
                pipe.hgetall(self._keys.record(approval_id))
            raws = await pipe.execute()
        out: dict[str, ApprovalRecord] = {}
        for approval_id, raw in zip(ids, raws, strict=True):
            if raw:
                out[approval_id] = await self._expire_if_due(from_hash(raw))
        return out

    @staticmethod
    def verify_input(record: ApprovalRecord) -> bool:
        """SI-5: True when the stored input still hashes to the approved `input_hash`."""
        return _verify_input(record)

    async def _expire_if_due(self, record: ApprovalRecord) -> ApprovalRecord:
        now = self._clock()
        if not record.expired_at(now):
            return record
        with available():
            reply = await self._run("expire", self._keys.record(record.id), now)
            if bytes(reply[0]) != b"OK":
                return record  # gone meanwhile (retention passed): report what we read
            expired = from_flat(reply[2:])
            if _flag(reply[1]):
                await self._left_pending(expired, "expired")
        return expired

    async def _after(
        self,
        record: ApprovalRecord,
        event: str | None,
        *,
        created: int = 0,
        left_pending: bool = False,
    ) -> None:
        """Index updates and the event of one transition (non-atomic). `created` is a new
        record's TTL in ms: its indexes are written, their TTLs extended to it."""
        pipe = self._redis.pipeline(transaction=False)
        indexes = (
            upkeep.queue_created(pipe, self._keys, record, retention_s=self._settings.retention_s)
            if created
            else []
        )
        if left_pending:
            upkeep.queue_left_pending(pipe, self._keys, record)
        if event:
            self._events.queue(pipe, event, record.id)
        if created or left_pending or event:
            await pipe.execute()
        if indexes:
            await upkeep.extend_ttls(self._scripts["extend"], indexes, created)
        if event and self._on_transition is not None:
            self._on_transition(event, record)

    async def _left_pending(self, record: ApprovalRecord, event: str | None) -> None:
        await self._after(record, event, left_pending=True)

    # -- transitions -------------------------------------------------------------------------

    async def decide(
        self,
        approval_id: str,
        *,
        approve: bool,
        approver: Actor,
        via: Actor | None,
        note: str,
        input_hash: str,
        edit: EditedInput | None = None,
    ) -> ApprovalRecord:
        """One approver's verdict on a pending approval, atomically; executes nothing.

        Errors, in this order: APPROVAL_NOT_FOUND; FORBIDDEN (the approver holds neither every
        approver role nor, once escalated, every escalation role); APPROVAL_SELF_APPROVAL
        (SI-4); APPROVAL_EXPIRED; APPROVAL_ALREADY_DECIDED; APPROVAL_INPUT_MISMATCH (SI-5:
        `input_hash` is not the stored one — also when another approver edited it meanwhile;
        a rejection may pass "" to reject whatever is pending); FORBIDDEN naming the roles
        still missing (a vote that cannot help cover `distinct_roles` within the quorum).

        One rejection rejects. An approval adds the approver's vote (distinct (issuer, id));
        the vote that makes the quorum approves (`decided_by` is its approver), any earlier
        one publishes `voted`. The same approver repeating a verdict gets the record back (a
        retry after a lost reply, or a second vote: counted once), without an event.

        `edit` (approvals only): after the same checks, the input becomes `edit.input`, the
        requester's original is kept (from the first edit), the votes are reset and this
        approver's is counted: publishes `edited`, and `approved` when that completes it.
        """
        if not valid_id(approval_id):
            raise not_found()
        if approver.anonymous:
            raise CapabilityError(Code.FORBIDDEN, reason="anonymous approver")
        if edit is not None and not approve:
            raise ValueError("only an approval may carry an edited input")
        if edit is not None and _input_hash(edit.input) != edit.input_hash:
            raise ValueError("the edited input does not hash to its input_hash")
        verdict = Status.APPROVED if approve else Status.REJECTED
        args = [
            self._clock(),
            verdict.value,
            approver.issuer,
            approver.id,
            actor_json(approver),
            b"" if via is None else actor_json(via),
            note,
            input_hash,
            "1" if self._settings.reject_self_approval else "0",
            b"" if edit is None else orjson.dumps(edit.input),
            "" if edit is None else edit.input_hash,
            *approver.roles,
        ]
        with available():
            reply = await self._run("decide", self._keys.record(approval_id), *args)
            code = bytes(reply[0]).decode()
            events = [e for e in bytes(reply[1]).decode().split(",") if e]
            if code == _DISTINCT_ROLES:
                raise _roles_missing([bytes(r).decode() for r in reply[2:]])
            record = from_flat(reply[2:]) if events else None
            for event in events:
                assert record is not None
                await self._published(record, event)
            if code != "OK":
                raise CapabilityError(Code(code), reason=f"decide refused: {code}")
            return record if record is not None else from_flat(reply[2:])

    async def _published(self, record: ApprovalRecord, event: str) -> None:
        if event in _LEAVES_PENDING:
            await self._left_pending(record, event)
        else:
            if event == "escalated":
                await upkeep.drop_from_escalation(self._redis, self._keys, record.id)
            await self._after(record, event)

    async def consume(
        self, approval_id: str, *, requester: Actor, surface: str, execution_id: str
    ) -> ApprovalRecord:
        """approved → consumed, at most once (SI-12), for Resume.

        Checks in seed 001's order: unknown id, another requester (issuer, id) or another
        surface → APPROVAL_NOT_FOUND (SI-8); then, a pending or approved record past its expiry
        being expired first (ADR 0006), pending → APPROVAL_PENDING; rejected →
        APPROVAL_REJECTED; expired → APPROVAL_EXPIRED; consumed or
        executed → `ApprovalConsumed` carrying the record; decided by the requester →
        APPROVAL_SELF_APPROVAL (SI-4). A retry by the execution that consumed it gets the
        record back. Re-hashing the input (SI-5) is the caller's: see `verify_input`.
        """
        if not valid_id(approval_id):
            raise not_found()
        args = [
            self._clock(),
            requester.issuer,
            requester.id,
            surface,
            execution_id,
            "1" if self._settings.reject_self_approval else "0",
        ]
        with available():
            reply = await self._run("consume", self._keys.record(approval_id), *args)
            code, changed = bytes(reply[0]).decode(), _flag(reply[1])
            if code == Code.APPROVAL_EXPIRED and changed:
                await self._left_pending(from_flat(reply[2:]), "expired")
            if code == Code.APPROVAL_CONSUMED:
                raise ApprovalConsumed(
                    Code.APPROVAL_CONSUMED, reason="already consumed", record=from_flat(reply[2:])
                )
            if code == Code.APPROVAL_NOT_FOUND:
                raise not_found()
            if code != "OK":
                raise CapabilityError(Code(code), reason=f"resume refused: {code}")
            record = from_flat(reply[2:])
            if changed:
                await self._after(record, "consumed")
        return record

    async def finish(
        self,
        approval_id: str,
        *,
        envelope: bytes,
        outcome_code: str | None,
        resumed_execution_id: str,
    ) -> ApprovalRecord:
        """consumed → executed with the stored envelope; repeating it changes nothing.

        Only the execution that consumed the record may finish it (else APPROVAL_CONSUMED);
        a record whose finish never arrives stays `consumed` — outcome UNKNOWN, never re-run.
        """
        if not valid_id(approval_id):
            raise not_found()
        with available():
            reply = await self._run(
                "finish",
                self._keys.record(approval_id),
                self._clock(),
                resumed_execution_id,
                envelope,
                outcome_code or "",
            )
            code, changed = bytes(reply[0]).decode(), _flag(reply[1])
            if code == Code.APPROVAL_NOT_FOUND:
                raise not_found()
            if code != "OK":
                raise CapabilityError(Code(code), reason="finish by another execution")
            record = from_flat(reply[2:])
            if changed:
                await self._after(record, "executed")
        return record

    async def release(self, approval_id: str, *, resumed_execution_id: str) -> ApprovalRecord:
        """consumed → approved again, for a resumed call that never reached the upstream for a
        reason other than governance (the pipeline decides which: docs/approvals.md).

        Only the execution that consumed the record may release it, and only while it is
        `consumed` (else APPROVAL_CONSUMED: finished, or taken by another execution); the next
        Resume consumes it again at most once (SI-12). Publishes `released`.
        """
        if not valid_id(approval_id):
            raise not_found()
        with available():
            reply = await self._run(
                "release", self._keys.record(approval_id), self._clock(), resumed_execution_id
            )
            code = bytes(reply[0]).decode()
            if code == Code.APPROVAL_NOT_FOUND:
                raise not_found()
            if code != "OK":
                raise CapabilityError(Code(code), reason="release by another execution")
            record = from_flat(reply[2:])
            await self._after(record, "released")
        return record

    # -- listing, events, upkeep -------------------------------------------------------------

    async def withdraw(self, record: ApprovalRecord) -> bool:
        """Delete a pending record its requester was never told of (the requesting execution
        ended while storing it); only that execution's, only while pending. Its indexes are
        cleared, also when the record was never stored (a reservation whose reply was lost);
        True when this call deleted a record."""
        with available():
            reply = await self._run(
                "withdraw",
                self._keys.record(record.id),
                self._clock(),
                record.requesting_execution_id,
            )
            outcome = bytes(reply[0])
            if outcome not in (b"OK", b"GONE"):
                return False  # decided meanwhile, or another execution's: it stays
            # Deleted now, or never stored (the reservation in the indexes was): clear them.
            await self._left_pending(record, None)
        return outcome == b"OK"

    async def list(
        self,
        *,
        statuses: Collection[Status | str] = (Status.PENDING,),
        capability_id: str = "",
        requester_id: str = "",
        page_size: int = listing.DEFAULT_PAGE,
        page_token: str = "",
        visible: Callable[[ApprovalRecord], bool] | None = None,
    ) -> tuple[list[ApprovalRecord], str]:
        """One page of records and the next page token ("" at the end).

        Pending-only listings come in expiry order, others in creation order. `visible`
        filters before paging, so pages hold only what the caller may see; a page can be
        short (each call examines a bounded number of ids) while the token is non-empty.
        A token from other filters raises ValueError.
        """
        query = listing.Query(
            statuses=frozenset(Status(s) for s in statuses) or frozenset({Status.PENDING}),
            capability_id=capability_id,
            requester_id=requester_id,
            page_size=page_size,
            page_token=page_token,
        )
        with available():
            return await listing.page(self._redis, self._keys, query, self.get_many, visible)

    def watch(self, after_event_id: str | None = None) -> AsyncIterator[ApprovalEventRecord]:
        """Events after `after_event_id` (None: only new ones), forever.

        Raises WatchGap when events after that id were trimmed or the id is unknown to the
        stream, ValueError for a malformed id, APPROVAL_UNAVAILABLE when Redis is down.
        """
        return feed.watch(self._events, after_event_id, self.get_many)

    async def wait(self, approval_id: str, timeout_s: float) -> ApprovalRecord | None:
        """Long-poll: the record once it leaves pending, or as it is when `timeout_s` ends
        (None for an unknown id). The wait also ends at the approval's expiry."""
        return await feed.wait(self._events, approval_id, timeout_s, self.get, self._clock)

    async def expire_sweep(self, now: float | None = None) -> int:
        """Mark due pending records expired (with events); returns how many it expired."""
        when = self._clock() if now is None else now
        with available():
            due = await upkeep.due_pending(self._redis, self._keys, when)
            expired = 0
            for approval_id in due:
                reply = await self._run("expire", self._keys.record(approval_id), when)
                if bytes(reply[0]) != b"OK":
                    await upkeep.drop_from_pending(self._redis, self._keys, approval_id)
                    continue
                record = from_flat(reply[2:])
                if _flag(reply[1]):
                    await self._left_pending(record, "expired")
                    expired += 1
                elif record.status != Status.PENDING:
                    await self._left_pending(record, None)
            await upkeep.retire_due(self._redis, self._keys, when)
        return expired

    async def escalate_sweep(self, now: float | None = None) -> int:
        """Escalate due pending records (docs/approvals.md "Escalation"): each once across
        every replica sweeping, with the `escalated` event; returns how many this call did."""
        when = self._clock() if now is None else now
        escalated = 0
        with available():
            for approval_id in await upkeep.due_escalations(self._redis, self._keys, when):
                reply = await self._run("escalate", self._keys.record(approval_id), when)
                if bytes(reply[0]) == b"OK" and _flag(reply[1]):
                    escalated += 1
                    await self._published(from_flat(reply[2:]), "escalated")
                else:  # gone, decided, expired or escalated by another caller: not due again
                    await upkeep.drop_from_escalation(self._redis, self._keys, approval_id)
        return escalated

    async def reconcile(self) -> upkeep.ReconcileReport:
        """Rebuild every index from a SCAN of the records, with TTLs that outlive them (the
        gateway runs it at start-up and every `gateway.process.serve.RECONCILE_EVERY_S`)."""
        with available():
            return await upkeep.reconcile(
                self._redis,
                self._keys,
                self.get_many,
                extend=self._scripts["extend"],
                retention_s=self._settings.retention_s,
                now=self._clock(),
            )
