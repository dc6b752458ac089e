"""What the config says about `kind: http` upstreams and the capabilities they serve
(docs/upstreams.md "HTTP/JSON upstreams"). Plain frozen data, no behaviour: the request is
built and sent by `gateway.upstream.http`. A capability's own `http` block (`HttpRoute`,
`PathPart`) is part of the capability, in gateway/model.py.

The base address (scheme, host, port, base path) comes from the upstream's config only; a
capability adds a path template whose placeholders each fill one whole path segment, query
parameters by name, and the body. Nothing from a caller's input can reach the scheme, host,
port, userinfo or fragment of a request URL (No SSRF by construction, ADR 0028).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from gateway.model import PathPart

__all__ = [
    "BODY_METHODS",
    "HttpUpstream",
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
