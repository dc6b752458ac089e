"""One pooled `grpc.aio.Channel` per upstream, created at load and shared by every call.

DESIGN §8: channels are pooled, with keepalive and per-upstream TLS. The channel's receive
limit is the upstream's `max_response_bytes`, so an oversized reply is refused by gRPC before
it is buffered (the call maps it to OUTPUT_INVALID). Caller credentials are never attached
here: what goes upstream is the gateway's own channel identity plus forwarded metadata.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Mapping
from pathlib import Path

import grpc

from gateway.upstream.errors import UpstreamConfigError
from gateway.upstream.httpclient import HttpClients
from gateway.upstream.lifetimes import Lifetimes, watch
from gateway.upstream.spec import Upstream

HTTP_KINDS = frozenset({"http", "mcp"})  # upstreams served over HTTP, not gRPC channels

__all__ = [
    "ChannelPool",
    "channel_credentials",
    "channel_options",
    "create_channel",
]

USER_AGENT = "capgate/0.1"
KEEPALIVE_TIMEOUT_MS = 10_000
RETIRED_GRACE_S = 10.0  # a retired channel's close: at most this long for RPCs still on it


def channel_options(upstream: Upstream) -> list[tuple[str, int | str]]:
    """gRPC channel arguments for `upstream`."""
    options: list[tuple[str, int | str]] = [
        ("grpc.max_receive_message_length", upstream.max_response_bytes),
        ("grpc.primary_user_agent", USER_AGENT),
    ]
    if upstream.keepalive_s > 0:
        options += [
            ("grpc.keepalive_time_ms", upstream.keepalive_s * 1000),
            ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
            # Ping only while calls are in flight: servers' default policy answers idle
            # pings more often than every 5 minutes with GOAWAY (too_many_pings).
            ("grpc.keepalive_permit_without_calls", 0),
        ]
    if upstream.server_name:
        options.append(("grpc.ssl_target_name_override", upstream.server_name))
        options.append(("grpc.default_authority", upstream.server_name))
    return options


def channel_credentials(upstream: Upstream) -> grpc.ChannelCredentials | None:
    """TLS credentials from the upstream's files; None for a plaintext channel."""
    if not upstream.tls:
        if upstream.ca_file or upstream.client_cert_file or upstream.client_key_file:
            raise UpstreamConfigError(
                f"upstream {upstream.name}: TLS files are set but tls is false"
            )
        return None
    if bool(upstream.client_cert_file) != bool(upstream.client_key_file):
        raise UpstreamConfigError(
            f"upstream {upstream.name}: client_cert_file and client_key_file go together"
        )
    return grpc.ssl_channel_credentials(
        root_certificates=_read(upstream, upstream.ca_file),
        private_key=_read(upstream, upstream.client_key_file),
        certificate_chain=_read(upstream, upstream.client_cert_file),
    )


def _read(upstream: Upstream, path: str | None) -> bytes | None:
    if not path:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as err:
        # The path is config, not a secret; the file content never appears in messages.
        raise UpstreamConfigError(
            f"upstream {upstream.name}: cannot read {path}: {err.strerror}"
        ) from err


def create_channel(upstream: Upstream) -> grpc.aio.Channel:
    """A new channel to `upstream.address` (`host:port`, `dns:///…` or `unix:///path`)."""
    options = channel_options(upstream)
    credentials = channel_credentials(upstream)
    if credentials is None:
        return grpc.aio.insecure_channel(upstream.address, options=options)
    return grpc.aio.secure_channel(upstream.address, credentials, options=options)


class ChannelPool:
    """Channels by upstream, made on first use and then reused by every call.

    Create it inside the event loop that will use the channels. A config reload asks again
    with the new `Upstream` settings: unchanged settings get the same channel; changed ones
    get a new channel. The old one stays open while a snapshot in use holds it (`hold`: the
    previous snapshot's calls in flight finish on it), then it is closed, with `RETIRED_GRACE_S`
    for anything still running on it (gateway/upstream/lifetimes.py, ADR 0004 §11).
    """

    def __init__(self, upstreams: Mapping[str, Upstream] | None = None) -> None:
        self._channels: Lifetimes[grpc.aio.Channel] = Lifetimes(create_channel, _close_retired)
        self._watching: set[weakref.finalize[[], object]] = set()
        # kind http and mcp upstreams: HTTP clients, pooled the same way (gateway/upstream/http.py)
        self.http = HttpClients()
        grpc_upstreams = [u for u in (upstreams or {}).values() if u.kind not in HTTP_KINDS]
        for upstream in grpc_upstreams:
            channel_credentials(upstream)  # fail on a bad TLS file before opening anything
        for upstream in grpc_upstreams:
            self.channel(upstream)

    def channel(self, upstream: Upstream) -> grpc.aio.Channel:
        """The pooled channel for `upstream` (created now if new or its settings changed)."""
        return self._channels.get(upstream)

    def hold(self, snapshot: object, upstreams: Mapping[str, Upstream]) -> None:
        """`snapshot` was built from `upstreams` with this pool: the channels and HTTP clients
        of those settings stay open while it is referenced (current, or used by a call in
        flight), even after a reload retires them."""
        channels = self._channels.hold(upstreams)
        clients = self.http.hold(upstreams)

        def release() -> None:
            self._watching.discard(finalizer)
            self._channels.release(channels)
            self.http.release(clients)

        finalizer = watch(snapshot, asyncio.get_running_loop(), release)
        self._watching.add(finalizer)

    def __len__(self) -> int:
        return len(self._channels)

    @property
    def retired_open(self) -> int:
        """Retired channels and HTTP clients not closed yet (held by a snapshot in use, or
        closing now)."""
        return self._channels.retired_open + self.http.retired_open

    async def retired_closed(self) -> None:
        """Wait until the retired channels and clients released by now are closed."""
        await self._channels.settled()
        await self.http.retired_closed()

    async def close(self, grace: float | None = None) -> None:
        """Close every channel; in-flight calls get `grace` seconds (None: cancel them)."""
        for finalizer in self._watching:
            finalizer.detach()  # nothing is released into a closed pool
        self._watching.clear()
        for channel in await self._channels.take_all():
            await channel.close(grace)
        await self.http.close()


async def _close_retired(channel: grpc.aio.Channel) -> None:
    # No snapshot in use holds it, so no call can start on it; the grace is for anything
    # that reached it without holding a snapshot (nothing does today).
    await channel.close(RETIRED_GRACE_S)
