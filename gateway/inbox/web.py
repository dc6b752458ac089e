"""HTTP plumbing of the inbox: security headers, bounded form parsing, templates, static files.

Content-Security-Policy: scripts, styles and connections from this origin only, no inline
script or style, no framing, forms post only here. Templates autoescape everything
(`StrictUndefined` turns a typo into an error instead of an empty string).
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import Any, Final
from urllib.parse import parse_qsl, quote, urlsplit

from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.inbox.reveal import plain, shown

CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS: Final = (
    ("content-security-policy", CSP),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    # same-origin, not no-referrer: under no-referrer a browser sends `Origin: null` on its own
    # form posts, and the Origin check (`foreign_origin`) could not tell them from a sandbox's.
    ("referrer-policy", "same-origin"),
    ("cross-origin-opener-policy", "same-origin"),
    ("cross-origin-resource-policy", "same-origin"),
    ("permissions-policy", "camera=(), microphone=(), geolocation=()"),
    ("cache-control", "no-store"),
)
# Only behind an https base_url: a browser then refuses plain http to this host for a year.
HSTS: Final = ("strict-transport-security", "max-age=31536000")
MAX_FORM_BYTES: Final = 64 * 1024
STATIC: Final = {
    "inbox.js": "text/javascript; charset=utf-8",
    "inbox.css": "text/css; charset=utf-8",
}
_SAFE_NEXT = re.compile(r"/(?!/)[A-Za-z0-9/_.~%?=&-]{0,300}")


class FormError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class SecurityHeaders:
    """ASGI middleware adding `HEADERS` (and `HSTS` when asked) to every HTTP response."""

    def __init__(self, app: ASGIApp, *, hsts: bool = False) -> None:
        self.app = app
        self.headers = (*HEADERS, *((HSTS,) if hsts else ()))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in self.headers:
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, with_headers)


async def read_form(request: Request) -> dict[str, str]:
    """An urlencoded form body, bounded in size and field count."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise FormError(415, "Forms must be sent as application/x-www-form-urlencoded.")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise FormError(413, "The form is too large.")
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=10)
    except (UnicodeDecodeError, ValueError):
        raise FormError(400, "The form could not be read.") from None
    return dict(pairs)


_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def origin_of(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an http(s) URL or serialized origin; None for anything else
    (`null`, other schemes, no host, a bad port)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme]


def foreign_origin(request: Request, base_url: str) -> str | None:
    """Why a state-changing request did not come from this inbox's own pages, or None.

    The inbox's origin is that of `base_url`, or (no base URL set) the one the request was
    addressed to. Refused: a `Sec-Fetch-Site` other than same-origin (so same-site too), an
    `Origin` that differs in scheme, host or port (`null` included), and, without Origin, a
    `Referer` from elsewhere; a request with neither Origin nor Referer is refused as well.
    """
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site != "same-origin":
        return f"the browser marked it {fetch_site[:20]}"
    own = origin_of(base_url) if base_url else origin_of(str(request.url))
    origin = request.headers.get("origin")
    if origin is not None:
        return None if own is not None and origin_of(origin) == own else "another origin"
    referer = request.headers.get("referer")
    if referer is not None:
        return None if own is not None and origin_of(referer) == own else "another origin"
    return "no Origin or Referer header"


def safe_next(value: str | None) -> str:
    """A same-origin path to go back to after signing in; anything else becomes '/'."""
    return value if value and _SAFE_NEXT.fullmatch(value) else "/"


def segment(value: Any) -> str:
    return quote(str(value), safe="")


@functools.cache
def templates() -> Environment:
    env = Environment(
        loader=PackageLoader("gateway.inbox", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["segment"] = segment
    # Every caller-controlled value shown goes through these (gateway.inbox.reveal).
    env.filters["shown"] = shown
    env.filters["plain"] = plain
    return env


@functools.cache
def static_file(name: str) -> bytes:
    return resources.files("gateway.inbox").joinpath(f"static/{name}").read_bytes()
