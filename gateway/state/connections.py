"""Redis connections for approvals, idempotency and the audit stream (DESIGN §7).

One URL names the deployment shape:

- `redis://[user:pass@]host:port/db`, `rediss://...` (TLS), `unix:///path/redis.sock?db=0`
- `redis+sentinel://[:pass@]host:port,host:port/service_name/db` — the master Sentinel names
  (`rediss+sentinel://` for TLS to the master)
- `redis+cluster://[:pass@]host:port,host:port` — Redis Cluster (`rediss+cluster://` for TLS)

Timeouts are bounded on purpose (connect 1 s, each operation 2 s) and retries are few: a Redis
outage must turn into a quick, retryable APPROVAL_UNAVAILABLE for approval-gated calls, not a
request that hangs until the caller's deadline (DESIGN §7). `mapped_errors()` is the one place
that decides which redis-py exceptions mean "Redis is unavailable".

Connections: a process opens at most `MAX_CONNECTIONS` to one Redis (per node for Cluster).
redis-py's pool refuses a command outright when all of its 100 are busy; on a standalone Redis
(the common shape, and the embedded one) the gateway's pool makes it wait for a free connection
instead, at most the operation timeout, so a burst of calls is slowed, not refused. The
commands every call makes (`hot_script`, `hot_get`) take the client's lane instead on a
standalone Redis (gateway/state/lane.py, ADR 0042): one pipelined connection, on which at most
`lane.MAX_PENDING` commands wait; one more fails at once as the store being unavailable.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final, TypeAlias
from urllib.parse import unquote, urlsplit

from redis import exceptions as rexc
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterNode, ClusterPipeline, RedisCluster
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialBackoff

from gateway.config.settings import RedisSettings
from gateway.state.lane import Lane, ScriptCall


class GatewayRedis(Redis):
    """redis-py's client for a standalone Redis, with the lean lane the hot commands take
    (gateway/state/lane.py, ADR 0042); closing the client closes its lane."""

    lane: Lane | None = None

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        if self.lane is not None:
            await self.lane.aclose()
        await super().aclose(close_connection_pool)


RedisClient: TypeAlias = Redis | RedisCluster
RedisPipeline: TypeAlias = Pipeline | ClusterPipeline

CONNECT_TIMEOUT_S: Final = 1.0
OPERATION_TIMEOUT_S: Final = 2.0
HEALTH_CHECK_INTERVAL_S: Final = 15
MAX_CONNECTIONS: Final = 512
# One quick retry absorbs a dropped pooled connection (Redis restarted, idle socket closed by a
# proxy); more would only delay the retryable error the caller is better served by.
_RETRIES: Final = 1
_DEFAULT_PORT: Final = 6379

# Everything that means "the store cannot answer right now", as opposed to a bug or a script
# error. BusyLoadingError (AOF replay after a restart) and MasterNotFoundError (Sentinel) are
# ConnectionError subclasses; ReadOnlyError is what a demoted master answers during a failover.
_UNAVAILABLE: Final[tuple[type[BaseException], ...]] = (
    rexc.ConnectionError,
    rexc.TimeoutError,
    rexc.ReadOnlyError,
    rexc.ClusterDownError,
    rexc.TryAgainError,
    rexc.MasterDownError,
    rexc.MaxConnectionsError,
    rexc.OutOfMemoryError,  # maxmemory reached: writes are refused until memory frees up
    OSError,
)


class RedisUnavailable(Exception):
    """Redis could not be reached or answered that it cannot serve now (retryable)."""


def raise_if_cancelling() -> None:
    """Honour a cancellation a library absorbed: redis-py turns a `CancelledError` raised
    inside a command into a connection error, so a background loop that survives errors would
    otherwise keep running after being cancelled (and whoever awaits it, for ever)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


@contextmanager
def mapped_errors() -> Iterator[None]:
    """Re-raise redis-py's connectivity failures as `RedisUnavailable` (cause kept for logs)."""
    try:
        yield
    except _UNAVAILABLE as exc:
        raise RedisUnavailable(type(exc).__name__) from exc


@dataclass(frozen=True, slots=True)
class _Target:
    scheme: str
    hosts: tuple[tuple[str, int], ...]
    path: str
    username: str | None
    password: str | None


def _parse(url: str) -> _Target:
    parts = urlsplit(url)
    netloc = parts.netloc
    username = password = None
    if "@" in netloc:
        auth, netloc = netloc.rsplit("@", 1)
        user, _, secret = auth.partition(":")
        username = unquote(user) or None
        password = unquote(secret) or None
    hosts: list[tuple[str, int]] = []
    for item in filter(None, netloc.split(",")):
        host, sep, port = item.rpartition(":")
        if not sep:
            host, port = item, str(_DEFAULT_PORT)
        if not host or not port.isdigit():
            raise ValueError("redis URL: hosts must be host:port")
        hosts.append((host.strip("[]"), int(port)))
    return _Target(parts.scheme, tuple(hosts), parts.path, username, password)


def _common() -> dict[str, Any]:
    return {
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
        "socket_timeout": OPERATION_TIMEOUT_S,
        "health_check_interval": HEALTH_CHECK_INTERVAL_S,
        # Retry a refused or dropped connection, never a timed-out command: a timeout already
        # spent the operation budget, and the script it carried may have run.
        "retry": Retry(
            ExponentialBackoff(cap=0.2, base=0.05),
            _RETRIES,
            supported_errors=(rexc.ConnectionError,),
        ),
    }


def _db(text: str) -> int:
    if not text:
        return 0
    if not text.isdigit():
        raise ValueError("redis URL: the database must be a number")
    return int(text)


def _sentinel(target: _Target, tls: bool) -> Redis:
    segments = [s for s in target.path.split("/") if s]
    if not target.hosts or not segments or len(segments) > 2:
        raise ValueError("redis+sentinel URL: expected host:port[,host:port]/service_name[/db]")
    service = segments[0]
    db = _db(segments[1] if len(segments) == 2 else "")
    sentinel_kwargs = {
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
        "socket_timeout": OPERATION_TIMEOUT_S,
    }
    sentinel = Sentinel(  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
        list(target.hosts), sentinel_kwargs=sentinel_kwargs, **_common()
    )
    master: Redis = sentinel.master_for(
        service,
        db=db,
        username=target.username,
        password=target.password,
        ssl=tls,
        max_connections=MAX_CONNECTIONS,
    )
    return master


def _cluster(target: _Target, tls: bool) -> RedisCluster:
    if not target.hosts:
        raise ValueError("redis+cluster URL: expected host:port[,host:port]")
    if target.path not in {"", "/", "/0"}:
        raise ValueError("redis+cluster URL: Redis Cluster has only database 0")
    return RedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in target.hosts],
        username=target.username,
        password=target.password,
        ssl=tls,
        require_full_coverage=True,
        max_connections=MAX_CONNECTIONS,
        **_common(),
    )


def connect(settings: RedisSettings) -> RedisClient:
    """A client for `settings.url`; raises ValueError for a missing or unsupported URL.

    Creating the client does not contact Redis: the first command does (and fails with a
    mapped `RedisUnavailable` inside `mapped_errors()` when Redis is down).
    """
    url = settings.url
    if not url:
        raise ValueError("redis.url is not set (the embedded server provides one when started)")
    target = _parse(url)
    if target.scheme in {"redis", "rediss", "unix"}:
        pool = BlockingConnectionPool.from_url(
            url, max_connections=MAX_CONNECTIONS, timeout=OPERATION_TIMEOUT_S, **_common()
        )
        client = GatewayRedis(connection_pool=pool)
        client.auto_close_connection_pool = True  # closing the client closes its pool
        client.lane = Lane.for_pool(pool)
        return client
    if target.scheme in {"redis+sentinel", "rediss+sentinel"}:
        return _sentinel(target, tls=target.scheme.startswith("rediss"))
    if target.scheme in {"redis+cluster", "rediss+cluster"}:
        return _cluster(target, tls=target.scheme.startswith("rediss"))
    raise ValueError(f"redis URL: unsupported scheme {target.scheme!r}")


def hot_script(client: RedisClient, source: str) -> ScriptCall:
    """A script a call runs on its hot path: through the client's lane when it has one (a
    standalone Redis reached by `connect()`), else redis-py's registered script."""
    if isinstance(client, GatewayRedis) and client.lane is not None:
        return client.lane.script(source)
    script: ScriptCall = client.register_script(source)
    return script


def hot_get(client: RedisClient) -> Callable[[str], Awaitable[Any]]:
    """`GET` for a call's hot path, through the client's lane when it has one."""
    if isinstance(client, GatewayRedis) and client.lane is not None:
        lane = client.lane
        return functools.partial(lane.execute, b"GET")
    return client.get


def is_cluster(client: RedisClient) -> bool:
    """True for Redis Cluster clients (callers avoid cross-slot multi-key commands there)."""
    return isinstance(client, RedisCluster)
