"""Redis key layout of the approval store (DESIGN §7; documented in docs/approvals.md).

Hash tags decide the Redis Cluster slot: each record is alone in its slot (`{apr:<id>}`), so a
transition script touches one key; the global indexes share the `{apr-idx}` slot and the event
stream has its own (`{apr-events}`).

    <prefix>:{apr:<id>}                     hash    the record; TTL = expiry + retention
    <prefix>:{apr-idx}:pending              zset    pending ids by expires_at
    <prefix>:{apr-idx}:all                  zset    every id by created_at
    <prefix>:{apr-idx}:cap:<capability>     zset    ids of one capability by created_at
    <prefix>:{apr-idx}:actor:<digest>       zset    one requester's pending ids by expires_at
    <prefix>:{apr-idx}:retire               zset    "<id> <capability>" by the record's end
    <prefix>:{apr-idx}:escalate             zset    pending ids not yet escalated by escalate_at
    <prefix>:{apr-events}                   stream  approval events (capped, MAXLEN ~)

Every index key carries a TTL at least as long as its longest-lived record's (extended, never
shortened, on each write), and each entry leaves its index when its record does (docs/approvals.md).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Final

_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
_PREFIX = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_RECORD_MIDDLE: Final = ":{apr:"


def valid_id(approval_id: str) -> bool:
    """Approval ids are URL-safe tokens; anything else (braces, globs) is never a key."""
    return _ID.fullmatch(approval_id) is not None


@dataclass(frozen=True, slots=True)
class Keys:
    prefix: str

    def __post_init__(self) -> None:
        # A brace in the prefix would move the hash tag and break the one-slot rule.
        if _PREFIX.fullmatch(self.prefix) is None:
            raise ValueError("redis key prefix must be 1-64 characters of [A-Za-z0-9_.:-]")

    def record(self, approval_id: str) -> str:
        return f"{self.prefix}{_RECORD_MIDDLE}{approval_id}}}"

    @property
    def record_pattern(self) -> str:
        return f"{self.prefix}{_RECORD_MIDDLE}*}}"

    def id_of(self, record_key: str) -> str:
        return record_key[len(self.prefix) + len(_RECORD_MIDDLE) : -1]

    @property
    def pending(self) -> str:
        return f"{self.prefix}:{{apr-idx}}:pending"

    @property
    def all(self) -> str:
        return f"{self.prefix}:{{apr-idx}}:all"

    def capability(self, capability_id: str) -> str:
        return f"{self.prefix}:{{apr-idx}}:cap:{capability_id}"

    @property
    def capability_pattern(self) -> str:
        return f"{self.prefix}:{{apr-idx}}:cap:*"

    def actor(self, identity: tuple[str, str]) -> str:
        # Digest, not the raw pair: issuers are URLs and ids may hold any character.
        issuer, actor_id = identity
        digest = hashlib.sha256(f"{issuer}\x00{actor_id}".encode()).hexdigest()[:32]
        return f"{self.prefix}:{{apr-idx}}:actor:{digest}"

    @property
    def retire(self) -> str:
        return f"{self.prefix}:{{apr-idx}}:retire"

    @property
    def escalate(self) -> str:
        return f"{self.prefix}:{{apr-idx}}:escalate"

    @property
    def actor_pattern(self) -> str:
        return f"{self.prefix}:{{apr-idx}}:actor:*"

    @property
    def events(self) -> str:
        return f"{self.prefix}:{{apr-events}}"
