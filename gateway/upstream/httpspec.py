"""What the config says about `kind: http` upstreams and the capabilities they serve
(docs/upstreams.md "HTTP/JSON upstreams"). Plain frozen data, no behaviour: the request is
built and sent by `gateway.upstream.http`.

The base address (scheme, host, port, base path) comes from the upstream's config only; a
capability adds a path template whose placeholders each fill one whole path segment, query
parameters by name, and the body. Nothing from a caller's input can reach the scheme, host,
port, userinfo or fragment of a request URL (No SSRF by construction, ADR 0028).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

__all__ = [
    "BODY_METHODS",
    "HttpRoute",
    "HttpUpstream",
    "PathPart",
    "parse_template",
]

# Methods that carry the input as a JSON body unless the route says `body: none`.
BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH"})


@dataclass(frozen=True, slots=True)
class HttpUpstream:
    """The `http` block of a `kind: http` upstream."""

    base_path: str = ""  # "" or "/api/v1": prefixed to every capability's path
    # Static headers sent on every request (credentials via {{ env.X }}); secrets: repr=False.
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    max_redirects: int = 0  # 0: redirects are failures; else followed, same origin only
    http2: bool = True  # offered by ALPN over TLS; plaintext connections speak HTTP/1.1


@dataclass(frozen=True, slots=True)
class PathPart:
    """One path segment of a template: a literal (already valid in a URL) or a placeholder."""

    literal: str = ""
    name: str = ""  # the input property that fills the segment, when a placeholder


@dataclass(frozen=True, slots=True)
class HttpRoute:
    """The `http` block of a capability served by a `kind: http` upstream."""

    method: str  # GET, POST, PUT, PATCH, DELETE
    path: tuple[PathPart, ...]  # parsed from the template, e.g. /orders/{order_id}
    template: str
    query: tuple[str, ...] = ()  # input properties sent as query parameters (when present)
    body: Literal["none", "input"] = "none"
    # 4xx statuses whose body is the upstream's public message (EXECUTION_FAILED, exposed).
    contract_errors: frozenset[int] = frozenset()

    @property
    def bound(self) -> frozenset[str]:
        """Input properties that go into the URL (path placeholders and query)."""
        return frozenset({p.name for p in self.path if p.name} | set(self.query))


def parse_template(template: str) -> tuple[PathPart, ...]:
    """The segments of a path template. The schema's pattern already admits only `/`-separated
    segments of URL path characters or whole `{name}` placeholders; this splits them."""
    parts = []
    for segment in template.split("/")[1:]:
        if segment.startswith("{") and segment.endswith("}"):
            parts.append(PathPart(name=segment[1:-1]))
        else:
            parts.append(PathPart(literal=segment))
    return tuple(parts)
