"""Standing grants on Redis: the record, its indexes, and the atomic use (ADR 0038).

A grant is a standing approval: calls it covers that policies send to approval run without a
new approval (docs/approvals.md "Grants"). Each grant is one Redis hash in its own slot
(`{grt:<id>}`) with its use receipts beside it; every change of it — a use taken or given
back, a revocation, an expiry — is one Lua script on that slot (`grantscripts.py`) that reads
the status inside Redis, so no replica acts on a grant revoked a moment ago and the count and
total are never exceeded however many gateways share the store.

    <prefix>:{grt:<id>}                      hash    the grant; TTL = expiry + retention
    <prefix>:{grt:<id>}:rcpt:<execution id>  string  one use's amount, for its give-back; TTL =
                                                     the call's timeout + margin
    <prefix>:{grt-idx}:live                  zset    grants not revoked or expired, by expiry
                                                     (the `grants_max_active` cap)
    <prefix>:{grt-idx}:all                   zset    every grant by expiry (listing); kept
                                                     until expiry + retention
    <prefix>:{grt-idx}:m:<whom>:<what>       zset    grants for one (actor | role, capability |
                                                     tag) pair, by expiry (matching a call)
    <prefix>:{grt-idx}:spec                  hash    live grant id -> what matching reads (its
                                                     expressions, caps, approver roles, creator)

A call that needs approval finds its candidates in one round trip (`MATCH`: the pair indexes and
the specs, all in the `{grt-idx}` slot) and takes a use in one more; the replies are short.

Index entries past their score are pruned on each write, every key has a TTL at least as long as
its longest-lived entry's, and a record gone from Redis is dropped from an index when read.
Redis being unreachable is `CapabilityError(APPROVAL_UNAVAILABLE)`, as for approvals.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import hashlib
import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Final

import orjson

from gateway.config.settings import ApprovalSettings
from gateway.errors import CapabilityError, Code
from gateway.model import Actor
from gateway.state.approvals.failures import available
from gateway.state.approvals.grantscripts import ALL as SCRIPTS
from gateway.state.approvals.records import actor_from, actor_json
from gateway.state.connections import RedisClient, hot_script

__all__ = ["GrantRecord", "GrantSpec", "GrantStatus", "RedisGrantStore", "Taken"]

_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
MAX_CANDIDATES: Final = 32  # grants read per (whom, what) pair when matching one call
DEFAULT_PAGE: Final = 50
MAX_PAGE: Final = 500
_EXAMINE_FACTOR: Final = 10
_VOID_TTL_S: Final = 60.0  # how long a give-back that found no receipt blocks a late take


class GrantStatus(StrEnum):
    ACTIVE = "active"
    REVOKED = "revoked"
    EXHAUSTED = "exhausted"  # max_uses or max_total reached (active again if a use comes back)
    EXPIRED = "expired"


def valid_id(grant_id: str) -> bool:
    return _ID.fullmatch(grant_id) is not None


@dataclass(frozen=True, slots=True)
class GrantRecord:
    """One grant, mirroring `capgate.v1.Grant`. Exactly one of `actor` / `role` and one of
    `capability_id` / `tag` is set (the admin service checks it before `create`)."""

    id: str
    created_at: float
    expires_at: float
    created_by: Actor
    actor: Actor | None = None
    role: str = ""
    capability_id: str = ""
    tag: str = ""
    constraint: str = ""
    amount: str = ""
    max_uses: int = 0
    max_total: float = 0.0
    uses: int = 0
    total: float = 0.0
    status: GrantStatus = GrantStatus.ACTIVE
    created_via: Actor | None = None
    note: str = ""
    from_approval_id: str = ""
    approver_roles: tuple[str, ...] = ()
    revoked_at: float | None = None
    revoked_by: Actor | None = None
    revoked_via: Actor | None = None
    revoke_note: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", GrantStatus(self.status))

    @property
    def what(self) -> str:
        """The capability id or tag it covers, for events and logs."""
        return self.capability_id or self.tag

    def live_at(self, now: float) -> bool:
        return self.status == GrantStatus.ACTIVE and now <= self.expires_at


@dataclass(frozen=True, slots=True)
class GrantSpec:
    """What matching a call reads of a grant (its immutable part, kept beside the indexes):
    whether it is still live is decided by the take, inside Redis."""

    id: str
    expires_at: float
    capability_id: str
    tag: str
    constraint: str
    amount: str
    max_uses: int
    max_total: float
    approver_roles: tuple[str, ...]
    creator_id: str
    creator_issuer: str = ""
    created_at: float = 0.0

    @property
    def what(self) -> str:
        return self.capability_id or self.tag

    @property
    def creator(self) -> tuple[str, str]:
        """The creator's identity (issuer, id), as `Actor.identity` is."""
        return (self.creator_issuer, self.creator_id)


def spec_json(record: GrantRecord) -> bytes:
    return orjson.dumps(
        {
            "x": record.expires_at,
            "c": record.capability_id,
            "t": record.tag,
            "k": record.constraint,
            "a": record.amount,
            "mu": record.max_uses,
            "mt": record.max_total,
            "r": list(record.approver_roles),
            "by": record.created_by.id,
            "bi": record.created_by.issuer,
            "at": record.created_at,
        }
    )


def spec_from(grant_id: str, raw: bytes) -> GrantSpec:
    data = orjson.loads(raw)
    return GrantSpec(
        id=grant_id,
        expires_at=float(data["x"]),
        capability_id=data["c"],
        tag=data["t"],
        constraint=data["k"],
        amount=data["a"],
        max_uses=int(data["mu"]),
        max_total=float(data["mt"]),
        approver_roles=tuple(data["r"]),
        creator_id=data["by"],
        creator_issuer=data.get("bi", ""),
        created_at=float(data.get("at", 0.0)),
    )


@dataclass(frozen=True, slots=True)
class Taken:
    """A use taken: the grant's uses and total after it, and whether this use exhausted it
    (its event is owed)."""

    uses: int
    total: float
    exhausted: bool


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:32]


def whom_actor(identity: tuple[str, str]) -> str:
    return "a:" + _digest(*identity)


def whom_role(role: str) -> str:
    return "r:" + _digest(role)


def what_capability(capability_id: str) -> str:
    return "c:" + _digest(capability_id)


def what_tag(tag: str) -> str:
    return "t:" + _digest(tag)


@dataclass(frozen=True, slots=True)
class GrantKeys:
    prefix: str

    def record(self, grant_id: str) -> str:
        return f"{self.prefix}:{{grt:{grant_id}}}"

    def receipt(self, grant_id: str, execution_id: str) -> str:
        return f"{self.prefix}:{{grt:{grant_id}}}:rcpt:{execution_id}"

    @property
    def live(self) -> str:
        return f"{self.prefix}:{{grt-idx}}:live"

    @property
    def all(self) -> str:
        return f"{self.prefix}:{{grt-idx}}:all"

    def match(self, whom: str, what: str) -> str:
        return f"{self.prefix}:{{grt-idx}}:m:{whom}:{what}"

    @property
    def spec(self) -> str:
        return f"{self.prefix}:{{grt-idx}}:spec"

    def match_of(self, record: GrantRecord) -> str:
        whom = whom_actor(record.actor.identity) if record.actor else whom_role(record.role)
        what = (
            what_capability(record.capability_id) if record.capability_id else what_tag(record.tag)
        )
        return self.match(whom, what)


# -- the hash form -------------------------------------------------------------------------------


def _time(value: float) -> bytes:
    if not math.isfinite(value):
        raise ValueError("grant times must be finite")
    return repr(value).encode()


def _actor_or_empty(actor: Actor | None) -> bytes:
    return b"" if actor is None else actor_json(actor)


def to_hash(record: GrantRecord) -> dict[str, bytes]:
    return {
        "id": record.id.encode(),
        "status": str(record.status).encode(),
        "actor": _actor_or_empty(record.actor),
        "role": record.role.encode(),
        "capability_id": record.capability_id.encode(),
        "tag": record.tag.encode(),
        "constraint": record.constraint.encode(),
        "amount": record.amount.encode(),
        "max_uses": str(record.max_uses).encode(),
        "uses": str(record.uses).encode(),
        "max_total": repr(float(record.max_total)).encode(),
        "total": repr(float(record.total)).encode(),
        "created_at": _time(record.created_at),
        "expires_at": _time(record.expires_at),
        "created_by": actor_json(record.created_by),
        "created_via": _actor_or_empty(record.created_via),
        "note": record.note.encode(),
        "from_approval_id": record.from_approval_id.encode(),
        "approver_roles": orjson.dumps(list(record.approver_roles)),
        "revoked_at": b"" if record.revoked_at is None else _time(record.revoked_at),
        "revoked_by": _actor_or_empty(record.revoked_by),
        "revoked_via": _actor_or_empty(record.revoked_via),
        "revoke_note": record.revoke_note.encode(),
    }


def from_hash(raw: Mapping[bytes, bytes]) -> GrantRecord:
    def blob(name: str) -> bytes:
        value: bytes = raw.get(name.encode(), b"")
        return value

    def text(name: str) -> str:
        return blob(name).decode()

    def actor(name: str) -> Actor | None:
        return actor_from(blob(name)) if blob(name) else None

    created_by = actor("created_by")
    assert created_by is not None, "a grant without its creator"
    revoked_at = text("revoked_at")
    return GrantRecord(
        id=text("id"),
        status=GrantStatus(text("status")),
        actor=actor("actor"),
        role=text("role"),
        capability_id=text("capability_id"),
        tag=text("tag"),
        constraint=text("constraint"),
        amount=text("amount"),
        max_uses=int(text("max_uses") or 0),
        uses=int(text("uses") or 0),
        max_total=float(text("max_total") or 0),
        total=float(text("total") or 0),
        created_at=float(text("created_at")),
        expires_at=float(text("expires_at")),
        created_by=created_by,
        created_via=actor("created_via"),
        note=text("note"),
        from_approval_id=text("from_approval_id"),
        approver_roles=tuple(orjson.loads(blob("approver_roles") or b"[]")),
        revoked_at=float(revoked_at) if revoked_at else None,
        revoked_by=actor("revoked_by"),
        revoked_via=actor("revoked_via"),
        revoke_note=text("revoke_note"),
    )


def _from_flat(items: list[Any]) -> GrantRecord:
    return from_hash({bytes(items[i]): bytes(items[i + 1]) for i in range(0, len(items), 2)})


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _encode_token(score: float, member: str) -> str:
    return base64.urlsafe_b64encode(orjson.dumps([score, member])).decode().rstrip("=")


def _decode_token(token: str) -> tuple[float, str]:
    try:
        score, member = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (binascii.Error, ValueError, TypeError) as exc:
        raise ValueError("malformed page token") from exc
    if not isinstance(member, str) or not isinstance(score, int | float):
        raise ValueError("malformed page token")
    return float(score), member


# -- the store -----------------------------------------------------------------------------------


class RedisGrantStore:
    """Grants, their use receipts and indexes in one Redis (standalone, Sentinel, Cluster)."""

    def __init__(
        self,
        redis: RedisClient,
        *,
        prefix: str = "capgate",
        settings: ApprovalSettings,
        clock: Callable[[], float],
        on_expired: Callable[[GrantRecord], None] | None = None,
    ) -> None:
        self._redis = redis
        self._keys = GrantKeys(prefix)
        self._settings = settings
        self._clock = clock
        # Called once per expiry this process made (the `approval.grant_expired` event).
        self._on_expired = on_expired
        self._scripts = {name: hot_script(redis, src) for name, src in SCRIPTS.items()}

    @property
    def keys(self) -> GrantKeys:
        return self._keys

    @property
    def settings(self) -> ApprovalSettings:
        return self._settings

    async def _run(self, script: str, keys: list[str], *args: Any) -> Any:
        return await self._scripts[script](keys=keys, args=list(args))

    def _ttl_ms(self, until: float, now: float) -> int:
        return max(1, math.ceil((until - now) * 1000))

    # -- creation and reads ----------------------------------------------------------------

    async def create(self, record: GrantRecord) -> GrantRecord:
        """Store a new active grant; APPROVAL_LIMIT_EXCEEDED when `grants_max_active` grants are
        live already. The caller (the admin service) has checked who may create it and what."""
        if not valid_id(record.id):
            raise ValueError("grant ids are 1-128 characters of [A-Za-z0-9_-]")
        if (record.actor is None) == (not record.role) or (not record.capability_id) == (
            not record.tag
        ):
            raise ValueError("a grant names one actor or role and one capability or tag")
        now = self._clock()
        if not record.expires_at > now:
            raise ValueError("a grant must expire in the future")
        record = replace(
            record,
            status=GrantStatus.ACTIVE,
            uses=0,
            total=0.0,
            revoked_at=None,
            revoked_by=None,
            revoked_via=None,
            revoke_note="",
        )
        retention = self._settings.retention_s
        record_ttl = self._ttl_ms(record.expires_at + retention, now)
        fields = [item for pair in to_hash(record).items() for item in pair]
        with available():
            admitted = await self._run(
                "admit",
                [self._keys.live, self._keys.all, self._keys.match_of(record), self._keys.spec],
                now,
                self._settings.grants_max_active,
                record.id,
                record.expires_at,
                record_ttl,
                self._ttl_ms(record.expires_at, now),
                now - retention,
                spec_json(record),
            )
            if not admitted:
                raise CapabilityError(Code.APPROVAL_LIMIT_EXCEEDED, reason="live grant cap reached")
            reply = await self._run(
                "create", [self._keys.record(record.id)], now, record_ttl, *fields
            )
            if bytes(reply[0]) != b"OK":
                raise CapabilityError(Code.APPROVAL_UNAVAILABLE, reason="grant id reused")
        return record

    async def get(self, grant_id: str) -> GrantRecord | None:
        """The grant, or None; an active or exhausted grant past its expiry is marked
        `expired` by this read (once, with its event)."""
        if not valid_id(grant_id):
            return None
        with available():
            reply = await self._run("read", [self._keys.record(grant_id)], self._clock())
        if not reply:
            return None
        return await self._settled(reply)

    async def _settled(self, reply: list[Any]) -> GrantRecord:
        """The record of a script reply; when the script expired it, the expiry's follow-up."""
        record = _from_flat(reply[2:])
        if bytes(reply[1]) == b"1" and record.status == GrantStatus.EXPIRED:
            await self._retire(record)
            if self._on_expired is not None:
                self._on_expired(record)
        return record

    async def _retire(self, record: GrantRecord) -> None:
        keys = [self._keys.live, self._keys.match_of(record), self._keys.spec]
        await self._run("retire", keys, record.id)

    async def _load(self, ids: Collection[str]) -> dict[str, GrantRecord]:
        """Records by id (gone ones absent), in one pipeline; due ones expired like `get`."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return {}
        pipe = self._redis.pipeline(transaction=False)
        for grant_id in ids:
            pipe.hgetall(self._keys.record(grant_id))
        raws = await pipe.execute()
        now = self._clock()
        out: dict[str, GrantRecord] = {}
        for grant_id, raw in zip(ids, raws, strict=True):
            if not raw:
                continue
            record = from_hash(raw)
            if record.status in (GrantStatus.ACTIVE, GrantStatus.EXHAUSTED) and (
                now > record.expires_at
            ):
                again = await self.get(grant_id)
                if again is None:
                    continue
                record = again
            out[grant_id] = record
        return out

    async def list(
        self,
        *,
        statuses: Collection[GrantStatus | str] = (),
        capability_id: str = "",
        actor_id: str = "",
        page_size: int = DEFAULT_PAGE,
        page_token: str = "",
    ) -> tuple[list[GrantRecord], str]:
        """One page of grants by expiry (then id) and the next token ("" at the end).

        Filters: statuses (empty: all), the capability id (grants for it, not tag grants) and
        the actor id (grants for that actor, not role grants). Each call examines at most ten
        pages' worth of index entries, so a selective filter gives a short page and a token."""
        wanted = frozenset(GrantStatus(s) for s in statuses)
        size = min(page_size, MAX_PAGE) if page_size > 0 else DEFAULT_PAGE
        after = _decode_token(page_token) if page_token else None
        budget = size * _EXAMINE_FACTOR
        out: list[GrantRecord] = []
        examined = 0
        with available():
            low = "-inf" if after is None else repr(after[0])
            while True:
                rows: Any = await self._redis.zrangebyscore(
                    self._keys.all, low, "+inf", start=0, num=budget + 1, withscores=True
                )
                batch = [(float(s), _text(m)) for m, s in rows]
                batch = [row for row in batch if after is None or row > after]
                if not batch:
                    return out, ""
                records = await self._load([m for _, m in batch])
                gone = [m for _, m in batch if m not in records]
                if gone:
                    await self._redis.zrem(self._keys.all, *gone)
                for row in batch:
                    examined += 1
                    after = row
                    record = records.get(row[1])
                    if record is not None and (
                        (not wanted or record.status in wanted)
                        and (not capability_id or record.capability_id == capability_id)
                        and (not actor_id or (record.actor and record.actor.id == actor_id))
                    ):
                        out.append(record)
                    if len(out) >= size or examined >= budget:
                        return out, _encode_token(*row)
                if len(rows) <= budget:
                    return out, ""
                low = repr(after[0]) if after else "-inf"

    # -- transitions ------------------------------------------------------------------------

    async def revoke(
        self, grant_id: str, *, by: Actor, via: Actor | None, note: str
    ) -> GrantRecord:
        """active|exhausted → revoked, at once for every replica's next take.
        APPROVAL_NOT_FOUND for an unknown id, APPROVAL_ALREADY_DECIDED for a grant revoked or
        expired already."""
        if not valid_id(grant_id):
            raise CapabilityError(Code.APPROVAL_NOT_FOUND, reason="unknown grant")
        now = self._clock()
        with available():
            reply = await self._run(
                "revoke",
                [self._keys.record(grant_id)],
                now,
                actor_json(by),
                _actor_or_empty(via),
                note,
            )
            code = bytes(reply[0]).decode()
            if code == Code.APPROVAL_NOT_FOUND:
                raise CapabilityError(Code.APPROVAL_NOT_FOUND, reason="unknown grant")
            record = await self._settled(reply)
            if code != "OK":
                raise CapabilityError(Code(code), reason=f"grant is {record.status.value}")
            await self._retire(record)
        return record

    async def expire_sweep(self, now: float, *, limit: int = 500) -> int:
        """Expire live grants past their expiry (each event once, by whichever process expires
        it); returns how many this call expired."""
        with available():
            rows = await self._redis.zrangebyscore(
                self._keys.live, "-inf", f"({now!r}", start=0, num=limit
            )
            expired = 0
            for member in rows:
                grant_id = _text(member)
                reply = await self._run("read", [self._keys.record(grant_id)], now)
                if not reply:
                    await self._redis.zrem(self._keys.live, grant_id)
                    continue
                record = await self._settled(reply)
                if bytes(reply[1]) == b"1":
                    expired += 1
                elif record.status != GrantStatus.ACTIVE:
                    await self._retire(record)
        return expired

    # -- the call path ------------------------------------------------------------------------

    async def candidates(
        self, actor: Actor, capability_id: str, tags: Collection[str]
    ) -> builtins.list[GrantSpec]:
        """Grants whose whom and what match the call and whose expiry has not passed, earliest
        expiry first (then id), in one round trip; nothing is taken. A revoked or exhausted one
        may still be among them (revocation retires it from the indexes right after): the take
        refuses it, inside Redis."""
        now = self._clock()
        whoms = [whom_actor(actor.identity), *(whom_role(r) for r in dict.fromkeys(actor.roles))]
        whats = [what_capability(capability_id), *(what_tag(t) for t in dict.fromkeys(tags))]
        keys = [self._keys.spec, *(self._keys.match(w, x) for w in whoms for x in whats)]
        with available():
            reply: list[Any] = await self._run("match", keys, now, MAX_CANDIDATES)
        found = [spec_from(_text(reply[i]), bytes(reply[i + 1])) for i in range(0, len(reply), 2)]
        return sorted(found, key=lambda g: (g.expires_at, g.id))

    async def room(self, grant_id: str) -> tuple[str, int, float] | None:
        """(status, uses, total) of a grant as stored now, None when it is gone (Check's
        read-only look: whether a take would find room)."""
        with available():
            status, uses, total = await self._redis.hmget(
                self._keys.record(grant_id), ["status", "uses", "total"]
            )
        if status is None:
            return None
        return _text(status), int(uses or 0), float(total or 0)

    async def take(
        self, grant_id: str, *, execution_id: str, amount: float | None, receipt_ttl_s: float
    ) -> Taken | None:
        """Take one use (and `amount`) atomically; None when the grant cannot give it (revoked,
        expired, exhausted, or the amount does not fit). The receipt lets `give_back` return
        exactly this use, once, for `receipt_ttl_s`."""
        now = self._clock()
        with available():
            reply = await self._run(
                "take",
                [self._keys.record(grant_id), self._keys.receipt(grant_id, execution_id)],
                now,
                "" if amount is None else repr(float(amount)),
                self._ttl_ms(now + receipt_ttl_s, now),
            )
            code = bytes(reply[0])
            if code == b"EXPIRED":
                await self._settled(reply)
                return None
            if code != b"OK":
                return None
        return Taken(
            uses=int(reply[2]), total=float(reply[3] or 0), exhausted=bytes(reply[1]) == b"1"
        )

    async def give_back(self, grant_id: str, *, execution_id: str) -> bool:
        """Return the use `execution_id` took (uses - 1, total - its amount), once. Before the
        take arrived (its reply lost): the take is voided and counts nothing. True when a use
        came back."""
        now = self._clock()
        with available():
            done = await self._run(
                "give_back",
                [self._keys.record(grant_id), self._keys.receipt(grant_id, execution_id)],
                now,
                self._ttl_ms(now + _VOID_TTL_S, now),
            )
        return bool(done)
