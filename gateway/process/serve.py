"""`capgate serve --config FILE`: start Redis (embedded when no URL is given), build the first
snapshot, start one gRPC server per listener, hot-reload config and policies, drain on SIGTERM.
Invalid config never starts the server and never replaces a running snapshot."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway.audit.approvals import ApprovalAudit
from gateway.audit.grants import GrantExpiryAudit
from gateway.audit.notify.sink import WebhookNotifier, snapshot_facts
from gateway.audit.otlp import OtlpLogSink
from gateway.audit.sinks import AuditLog, RedisStreamSink, Sink, StreamSink
from gateway.config.problems import ConfigError
from gateway.config.settings import Listener, Settings
from gateway.config.watch import ConfigWatcher
from gateway.pipeline.call import Runtime
from gateway.pipeline.runner import SETTLE_S
from gateway.pipeline.snapshot import Snapshot, SnapshotError, SnapshotHolder, build_snapshot
from gateway.process import gcpolicy, workers
from gateway.process.load import Loaded, load_everything, located
from gateway.process.reach import redis_features, redis_unreached
from gateway.process.tasks import cancel_all
from gateway.process.telemetry import Telemetry, start_telemetry
from gateway.state.approvals.grants import RedisGrantStore
from gateway.state.approvals.store import RedisApprovalStore
from gateway.state.cache import ResultCache, cache_key
from gateway.state.connections import connect, raise_if_cancelling
from gateway.state.embedded import RedisProcess
from gateway.state.idempotency import RedisIdempotencyStore
from gateway.state.limits.store import RedisLimiter
from gateway.telemetry import metrics
from gateway.transport import grpclog
from gateway.transport.server import READY_SERVICE, REDIS_SERVICE, Servers, start_listeners
from gateway.upstream.actor_token import ActorTokenSigner
from gateway.upstream.channels import ChannelPool

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor

log = logging.getLogger("capgate")


def _needs_redis(settings: Settings) -> bool:
    return (
        settings.approvals.enabled
        or settings.idempotency.enabled
        or "redis" in settings.audit.sinks
        or bool(settings.limits)
        # MCP sessions go to a configured Redis so that any replica serves them (docs/mcp.md).
        or (settings.redis.url is not None and any(x.protocol == "mcp" for x in settings.listeners))
        or any(c.cache is not None for c in settings.capabilities)
    )


RELOAD_RETRY_S = 2.0  # first retry of a refused reload; doubles up to RELOAD_RETRY_MAX_S
RELOAD_RETRY_MAX_S = 60.0
RECONCILE_EVERY_S = 600.0  # approval indexes rebuilt from the records: at start, then this often


@dataclass
class Gateway:
    """A running gateway: everything `serve` starts, so tests can run it in-process."""

    settings: Settings
    holder: SnapshotHolder
    runtime: Runtime
    servers: Servers
    pool: ChannelPool
    redis: Any = None
    redis_process: RedisProcess | None = None
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    watcher: ConfigWatcher | None = None
    telemetry: Telemetry | None = None
    mcp: list[Any] = field(default_factory=list)  # gateway.transport.mcp.server.McpListener
    # `capgate serve` keeps start-up and each snapshot out of the cyclic GC (ADR 0041).
    freeze_gc: bool = False
    _reload_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _generation: int = 0
    _stopped: bool = False

    def ports(self) -> dict[str, int]:
        ports = {item.listener.name: item.port for item in self.servers.items}
        return ports | {item.listener.name: item.port for item in self.mcp}

    async def reload(self, settings: Settings, *, attempt: int = 0) -> None:
        """Apply a new config: listener authentication at once, then a new snapshot built off
        the request path and swapped atomically (the old one stays on error).

        Reloads run one at a time, and one that waited while a newer config arrived is
        dropped: an older config can never land after a newer one. Authentication does not
        wait for the snapshot: a revoked key stops verifying even if an upstream cannot be
        resolved right now."""
        if attempt == 0:
            self._generation += 1
        generation = self._generation
        async with self._reload_lock:
            if generation != self._generation:
                return  # a newer config is queued behind this one: it applies instead
            if attempt == 0:
                self._rebind_listeners(settings.listeners)
            try:
                snapshot = await build_snapshot(settings, self.pool, hmac_key=self._hmac_key())
            except Exception as exc:
                self._refused(settings, exc, generation, attempt)
                return
            self.holder.swap(snapshot)
            if self.freeze_gc:
                self._refreeze_later()
            log.info("reloaded: revision %s", snapshot.revision)

    def _refreeze_later(self) -> None:
        """The old snapshot back to the collector now; what lives is frozen again once the
        calls in flight on the old snapshot have ended (ADR 0041)."""
        gcpolicy.thaw()
        for task in self.tasks:
            if task.get_name() == "gc-refreeze":
                task.cancel()  # a newer reload's wait replaces it

        async def later() -> None:
            await asyncio.sleep(gcpolicy.REFREEZE_AFTER_S)
            gcpolicy.settle()

        self.track(asyncio.create_task(later(), name="gc-refreeze"))

    def _refused(self, settings: Settings, exc: Exception, generation: int, attempt: int) -> None:
        """Log a refused reload with every problem at its file:line in the config the watcher
        loaded. Only an upstream that did not answer may pass by itself: that config is tried
        again, backing off, until it loads or a newer one replaces it. Anything else (a policy
        or capability problem) is reported this once: the watcher brings the next content."""
        why = located(settings, exc) if isinstance(exc, SnapshotError) else exc
        revision = self.holder.current.revision
        if not (isinstance(exc, SnapshotError) and exc.retryable):
            log.error("reload refused, keeping revision %s: %s", revision, why)
            return
        delay = min(RELOAD_RETRY_S * 2 ** min(attempt, 10), RELOAD_RETRY_MAX_S)
        log.error(
            "reload refused, keeping revision %s (an upstream did not answer; trying again "
            "in %gs): %s",
            revision,
            delay,
            why,
        )
        self._retry_later(settings, generation, attempt + 1, delay)

    def _retry_later(self, settings: Settings, generation: int, attempt: int, delay: float) -> None:
        if self._stopped:
            return

        async def retry() -> None:
            await asyncio.sleep(delay)
            if generation == self._generation and not self._stopped:
                await self.reload(settings, attempt=attempt)

        self.track(asyncio.create_task(retry(), name="reload-retry"))

    def track(self, task: asyncio.Task[Any]) -> None:
        """A background task `stop()` must cancel (reloads, their retries)."""
        self.tasks = [t for t in self.tasks if not t.done()]
        self.tasks.append(task)

    def _rebind_listeners(self, listeners: tuple[Listener, ...]) -> None:
        """Apply what a reload can change on a running listener: its authentication settings
        (JWT keys and JWKS, issuers, audience, lifetimes, claim names; mTLS identity roles).
        Everything else about a listener (address, TLS files, surface, role, auth mode,
        protocol, added or removed listeners) takes a restart, and says so in the log."""
        fresh = {listener.name: listener for listener in listeners}
        for item in [*self.servers.items, *self.mcp]:
            old = item.listener
            new = fresh.pop(old.name, None)
            if new is None:
                log.warning("listener %s left the config: it serves until a restart", old.name)
                continue
            if (new.auth, new.role, new.surface, new.protocol) != (
                old.auth,
                old.role,
                old.surface,
                old.protocol,
            ):
                log.warning(
                    "listener %s: a new auth mode, role, surface or protocol takes a restart; "
                    "it keeps serving as before",
                    old.name,
                )
                continue
            mtls = new.mtls
            if mtls is not None and old.mtls is not None:
                # The client CA is the TLS handshake's (a restart changes its path); the
                # identity roles and issuer are what a reload applies.
                mtls = replace(mtls, client_ca_file=old.mtls.client_ca_file)
            live = replace(old, jwt=new.jwt, mtls=mtls)
            if live != new:
                log.warning(
                    "listener %s: changes besides authentication keys and claims (address, "
                    "TLS, socket, admin settings) take a restart",
                    old.name,
                )
            if live == old:  # JWKS content included (JwtAuth.jwks_digest)
                continue
            try:
                item.rebind(live)
            except ValueError as exc:
                log.error("listener %s keeps its authentication settings: %s", old.name, exc)
                continue
            log.info("listener %s: authentication settings reloaded", old.name)
        for name in fresh:
            log.warning("listener %s is new in the config: starting it takes a restart", name)

    def _hmac_key(self) -> bytes:
        return self.settings.audit.hmac_key.encode()

    async def stop(self, grace_s: float = 5.0) -> None:
        self._stopped = True
        self._generation += 1  # any reload still queued or retrying is now stale
        if self.watcher is not None:
            self.watcher.stop()
        # All listeners stop taking calls at once; calls still running near the end of the
        # grace period get a cancelled envelope instead of an aborted RPC
        # (gateway/pipeline/drain.py).
        self.servers.not_serving()
        answered, *_ = await asyncio.gather(
            self.runtime.drain.answer(grace_s),
            self.servers.stop(grace_s),
            *(mcp.stop(grace_s) for mcp in self.mcp),
        )
        if answered:
            log.warning("drain: %d calls still running were answered as cancelled", answered)
        grpclog.install().flush(log)  # how many undecodable requests went unlogged
        # Outcomes still being recorded (shielded from their callers) finish before the audit
        # log and Redis close under them: bounded by the settlement's own bound.
        unsettled = await self.runtime.drain.settled(SETTLE_S)
        if unsettled:
            log.warning("drain: %d outcomes were still being recorded at stop", unsettled)
        await cancel_all(self.tasks)
        audit = self.runtime.audit
        if isinstance(audit, AuditLog):
            await audit.close()
        if self.telemetry is not None:
            await self.telemetry.close()
        await self.pool.close()
        if self.runtime.limiter is not None:
            await self.runtime.limiter.close()
        if self.redis is not None:
            with contextlib.suppress(Exception):
                await self.redis.aclose()
        if self.redis_process is not None:
            self.redis_process.stop()


async def _redis_health(gw: Gateway) -> None:
    while True:
        ok = True
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that
            # arrives as the ping completes, and this loop would then never stop.
            async with asyncio.timeout(1.0):
                await gw.redis.ping()
        except Exception:
            ok = False
        gw.servers.set_serving(REDIS_SERVICE, ok)
        if ok and gw.runtime.approvals is not None:
            with contextlib.suppress(Exception):
                await gw.runtime.approvals.expire_sweep(gw.runtime.wall())
            with contextlib.suppress(Exception):
                await gw.runtime.approvals.escalate_sweep(gw.runtime.wall())
        if ok and gw.runtime.grants is not None:
            with contextlib.suppress(Exception):
                await gw.runtime.grants.expire_sweep(gw.runtime.wall())
        raise_if_cancelling()  # the suppress above may have swallowed a cancellation
        await asyncio.sleep(2.0)


async def _reconcile_approvals(gw: Gateway, every_s: float) -> None:
    """Rebuild the approval indexes from the records at start, then every `every_s`: what a
    crash between a transition and its index update left stale is made exact again, and keys
    written before their TTLs existed get them (docs/approvals.md, key layout)."""
    store = gw.runtime.approvals
    while True:
        try:
            report = await store.reconcile()
        except Exception as exc:
            log.warning("approval index reconcile failed (next in %gs): %s", every_s, exc)
        else:
            level = logging.INFO if report.added or report.removed else logging.DEBUG
            log.log(
                level,
                "approval indexes reconciled: %d records, %d entries added, %d removed",
                report.records,
                report.added,
                report.removed,
            )
        raise_if_cancelling()
        await asyncio.sleep(every_s)


async def start(
    settings: Settings,
    *,
    extra_sinks: Sequence[Sink] = (),
    span_processors: Sequence[SpanProcessor] = (),
    reuse_port: bool = False,
    reconcile_every_s: float = RECONCILE_EVERY_S,
    loaded: Loaded | None = None,
    pool: ChannelPool | None = None,
) -> Gateway:
    """Start everything `capgate serve` runs; `extra_sinks` and `span_processors` let tests
    and embedders receive audit events and spans in-process. `loaded` is what
    `load_everything` built with `pool` (serve passes both: the snapshot is built, and every
    problem reported, before Redis starts or a port is bound); without it the snapshot is
    built here.

    The steps, in order, each a function below: the first snapshot, Redis (said at once
    when it does not answer), the audit log,
    the runtime and its Redis stores, the listeners (gRPC, then MCP), the background tasks,
    ready."""
    if loaded is not None and pool is None:
        raise TypeError("start(loaded=...) needs the pool its snapshot was built with")
    pool = pool if pool is not None else ChannelPool()
    snapshot = await _first_snapshot(settings, loaded, pool)
    redis, process = _start_redis(settings)
    await _say_if_redis_unreached(settings, redis)
    # Approval notifications ride the audit drain: never on the request path (issue 10).
    notifier = WebhookNotifier(settings.notify) if settings.notify.webhooks else None
    audit = _start_audit(settings, redis, extra_sinks, notifier)
    runtime = Runtime(audit=audit, signer=ActorTokenSigner(settings.actor_token))
    if settings.actor_token.jwks_out:
        runtime.signer.write_jwks(settings.actor_token.jwks_out)  # type: ignore[union-attr]
    holder = SnapshotHolder(snapshot)
    _attach_stores(settings, runtime, redis, holder)
    if notifier is not None:
        notifier.bind(snapshot_facts(lambda: holder.current))
    telemetry = start_telemetry(settings.telemetry, span_processors=span_processors)
    try:
        servers = await _start_grpc_listeners(settings, holder, runtime, telemetry, reuse_port)
    except BaseException:
        # A listener that cannot start (a port taken, TLS files refused): nothing outlives it.
        await telemetry.close()  # the previous tracer back, the metrics port free
        await audit.close()
        await pool.close()
        if runtime.limiter is not None:
            await runtime.limiter.close()
        if redis is not None:
            with contextlib.suppress(Exception):
                await redis.aclose()
        if process is not None:
            process.stop()
        raise
    gw = Gateway(settings, holder, runtime, servers, pool, redis, process, telemetry=telemetry)
    await _start_mcp_listeners(gw)
    _start_background(gw, notifier, reconcile_every_s)
    _ready(gw)
    return gw


async def _first_snapshot(settings: Settings, loaded: Loaded | None, pool: ChannelPool) -> Snapshot:
    """The snapshot to serve first: the one `load_everything` built, else built here (the
    pool is closed if that fails: nothing else has started yet)."""
    if loaded is not None and loaded.snapshot is not None:
        return loaded.snapshot
    try:
        return await build_snapshot(settings, pool, hmac_key=settings.audit.hmac_key.encode())
    except BaseException:
        await pool.close()
        raise


def _start_redis(settings: Settings) -> tuple[Any, RedisProcess | None]:
    """The Redis client, when a configured feature keeps state there (else `None, None`);
    without `redis.url`, the embedded default is started first."""
    if not _needs_redis(settings):
        return None, None
    redis_settings, process = settings.redis, None
    if redis_settings.url is None:
        # The embedded default: a private real redis-server with its data in a local dir.
        data = Path(redis_settings.data_dir).resolve() / "redis"
        process = RedisProcess(data).start()
        redis_settings = replace(redis_settings, url=process.url)
    return connect(redis_settings), process


async def _say_if_redis_unreached(settings: Settings, redis: Any) -> None:
    """A configured redis.url that does not answer does not stop the start (it may come up
    later; the health service's redis entry says NOT_SERVING until it does), but it is said
    now, once: what cannot reach what, and what of this config fails or waits meanwhile."""
    url = settings.redis.url
    if redis is None or url is None:
        return
    unreached = await redis_unreached(url, redis)
    if unreached is not None:
        affected = ", ".join(redis_features(settings)) or "nothing of this config"
        log.warning(
            "capgate cannot reach Redis: %s. Until it answers, these fail or wait: %s",
            unreached,
            affected,
        )


def _start_audit(
    settings: Settings, redis: Any, extra_sinks: Sequence[Sink], notifier: WebhookNotifier | None
) -> AuditLog:
    """The audit log over the configured sinks, started; the notifier is an observer, not a
    sink: it keeps no record, so a strict write never counts it."""
    sinks: list[Sink] = list(extra_sinks)
    for name in settings.audit.sinks:
        if name == "stdout":
            sinks.append(StreamSink())
        elif name == "file" and settings.audit.file:
            sinks.append(StreamSink.to_file(settings.audit.file))
        elif name == "redis" and redis is not None:
            sinks.append(
                RedisStreamSink(redis, settings.audit.redis_stream, settings.audit.redis_maxlen)
            )
        elif name == "otlp":
            sinks.append(OtlpLogSink())
    observers = [notifier] if notifier is not None else []
    audit = AuditLog(sinks, observers=observers, buffer=settings.audit.buffer)
    audit.start()
    return audit


def _attach_stores(
    settings: Settings, runtime: Runtime, redis: Any, holder: SnapshotHolder
) -> None:
    """The runtime's Redis stores: approvals and idempotency when enabled; the cache and the
    limiter whenever there is a Redis (cached capabilities and limits may come with a reload,
    docs/cache.md)."""
    if redis is None:
        return
    prefix = settings.redis.key_prefix
    if settings.approvals.enabled:
        # Decisions and expiries reach the audit trail from the process that made them.
        on_transition = ApprovalAudit(
            runtime.audit, revision=lambda: holder.current.revision, clock=runtime.wall
        )
        runtime.approvals = RedisApprovalStore(
            redis,
            prefix=prefix,
            settings=settings.approvals,
            clock=runtime.wall,
            on_transition=on_transition,
        )
        if settings.approvals.grants_enabled:
            runtime.grants = RedisGrantStore(
                redis,
                prefix=prefix,
                settings=settings.approvals,
                clock=lambda: runtime.wall(),  # noqa: PLW0108 - tests swap runtime.wall
                on_expired=GrantExpiryAudit(
                    runtime.audit,
                    revision=lambda: holder.current.revision,
                    clock=lambda: runtime.wall(),  # noqa: PLW0108
                ),
            )
    # Limit state and cache entries live in the Redis no write of theirs waits an fsync for:
    # limits' own when they have one (ADR 0037, ADR 0043), else redis.url's.
    runtime.limiter = RedisLimiter.open(settings.redis, redis)
    cache = settings.cache
    runtime.cache = ResultCache(
        runtime.limiter.redis,
        prefix=prefix,
        key=cache_key(cache.key) if cache.key else os.urandom(32),
        timeout_s=cache.timeout_s,
        max_entries=cache.max_entries,
        clock=lambda: runtime.wall(),  # noqa: PLW0108 - tests swap runtime.wall
    )
    if settings.idempotency.enabled:
        runtime.idempotency = RedisIdempotencyStore(
            redis, prefix=prefix, ttl_s=settings.idempotency.ttl_s, clock=runtime.wall
        )


async def _start_grpc_listeners(
    settings: Settings,
    holder: SnapshotHolder,
    runtime: Runtime,
    telemetry: Telemetry,
    reuse_port: bool,
) -> Servers:
    """One gRPC server per `protocol: grpc` listener, its message bound the largest input
    any capability accepts plus the envelope."""
    max_bytes = max(
        [c.limits.max_bytes for c in settings.capabilities] + [settings.defaults.limits.max_bytes]
    )
    return await start_listeners(
        tuple(x for x in settings.listeners if x.protocol == "grpc"),
        lambda: holder.current,
        runtime,
        max_message_bytes=max_bytes + 64 * 1024,
        traced=telemetry.traced(),
        reuse_port=reuse_port,
    )


async def _start_mcp_listeners(gw: Gateway) -> None:
    """The `protocol: mcp` listeners, if any; one that cannot start stops everything."""
    if not any(x.protocol == "mcp" for x in gw.settings.listeners):
        return
    from gateway.transport.mcp.server import start_mcp_listeners  # noqa: PLC0415 - HTTP stack if used

    try:
        gw.mcp = await start_mcp_listeners(
            gw.settings, lambda: gw.holder.current, gw.runtime, gw.redis
        )
    except BaseException:
        await gw.stop(0)  # the gRPC listeners and everything above
        raise


def _start_background(
    gw: Gateway, notifier: WebhookNotifier | None, reconcile_every_s: float
) -> None:
    """What runs beside the listeners: the pending-approvals gauge, Redis health (and the
    approval expiry sweep), the approval index reconcile, the webhook notifier."""
    redis, approvals = gw.redis, gw.runtime.approvals
    if approvals is not None and redis is not None and gw.telemetry is not None:
        pending_key = approvals.keys.pending
        gw.telemetry.watch_gauge(metrics.approvals_pending, lambda: redis.zcard(pending_key))
    if redis is not None:
        gw.tasks.append(asyncio.create_task(_redis_health(gw), name="redis-health"))
    if redis is not None and approvals is not None:
        reconciling = _reconcile_approvals(gw, reconcile_every_s)
        gw.tasks.append(asyncio.create_task(reconciling, name="approval-reconcile"))
    if notifier is not None:
        gw.tasks.append(asyncio.create_task(notifier.run(), name="webhooks"))


def _ready(gw: Gateway) -> None:
    """Health SERVING: readiness means the config and policies are loaded."""
    gw.servers.set_serving("", True)
    gw.servers.set_serving(READY_SERVICE, True)


async def serve(args: argparse.Namespace) -> int:
    """`capgate serve` with its parsed options (gateway/cli/serve.py): load, start, reload on
    change, drain on SIGINT/SIGTERM; the exit status."""
    ports = workers.parse_ports(args.worker_ports) if args.worker_index is not None else {}
    # The supervisor's one cache key for all its workers (taken out of the environment).
    cache_secret = ""
    if args.worker_index is not None:
        cache_secret = os.environ.pop(workers.CACHE_KEY_ENV, "")

    def prepared(loaded: Settings) -> Settings:
        """What this process serves of a loaded config (at start and on every reload)."""
        if args.jwks_out:
            loaded = replace(
                loaded, actor_token=replace(loaded.actor_token, jwks_out=args.jwks_out)
            )
        if (
            args.worker_index is not None
        ):  # one of `--workers N` (gateway/process/workers.py, ADR 0012)
            loaded = workers.worker_settings(
                loaded, args.worker_index, ports, args.actor_key_file, cache_secret=cache_secret
            )
        return loaded

    # The loader `capgate config check` runs too: the config, its upstreams' methods and its
    # policies, every problem at once, before Redis starts or a port is bound (DESIGN §10).
    pool = ChannelPool()
    try:
        # Policy files still being written when it starts: tried again once they settle.
        everything = await load_everything(
            args.config, pool, prepare=prepared, settle_s=args.watch_settle
        )
    except ConfigError as exc:
        await pool.close()
        print(f"capgate: cannot start: {exc}", file=sys.stderr)
        return 2
    except BaseException:
        await pool.close()
        raise
    loaded, settings = everything.loaded, everything.settings
    try:
        gw = await start(
            settings, reuse_port=args.worker_index is not None, loaded=everything, pool=pool
        )
    except ValueError as exc:
        # What only starting finds (a listener's TLS files refused): it never starts.
        print(f"capgate: cannot start: {exc}", file=sys.stderr)
        return 2
    # The first snapshot is the holder's now: kept here, it would keep its upstream channels
    # open after a reload retired them, for as long as the process runs (ADR 0004 §11).
    del everything
    gw.freeze_gc = True
    gcpolicy.settle()
    loop = asyncio.get_running_loop()
    if args.watch:

        def on_change(new: Settings) -> None:
            ready = prepared(new)
            loop.call_soon_threadsafe(
                lambda: gw.track(loop.create_task(gw.reload(ready), name="reload"))
            )

        def on_error(exc: BaseException) -> None:
            log.error(
                "config change refused, keeping revision %s: %s", gw.holder.current.revision, exc
            )

        gw.watcher = ConfigWatcher(
            args.config,
            on_change=on_change,
            on_error=on_error,
            interval_s=args.watch_interval,
            initial=loaded,  # as loaded: its key files and revision are the file's
            settle_s=args.watch_settle,
        )
        gw.watcher.start()
    if args.ready_file:
        ready: dict[str, object] = {"ports": gw.ports(), "revision": gw.holder.current.revision}
        if gw.redis_process is not None:  # the embedded default: for `capgate audit --redis-url`
            ready["redis_url"] = gw.redis_process.url
        Path(args.ready_file).write_text(json.dumps(ready))  # noqa: ASYNC240 - once, at startup
    log.info("capgate ready: %s", gw.ports())
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    orphan = None
    if args.worker_index is not None and args.supervisor_pid:
        orphan = asyncio.create_task(
            _stop_when_orphaned(stop, args.supervisor_pid), name="supervisor-watch"
        )
    await stop.wait()
    if orphan is not None:
        orphan.cancel()
    log.info("draining")
    await gw.stop(args.grace)
    return 0


async def _stop_when_orphaned(
    stop: asyncio.Event, supervisor: int, interval_s: float = 1.0
) -> None:
    """A `--workers` worker drains and exits when its supervisor is gone (killed without the
    chance to forward SIGTERM): it is re-parented, so its parent is no longer the supervisor
    whose pid it was started with (also when that happened before this worker was ready)."""
    while os.getppid() == supervisor:  # noqa: ASYNC110 - no event tells of a parent exiting
        await asyncio.sleep(interval_s)
    log.warning("supervisor (pid %d) is gone: draining this worker", supervisor)
    stop.set()
