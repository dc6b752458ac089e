"""Whether a gateway reaches what its config names besides itself: Redis and the upstreams
(issue 27). `capgate serve` says at start, once, when its configured Redis does not answer,
and which features that affects; `capgate config check --connect` asks Redis and every
upstream once and says what cannot reach what. URLs are shown without their password."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, replace
from typing import Any, Final
from urllib.parse import urlsplit

from gateway.config.settings import Settings
from gateway.state.connections import connect
from gateway.upstream.spec import Upstream

__all__ = [
    "REACH_TIMEOUT_S",
    "Unreached",
    "public_url",
    "redis_features",
    "redis_unreached",
    "unreached",
    "upstream_unreached",
]

REACH_TIMEOUT_S: Final = 3.0  # one try each: Redis's PING, an upstream's TCP connect


@dataclass(frozen=True, slots=True)
class Unreached:
    """Something of the config that did not answer: `what` (`redis.url`, `upstream NAME`),
    `target` (its address, no password) and `reason`."""

    what: str
    target: str
    reason: str

    def __str__(self) -> str:
        return f"{self.what} at {self.target} cannot be reached: {self.reason}"


def public_url(url: str) -> str:
    """`url` without the password of its user info (the user name stays)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    auth, _, hosts = parts.netloc.rpartition("@")
    user = auth.partition(":")[0]
    return parts._replace(netloc=f"{user}@{hosts}" if user else hosts).geturl()


def redis_features(settings: Settings) -> list[str]:
    """What of this config keeps its state in redis.url, so fails or degrades without it."""
    features = []
    if settings.approvals.enabled:
        features.append("approvals (APPROVAL_UNAVAILABLE)")
    if settings.idempotency.enabled:
        features.append("idempotency keys")
    if settings.limits and settings.redis.limits_url is None:
        features.append("limits (each limit's on_redis_down)")
    cached = any(c.cache is not None for c in settings.capabilities)
    if cached and settings.redis.limits_url is None:
        features.append("the result cache (calls go uncached)")
    if any(x.protocol == "mcp" for x in settings.listeners):
        features.append("MCP sessions")
    if "redis" in settings.audit.sinks:
        features.append("the redis audit sink")
    return features


async def redis_unreached(url: str, redis: Any, what: str = "redis.url") -> Unreached | None:
    """PING `redis` (the client of `url`) once; None when it answers."""
    try:
        async with asyncio.timeout(REACH_TIMEOUT_S):
            await redis.ping()
    except TimeoutError:
        return Unreached(what, public_url(url), f"no answer within {REACH_TIMEOUT_S:g}s")
    except Exception as exc:  # whatever redis-py raises: it is what the operator needs to see
        return Unreached(what, public_url(url), _reason(exc))
    return None


async def upstream_unreached(upstream: Upstream) -> Unreached | None:
    """A TCP (or unix socket) connection to the upstream's address, opened and closed; None
    when it connects. It says the address listens, not that the service behind it works."""
    address = upstream.address
    what = f"upstream {upstream.name}"
    try:
        async with asyncio.timeout(REACH_TIMEOUT_S):
            if address.startswith("unix:"):
                path = address.removeprefix("unix:").removeprefix("//")
                _, writer = await asyncio.open_unix_connection(path)
            else:
                host, port = _host_port(address)
                _, writer = await asyncio.open_connection(host, port)
    except TimeoutError:
        return Unreached(what, public_url(address), f"no answer within {REACH_TIMEOUT_S:g}s")
    except (OSError, ValueError) as exc:
        return Unreached(what, public_url(address), _reason(exc))
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None


async def unreached(settings: Settings) -> list[Unreached]:
    """Everything of `settings` that does not answer: its configured Redis (redis.url,
    redis.limits_url; the embedded default is started, not reached) and every upstream."""
    checks = []
    redis = settings.redis
    for what, url in (("redis.url", redis.url), ("redis.limits_url", redis.limits_url)):
        if url is not None:
            checks.append(_redis(what, url, settings))
    checks += [upstream_unreached(u) for u in settings.upstreams.values()]
    found = await asyncio.gather(*checks)
    return [x for x in found if x is not None]


async def _redis(what: str, url: str, settings: Settings) -> Unreached | None:
    try:
        client = connect(replace(settings.redis, url=url))
    except ValueError as exc:
        return Unreached(what, public_url(url), str(exc))
    try:
        return await redis_unreached(url, client, what)
    finally:
        with contextlib.suppress(Exception):
            await client.aclose()


def _host_port(address: str) -> tuple[str, int]:
    """host and port of `host:port`, `[v6]:port` or an http(s) URL (its default port)."""
    if "://" in address:
        parts = urlsplit(address)
        if parts.hostname is None:
            raise ValueError(f"no host in {public_url(address)}")
        return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
