"""The HTTP transport of the upstreams served over HTTP: `kind: http` (gateway/upstream/http.py)
and `kind: mcp` (gateway/upstream/mcpclient.py) share it, and neither kind knows the other.

Pooled clients (`HttpClients`, one per upstream, retired like gRPC channels), the one table of
transport failures (`transport_errors`: TIMEOUT, EXECUTION_FAILED for a request this client
refuses to write, UPSTREAM_UNAVAILABLE; each UNKNOWN once bytes may have gone out), what is
known about a request having gone out (`SentTracker`), an answered error's state (`answered`),
`Retry-After`, and how an upstream's own message is made safe to show (`public_text`).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import logging
import ssl
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import h11
import httpx2

from gateway.errors import GENERIC_MESSAGE, CapabilityError, Code
from gateway.upstream.errors import UpstreamConfigError
from gateway.upstream.httpspec import HttpUpstream
from gateway.upstream.lifetimes import Lifetimes
from gateway.upstream.spec import Upstream
from gateway.upstream.state import UPSTREAM_STATUS_KEY, ExecutionState, with_state

__all__ = [
    "AUTH_STATUSES",
    "MAX_PUBLIC_MESSAGE",
    "USER_AGENT",
    "HttpClients",
    "SentTracker",
    "answered",
    "create_client",
    "deadline_exceeded",
    "public_text",
    "retry_after",
    "transport_errors",
    "transport_failure",
]

MAX_PUBLIC_MESSAGE: Final = 500
USER_AGENT: Final = "capgate/0.1"
T = TypeVar("T")
# The upstream refused capgate's credentials, like gRPC's UNAUTHENTICATED/PERMISSION_DENIED
# (docs/upstreams.md section 5): the table's message, COMPLETED (the upstream answered).
AUTH_STATUSES: Final = {401: Code.UNAUTHENTICATED, 403: Code.FORBIDDEN}

# httpx2 logs each request's URL at INFO, and a URL here carries input values (path segments
# and query): never in logs (§12). Its warnings and errors are kept.
logging.getLogger("httpx2").setLevel(logging.WARNING)
log = logging.getLogger("capgate.upstream")


def public_text(text: str) -> str:
    """A message an upstream chose to expose, made safe to show: control, format (bidi) and
    other invisible characters dropped, whitespace runs made one space, at most
    `MAX_PUBLIC_MESSAGE` characters; empty becomes the generic message."""
    kept = "".join(
        " " if ch.isspace() else ch
        for ch in text[: MAX_PUBLIC_MESSAGE * 4]
        if ch.isspace() or not unicodedata.category(ch).startswith(("C", "Z"))
    )
    cleaned = " ".join(kept.split())
    if len(cleaned) > MAX_PUBLIC_MESSAGE:
        cleaned = cleaned[: MAX_PUBLIC_MESSAGE - 1] + "…"
    return cleaned or GENERIC_MESSAGE


def retry_after(headers: httpx2.Headers) -> float | None:
    """`Retry-After` in seconds: delta-seconds, or an HTTP-date measured against the response's
    own `Date` (so no local clock is read); None when absent or unreadable."""
    raw = headers.get("retry-after", "").strip()
    if raw.isdigit():
        return float(int(raw[:9]))
    try:
        when = email.utils.parsedate_to_datetime(raw)
        now = email.utils.parsedate_to_datetime(headers.get("date", ""))
    except (TypeError, ValueError, IndexError):
        return None
    return max((when - now).total_seconds(), 0.0)


def answered(error: CapabilityError, tag: str) -> CapabilityError:
    error.details[UPSTREAM_STATUS_KEY] = tag
    if error.code is Code.OUTPUT_INVALID:
        error.executed = True
    return with_state(error, ExecutionState.COMPLETED)


def transport_failure(code: Code, reason: str, *, sent: bool) -> CapabilityError:
    error = CapabilityError(code, reason=reason)
    error.details[UPSTREAM_STATUS_KEY] = "HTTP transport"
    return with_state(error, ExecutionState.UNKNOWN if sent else ExecutionState.NOT_STARTED)


class SentTracker:
    """Learns from httpcore's trace events whether a request's headers started going out
    (`sent`: a network error from then on may come after bytes reached the server) and
    whether they were all written (`headers_written`: h11 checks an event before writing any
    of it, so a protocol error before then left nothing on the wire)."""

    __slots__ = ("headers_written", "sent")

    def __init__(self) -> None:
        self.sent = False
        self.headers_written = False

    async def __call__(self, event: str, info: Mapping[str, Any]) -> None:
        if event.endswith("send_request_headers.started"):
            self.sent = True
        elif event.endswith("send_request_headers.complete"):
            self.headers_written = True


def deadline_exceeded(upstream: str, sent: SentTracker) -> CapabilityError:
    """The attempt's share of the deadline ran out (kind http and kind mcp alike)."""
    reason = f"upstream {upstream}: deadline exceeded"
    return transport_failure(Code.TIMEOUT, reason, sent=sent.sent)


@contextlib.contextmanager
def transport_errors(upstream: str, sent: SentTracker) -> Iterator[None]:
    """httpx2's failures of one request as envelope errors, one table for kind http and kind
    mcp: a timeout is TIMEOUT, a request this client refuses to write EXECUTION_FAILED, any
    other transport failure UPSTREAM_UNAVAILABLE; each UNKNOWN once bytes may have gone out."""
    where = f"upstream {upstream}"
    try:
        yield
    except httpx2.TimeoutException as err:
        reason = f"{where}: {type(err).__name__}"
        raise transport_failure(Code.TIMEOUT, reason, sent=sent.sent) from err
    except (
        httpx2.LocalProtocolError,
        httpx2.UnsupportedProtocol,
        httpx2.InvalidURL,
        h11.LocalProtocolError,
    ) as err:
        # A request this client refuses to write (h11's own error escapes httpcore when the
        # body does not match the declared length): after the headers, the server may
        # already act on them.
        written = sent.headers_written
        reason = f"{where}: {'' if written else 'not sent: '}{type(err).__name__}"
        raise transport_failure(Code.EXECUTION_FAILED, reason, sent=written) from err
    except httpx2.TransportError as err:
        reason = f"{where}: {type(err).__name__}"
        raise transport_failure(Code.UPSTREAM_UNAVAILABLE, reason, sent=sent.sent) from err


def _ssl_context(upstream: Upstream) -> ssl.SSLContext:
    try:
        context = ssl.create_default_context(cafile=upstream.ca_file)
        if upstream.client_cert_file and upstream.client_key_file:
            context.load_cert_chain(upstream.client_cert_file, upstream.client_key_file)
    except (OSError, ssl.SSLError) as err:
        raise UpstreamConfigError(
            f"upstream {upstream.name}: cannot load its TLS files: {type(err).__name__}"
        ) from err
    return context


def create_client(upstream: Upstream) -> httpx2.AsyncClient:
    """One pooled client per upstream: TLS from its files, HTTP/2 offered by ALPN over TLS,
    no redirects followed by the client (HttpCall does, same origin only), and no proxy or
    certificate settings taken from the environment (trust_env=False)."""
    spec = upstream.http or HttpUpstream()
    verify: ssl.SSLContext | bool = _ssl_context(upstream) if upstream.tls else False
    return httpx2.AsyncClient(
        verify=verify,
        http2=spec.http2 and upstream.tls,
        follow_redirects=False,
        trust_env=False,
        timeout=None,
        limits=httpx2.Limits(max_connections=100, max_keepalive_connections=20),
    )


@dataclass(eq=False, slots=True)
class _Pooled:
    """One upstream's pooled HTTP client and what is shared on it (an MCP client's session)."""

    client: httpx2.AsyncClient
    shared: Any = None

    async def aclose(self) -> None:
        """The shared object's farewell first (an MCP session's DELETE, bounded), then the
        client; the client is closed even when the farewell fails."""
        closer = getattr(self.shared, "aclose", None)
        try:
            if closer is not None:
                await closer()
        finally:
            await self.client.aclose()


class HttpClients:
    """Clients by upstream, like `ChannelPool`'s channels: unchanged settings keep their client
    across reloads; changed ones get a new client, and the old one (with its MCP session) is
    closed once no snapshot in use holds it (gateway/upstream/lifetimes.py), or with the pool."""

    def __init__(self) -> None:
        self._pooled: Lifetimes[_Pooled] = Lifetimes(
            lambda upstream: _Pooled(create_client(upstream)), _Pooled.aclose
        )

    def client(self, upstream: Upstream) -> httpx2.AsyncClient:
        return self._pooled.get(upstream).client

    def shared(self, upstream: Upstream, make: Callable[[httpx2.AsyncClient], T]) -> T:
        """One object per upstream on its client (an MCP upstream's session), made by `make`
        and kept while the upstream's settings stay the same."""
        pooled = self._pooled.get(upstream)
        if pooled.shared is None:
            pooled.shared = make(pooled.client)
        return pooled.shared  # type: ignore[no-any-return]

    def hold(self, upstreams: Mapping[str, Upstream]) -> list[Any]:
        """As `Lifetimes.hold` (`ChannelPool.hold` calls it for a snapshot)."""
        return self._pooled.hold(upstreams)

    def release(self, held: list[Any]) -> None:
        self._pooled.release(held)

    @property
    def retired_open(self) -> int:
        return self._pooled.retired_open

    async def retired_closed(self) -> None:
        await self._pooled.settled()

    async def close(self) -> None:
        # Together: each MCP client's farewell (its session's DELETE) has its own bound, and
        # several upstreams must not add theirs up at shutdown.
        pooled = await self._pooled.take_all()
        failures = await asyncio.gather(*(p.aclose() for p in pooled), return_exceptions=True)
        for failure in failures:
            if isinstance(failure, Exception):  # one closer's trouble closes the rest anyway
                log.warning("closing an upstream client failed: %s", type(failure).__name__)
