"""Cache entries in Redis (docs/cache.md, ADR 0024).

Keys: `<prefix>:{cache:<capability id>}:e:<key id>:<sha256>` for an entry (the key id names the
sealing key, so gateways with different keys never overwrite each other's entries) and
`<prefix>:{cache:<capability id>}:index` for the capability's index (a sorted set of its entry
keys by expiry). The hash tag puts every key of one capability in one Cluster slot, so the
store script and the purge script touch one slot. The sha256 is over what the entry answers
for: the capability's digest, the snapshot revision, the scope and its key, the hash of the
validated input (JSON with sorted keys, ADR 0024's amendment) — a reload that changes the
config or the policies changes the revision, so old entries are never read again (they expire
by their TTL or are evicted).

Values are the validated, unredacted output (stage 13 redacts per request on a hit). They are
sealed with AES-256-GCM under the gateway's cache key, with the entry's Redis key as the
associated data: whoever can read Redis cannot read them, and whoever can write it cannot
forge an entry or move one to another actor's key (it fails to open, which is a miss).

Bounded: each entry by its TTL and the capability's `max_bytes`, each capability by
`cache.max_entries` (storing past it evicts the entries expiring first), each Redis command
by `cache.timeout`. Redis down, slow or refusing is a miss (lookup) or a skipped store, never
an error of the call.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from redis.exceptions import RedisError

from gateway.state.connections import (
    RedisClient,
    RedisUnavailable,
    hot_get,
    hot_script,
    mapped_errors,
)
from gateway.telemetry import metrics

log = logging.getLogger("capgate.cache")

_VERSION: Final = b"c1"
_NONCE: Final = 12

# KEYS: entry, index. ARGV: sealed value, ttl ms, now ms, max entries.
# Entries a capability holds past max_entries are evicted, those expiring first; entry keys
# share the index's hash tag (one slot), so the script may delete them on a Cluster too.
_STORE: Final = """
local ttl = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local kind = redis.call('TYPE', KEYS[2])['ok']
if kind ~= 'zset' and kind ~= 'none' then return -1 end  -- not our index: nothing is stored
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZADD', KEYS[2], now + ttl, KEYS[1])
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[4])
local evicted = 0
if over > 0 then
  local old = redis.call('ZPOPMIN', KEYS[2], over)
  for i = 1, #old, 2 do
    redis.call('DEL', old[i])
    evicted = evicted + 1
  end
end
if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)  -- last: an entry is never outside the index
return evicted
"""

# KEYS: index. Deletes every entry the index holds (at most max_entries) and the index.
_PURGE: Final = """
local keys = redis.call('ZRANGE', KEYS[1], 0, -1)
local gone = 0
for i = 1, #keys do gone = gone + redis.call('DEL', keys[i]) end
redis.call('DEL', KEYS[1])
return gone
"""

Lookup = Literal["hit", "miss", "unavailable", "unopened"]


@dataclass(frozen=True, slots=True)
class Found:
    result: Lookup
    value: bytes | None = None


def _refused(what: str, capability_id: str, exc: Exception) -> None:
    """Redis refused a cache command: logged by exception type only (a reply may quote a key
    or a value), and the call goes on as on a Redis outage."""
    log.warning("cache %s of %s refused by Redis (%s)", what, capability_id, type(exc).__name__)


def _discard(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: a late failure is not logged as never retrieved


def _wake(waiter: asyncio.Future[None], _: object) -> None:
    if not waiter.done():
        waiter.set_result(None)


def cache_key(secret: str) -> bytes:
    """The AES-256 key of a configured `cache.key`."""
    return hashlib.sha256(b"capgate-cache\x00" + secret.encode()).digest()


def key_id(key: bytes) -> str:
    """A short public digest naming a sealing key (part of every entry's Redis key)."""
    return hashlib.sha256(b"capgate-cache-key-id\x00" + key).hexdigest()[:12]


class ResultCache:
    """Get, store and purge one gateway's cache entries (one instance per process)."""

    def __init__(
        self,
        redis: RedisClient,
        *,
        prefix: str,
        key: bytes,
        timeout_s: float,
        max_entries: int,
        clock: Callable[[], float],
        random_bytes: Callable[[int], bytes] = os.urandom,
    ) -> None:
        self._redis = redis
        self._prefix = prefix
        self._aead = AESGCM(key)
        # Entries sealed under another key live under other Redis keys: two gateways with
        # different keys on one Redis never overwrite each other's entries.
        self._key_id = key_id(key)
        self._timeout_s = timeout_s
        self._max_entries = max_entries
        self._clock = clock
        self._random = random_bytes
        self._store = hot_script(redis, _STORE)
        self._get = hot_get(redis)
        self._purge = redis.register_script(_PURGE)

    def _tag(self, capability_id: str) -> str:
        return f"{self._prefix}:{{cache:{capability_id}}}"

    def entry_key(self, capability_id: str, parts: Sequence[str]) -> str:
        """The Redis key of one entry; `parts` is everything the entry answers for."""
        digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()
        return f"{self._tag(capability_id)}:e:{self._key_id}:{digest}"

    async def get(self, capability_id: str, key: str) -> Found:
        try:
            sealed = await self._bounded(self._get(key))
        except (RedisUnavailable, TimeoutError) as exc:
            log.debug("cache lookup of %s uncached: %s", capability_id, type(exc).__name__)
            return Found("unavailable")
        except RedisError as exc:  # a refusal (WRONGTYPE, NOPERM, ...): a miss all the same
            _refused("lookup", capability_id, exc)
            return Found("unavailable")
        if not isinstance(sealed, bytes):
            return Found("miss")
        value = self._open(key, sealed)
        if value is None:  # altered or moved: a miss, counted as `unopened`
            log.debug("cache entry of %s does not open under this gateway's key", capability_id)
            return Found("unopened")
        return Found("hit", value)

    async def put(self, capability_id: str, key: str, value: bytes, ttl_s: float) -> bool:
        """Store one entry; False when Redis could not take it (the call is not affected)."""
        sealed = self._seal(key, value)
        now_ms = int(self._clock() * 1000)
        ttl_ms = max(1, int(ttl_s * 1000))
        try:
            evicted = await self._bounded(
                self._store(
                    keys=[key, f"{self._tag(capability_id)}:index"],
                    args=[sealed, ttl_ms, now_ms, self._max_entries],
                )
            )
        except (RedisUnavailable, TimeoutError) as exc:
            log.debug("cache store of %s skipped: %s", capability_id, type(exc).__name__)
            return False
        except RedisError as exc:  # a refusal (WRONGTYPE, NOPERM, BUSY, a script error)
            _refused("store", capability_id, exc)
            return False
        if evicted == -1:  # the index key holds something else: the script stored nothing
            log.warning(
                "cache store of %s skipped: its index key is not a sorted set", capability_id
            )
            return False
        if isinstance(evicted, int) and evicted > 0:
            metrics.cache_evictions.add((capability_id,), float(evicted))
        return True

    async def _bounded(self, command: Awaitable[Any]) -> Any:
        """The command's answer, or TimeoutError after `timeout_s`. A late command is not
        cancelled: redis-py drops a connection whose command was cancelled, and under load
        that churn would slow every Redis user of the process. It finishes in the background
        (bounded by the client's 2 s operation timeout) and its answer is discarded."""
        task = asyncio.ensure_future(command)
        loop = task.get_loop()
        # A waiter woken by the command or the timer: what `asyncio.wait` does, without its
        # coroutine, sets and callback removal (two commands on every miss).
        waiter: asyncio.Future[None] = loop.create_future()
        wake = functools.partial(_wake, waiter)
        task.add_done_callback(wake)
        timer = loop.call_later(self._timeout_s, wake, None)
        try:
            await waiter
        except asyncio.CancelledError:  # the call was cancelled: the command finishes alone
            timer.cancel()
            task.add_done_callback(_discard)
            raise
        timer.cancel()
        if not task.done():
            task.add_done_callback(_discard)
            raise TimeoutError
        with mapped_errors():
            return task.result()

    async def purge(self, capability_id: str) -> int:
        """Delete every entry of a capability (all revisions); the number deleted. Raises
        `RedisUnavailable` (an admin call answers UNAVAILABLE, it is not a lookup)."""
        with mapped_errors():
            gone = await self._purge(keys=[f"{self._tag(capability_id)}:index"], args=[])
        return int(gone) if isinstance(gone, int) else 0

    def _seal(self, key: str, value: bytes) -> bytes:
        nonce = self._random(_NONCE)
        return _VERSION + nonce + self._aead.encrypt(nonce, value, key.encode())

    def _open(self, key: str, sealed: bytes) -> bytes | None:
        if not sealed.startswith(_VERSION) or len(sealed) < len(_VERSION) + _NONCE + 16:
            return None
        nonce = sealed[len(_VERSION) : len(_VERSION) + _NONCE]
        try:
            return self._aead.decrypt(nonce, sealed[len(_VERSION) + _NONCE :], key.encode())
        except InvalidTag:
            return None
