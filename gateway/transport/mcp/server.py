"""Running MCP listeners: one uvicorn server per listener, in the gateway's event loop.

The socket is bound here (port 0 works and `port` tells which one was taken) and handed to
uvicorn; uvicorn's own signal handling is not used — `capgate serve` drains on SIGTERM and
stops these listeners through `stop`, like the gRPC ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn

from gateway.config.settings import Listener, McpSettings, Settings
from gateway.model import Limits
from gateway.pipeline.call import Runtime
from gateway.pipeline.snapshot import Snapshot
from gateway.state.mcp_sessions import (
    MAX_SESSIONS_PER_ACTOR,
    LocalSessions,
    RedisSessions,
    SessionStore,
)
from gateway.transport.auth.listeners import build_authenticator
from gateway.transport.auth.tls import CertificateFiles
from gateway.transport.mcp import guard, mrtr, notify
from gateway.transport.mcp.http import McpApp
from gateway.transport.mcp.protocol import McpHandler

log = logging.getLogger("capgate.mcp")

_ENVELOPE_DEPTH = 4  # {"params": {"arguments": ...}} nests the input this much deeper
_ENVELOPE_BYTES = 64 * 1024  # the JSON-RPC envelope around the largest input


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def _bind(address: str) -> socket.socket:
    host, port = split_address(address)
    bare = host.strip("[]")
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    try:
        sock = socket.create_server((bare, port), family=family)
    except OSError as exc:
        # A start refused like a config error (exit 2, no traceback), naming the address.
        busy = " (another process may be listening there)" if exc.errno == errno.EADDRINUSE else ""
        raise ValueError(f"cannot listen on {address}: {exc.strerror or exc}{busy}") from None
    sock.setblocking(False)
    return sock


@dataclass
class McpListener:
    """One running MCP listener."""

    listener: Listener
    server: uvicorn.Server
    sock: socket.socket
    port: int
    main: asyncio.Task[None] | None = field(default=None)
    app: McpApp | None = None
    tls_watch: asyncio.Task[None] | None = None

    def rebind(self, listener: Listener) -> None:
        """New authentication settings for this listener (a reload); ValueError keeps the old."""
        if self.app is not None:
            self.app.rebind(listener)
        self.listener = listener

    async def stop(self, grace_s: float) -> None:
        if self.tls_watch is not None:
            self.tls_watch.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.tls_watch
        self.server.config.timeout_graceful_shutdown = max(int(grace_s), 1)
        self.server.should_exit = True
        if self.main is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self.main
        await self.server.shutdown(sockets=[self.sock])


async def _watch_certificate(
    files: CertificateFiles, context: ssl.SSLContext, interval_s: float = 1.0
) -> None:
    """Poll the listener's certificate files; a renewed matching pair serves new connections."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            files.refresh(context)
        except Exception:  # a surprise in one poll must not end certificate rotation
            log.exception("certificate check failed; the next poll tries again")


def envelope_limits(settings: Settings) -> Limits:
    """Limits for a whole JSON-RPC message: the largest of every capability's, a little deeper
    and larger. Each capability's own limits are checked again on its input (stage 5)."""
    every = [c.limits for c in settings.capabilities] + [settings.defaults.limits]
    return Limits(
        max_bytes=max(x.max_bytes for x in every) + _ENVELOPE_BYTES,
        max_depth=max(x.max_depth for x in every) + _ENVELOPE_DEPTH,
        max_list_length=max(x.max_list_length for x in every),
        max_string_length=max(x.max_string_length for x in every),
    )


def build_app(
    listener: Listener,
    snapshot: Callable[[], Snapshot],
    runtime: Runtime,
    *,
    limits: Limits,
    scheme: str,
    redis: Any = None,
    key_prefix: str = "capgate",
    state_key: bytes | None = None,
) -> McpApp:
    if listener.auth != "jwt" or listener.jwt is None:
        raise ValueError(f"listener {listener.name!r}: MCP listeners need auth 'jwt'")
    settings = listener.mcp or McpSettings()
    sessions: SessionStore
    if redis is not None:  # any worker or replica serves any session
        sessions = RedisSessions(
            redis,
            prefix=key_prefix,
            listener=listener.name,
            idle_timeout_s=settings.session_idle_timeout_s,
            per_actor=min(MAX_SESSIONS_PER_ACTOR, settings.max_sessions),
        )
    else:  # no Redis anywhere in this gateway: the sessions of this process only
        sessions = LocalSessions(
            idle_timeout_s=settings.session_idle_timeout_s, max_sessions=settings.max_sessions
        )
    handler = McpHandler(listener, snapshot, runtime, sessions, state_key=state_key)
    events = None
    if isinstance(sessions, RedisSessions) and runtime.approvals is not None:
        events = notify.SessionEvents(redis, sessions)  # GET /mcp: approvals decided
    host, _ = split_address(listener.address)
    return McpApp(
        listener,
        handler,
        sessions,
        build_authenticator(listener),
        hosts=guard.host_allow_list(settings, host),
        bind_host=host,
        scheme=scheme,
        limits=limits,
        issuers=listener.jwt.issuers,
        events=events,
        drain=runtime.drain,
    )


async def start_mcp_listener(
    listener: Listener,
    snapshot: Callable[[], Snapshot],
    runtime: Runtime,
    *,
    limits: Limits,
    redis: Any = None,
    key_prefix: str = "capgate",
    state_key: bytes | None = None,
) -> McpListener:
    tls = listener.tls
    app = build_app(
        listener,
        snapshot,
        runtime,
        limits=limits,
        scheme="https" if tls else "http",
        redis=redis,
        key_prefix=key_prefix,
        state_key=state_key,
    )
    # Read and checked once (a pair that does not match refuses the listener); uvicorn loads
    # the very bytes that were checked, so a rotation in between is seen by the first poll.
    files = CertificateFiles(listener.name, tls.cert_file, tls.key_file) if tls else None
    with files.materialized() if files else contextlib.nullcontext((None, None)) as (cert, key):
        config = uvicorn.Config(
            app,
            lifespan="off",
            http="h11",
            ws="none",
            log_config=None,
            access_log=False,
            server_header=False,
            proxy_headers=False,  # the Host header is validated as received, never rewritten
            ssl_certfile=cert,
            ssl_keyfile=key,
        )
        config.load()
    server = uvicorn.Server(config)
    server.lifespan = config.lifespan_class(config)
    try:
        sock = _bind(listener.address)
    except ValueError as exc:
        raise ValueError(f"listener {listener.name!r} {exc}") from None
    await server.startup(sockets=[sock])
    item = McpListener(listener, server, sock, sock.getsockname()[1], app=app)
    item.main = asyncio.create_task(server.main_loop(), name=f"mcp-{listener.name}")
    if files is not None and config.ssl is not None:
        item.tls_watch = asyncio.create_task(
            _watch_certificate(files, config.ssl), name=f"mcp-{listener.name}-tls"
        )
    log.info(
        "listener %s (mcp, surface %s) on port %d%s",
        listener.name,
        listener.surface,
        item.port,
        (listener.mcp or McpSettings()).path,
    )
    return item


async def start_mcp_listeners(
    settings: Settings,
    snapshot: Callable[[], Snapshot],
    runtime: Runtime,
    redis: Any = None,
) -> list[McpListener]:
    """Start every `protocol: mcp` listener of `settings`; `redis`: the gateway's client, where
    sessions live whenever there is one (else in this process)."""
    limits = envelope_limits(settings)
    state_key = mrtr.derive_key(settings.audit.hmac_key)  # one for every listener and replica
    started: list[McpListener] = []
    for listener in settings.listeners:
        if listener.protocol == "mcp":
            started.append(
                await start_mcp_listener(
                    listener,
                    snapshot,
                    runtime,
                    limits=limits,
                    redis=redis,
                    key_prefix=settings.redis.key_prefix,
                    state_key=state_key,
                )
            )
    return started
