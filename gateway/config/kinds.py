"""Checks (at file:line) and builders of the upstream kinds that are not gRPC (`kind: http`,
`kind: mcp`; docs/upstreams.md).

The schema already limits a path template to `/`-separated URL path characters and whole
`{property}` placeholders; these checks add what a pattern cannot say: no `.`/`..` segment,
placeholders that name required string or integer properties of the input schema, query
parameters that name properties, an address that is exactly a TCP `host:port`, configured
headers that do not take over framing, the host or the OAuth bearer, and credentials in
plaintext only to a loopback address.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from gateway.config.context import Ctx, mapping, text
from gateway.config.problems import PathParts
from gateway.config.source import LDict
from gateway.model import HttpRoute
from gateway.upstream.httpspec import BODY_METHODS, HttpUpstream, parse_template
from gateway.upstream.mcpspec import McpUpstream, OAuthClient

__all__ = [
    "check_grpc_plaintext",
    "check_http_capability",
    "check_http_upstream",
    "check_mcp_capability",
    "http_route",
    "http_upstream",
    "mcp_upstream",
    "on_this_machine",
]

_DOT_SEGMENTS = frozenset({".", ".."})
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
_SEGMENT_TYPES = frozenset({"string", "integer"})
_HOST_PORT = re.compile(
    r"(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)"
    r":(?P<port>[0-9]{1,5})"
)
_DENIED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})


def check_http_upstream(ctx: Ctx, upstream: LDict, parts: PathParts) -> None:
    """`kind: http` and `kind: mcp` upstreams; their blocks anywhere else."""
    kind = text(upstream, "kind", "grpc")
    for block in ("http", "mcp"):
        if block in upstream and kind != block:
            ctx.fail((*parts, block), f"only used with kind: {block}")
    if kind not in ("http", "mcp"):
        return
    address = text(upstream, "address")
    if not _host_port(address):
        ctx.fail(
            (*parts, "address"),
            f"a kind {kind} upstream's address is host:port (a name, IPv4 or [IPv6] address "
            "and a port 1-65535; no scheme, path, user, query or spaces)",
        )
    elif upstream.get("tls") is not True and not _loopback(address.rsplit(":", 1)[0]):
        # Every request carries a credential: the gateway-signed actor token, and the
        # configured headers or the OAuth token when set; none travels in plaintext.
        ctx.fail(
            (*parts, "address"),
            "credentials would travel in plaintext (the actor token"
            f"{_configured_credentials(upstream)}): tls: false needs a loopback address",
        )
    if "descriptor_set" in upstream:
        ctx.fail((*parts, "descriptor_set"), f"not used by {kind} upstreams")
    _check_headers(ctx, upstream, parts)
    oauth = mapping(mapping(upstream.get("mcp")).get("oauth"))
    url = text(oauth, "token_url")
    if url.startswith("http://") and urlsplit(url).hostname not in _LOOPBACK:
        where = (*parts, "mcp", "oauth", "token_url")
        ctx.fail(where, "must be https (http only on a loopback address)")
    base = text(mapping(upstream.get("http")), "base_path")
    if any(segment in _DOT_SEGMENTS for segment in base.split("/")):
        ctx.fail((*parts, "http", "base_path"), "a . or .. segment is not allowed")


def check_grpc_plaintext(ctx: Ctx, upstream: LDict, parts: PathParts) -> None:
    """`kind: grpc`/`kind: procedure` (ADR 0033): every call carries the gateway-signed actor
    token, a bearer credential for its lifetime, so without TLS the upstream must be on this
    machine (a loopback address or a unix socket), unless `allow_plaintext: true` says the
    network itself is encrypted or trusted (a service mesh's mTLS, a node-local link)."""
    kind = text(upstream, "kind", "grpc")
    allowed = upstream.get("allow_plaintext") is True  # an explicit false says nothing
    if kind in ("http", "mcp"):
        if allowed:  # ADR 0032: their credentials need TLS off loopback
            ctx.fail((*parts, "allow_plaintext"), "only used with kind grpc or procedure")
        return
    if upstream.get("tls") is True:
        if allowed:
            ctx.fail((*parts, "allow_plaintext"), "only used with tls: false")
        return
    address = text(upstream, "address")
    if allowed:
        return
    if ":" in address and not on_this_machine(address):
        ctx.fail(
            (*parts, "address"),
            "the actor token would travel in plaintext: tls: false needs a loopback address "
            "or a unix socket, or allow_plaintext: true where the network itself is encrypted "
            "or trusted (a service mesh's mTLS)",
        )


def _host_port(address: str) -> bool:
    """Whether an address is exactly `host:port`: a DNS name or IPv4 address, or an IPv6
    address in brackets, then a numeric port 1-65535 (nothing that could add a scheme, user,
    path, query or fragment to the URL built from it)."""
    match = _HOST_PORT.fullmatch(address)
    if match is None or not 0 < int(match["port"]) < 65536:
        return False
    if match["v6"] is not None:
        try:
            ipaddress.IPv6Address(match["v6"])
        except ValueError:
            return False
    return True


def _check_headers(ctx: Ctx, upstream: LDict, parts: PathParts) -> None:
    """Configured headers may not take over what the HTTP client or capgate sets: framing,
    the target host, and the bearer an `oauth` block sends."""
    for block in ("http", "mcp"):
        node = mapping(upstream.get(block))
        denied = _DENIED_HEADERS | ({"authorization"} if node.get("oauth") else set())
        for name in mapping(node.get("headers")):
            if str(name).strip().lower() in denied:
                ctx.fail(
                    (*parts, block, "headers", name),
                    f"{name} is set by capgate, not in headers",
                )


def on_this_machine(address: str) -> bool:
    """Whether a `host:port` or `unix:` address is reached without leaving this machine: a
    unix socket, or a loopback host (`_loopback`)."""
    return address.startswith("unix:") or _loopback(address.rsplit(":", 1)[0])


def _loopback(host: str) -> bool:
    """Whether a host of an address names this machine: localhost, 127.0.0.0/8, ::1. An
    IPv4-mapped IPv6 address (`::ffff:127.0.0.1`) is not: Python 3.13 calls it loopback,
    3.11 does not, and the answer must not depend on the interpreter."""
    host = host.removeprefix("[").removesuffix("]")
    if host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return False
    return address.is_loopback


def _configured_credentials(upstream: LDict) -> str:
    found = ""
    for block in ("http", "mcp"):
        if mapping(upstream.get(block)).get("headers"):
            found += f", {block}.headers"
    if mapping(upstream.get("mcp")).get("oauth"):
        found += ", the mcp.oauth access token"
    return found


def check_mcp_capability(ctx: Ctx, cap: LDict, parts: PathParts, kind: str) -> bool:
    """The capability's `tool` against its upstream's kind; True when the upstream is of kind
    mcp (the gRPC method checks then do not apply)."""
    if kind != "mcp":
        if "tool" in cap:
            ctx.fail((*parts, "tool"), "only used with an upstream of kind: mcp")
        return False
    for key in ("method", "http"):
        if key in cap:
            ctx.fail((*parts, key), "mcp upstreams take tool instead")
    if "tool" not in cap:
        ctx.fail(parts, "tool is required for an mcp upstream")
    return True


def check_http_capability(ctx: Ctx, cap: LDict, parts: PathParts, kind: str) -> bool:
    """The capability's `http` block against its upstream's kind; True when the capability's
    upstream is of kind http or mcp (the gRPC method checks then do not apply)."""
    if check_mcp_capability(ctx, cap, parts, kind):
        return True
    route = cap.get("http")
    if kind != "http":
        if route is not None:
            ctx.fail((*parts, "http"), "only used with an upstream of kind: http")
        return False
    if "method" in cap:
        ctx.fail((*parts, "method"), "http upstreams take http.method and http.path instead")
    if not isinstance(route, LDict):
        ctx.fail(parts, "http (method and path) is required for an http upstream")
        return True
    if not isinstance(cap.get("input_schema"), dict):
        ctx.fail(parts, "input_schema is required for an http upstream")
        return True
    # The URL is filled from the value to send: what map_input builds, when it is set.
    mapped = "map_input" in cap and isinstance(cap.get("map_input_schema"), dict)
    schema = cap.get("map_input_schema") if mapped else cap.get("input_schema")
    assert isinstance(schema, dict)
    properties = mapping(schema.get("properties"))
    required = schema.get("required")
    required_names = set(required) if isinstance(required, list) else set()
    template = route.get("path")
    if isinstance(template, str) and template.startswith("/"):
        for part in parse_template(template):
            if part.literal in _DOT_SEGMENTS:
                ctx.fail((*parts, "http", "path"), "a . or .. segment is not allowed")
            elif part.name:
                where = "map_input_schema" if mapped else "input_schema"
                _check_placeholder(ctx, part.name, properties, required_names, parts, what=where)
    query = route.get("query")
    for name in query if isinstance(query, list) else ():
        if isinstance(name, str) and name not in properties:
            where = "map_input_schema" if mapped else "input_schema"
            ctx.fail((*parts, "http", "query"), f"{name} is not a property of {where}")
    return True


def _check_placeholder(
    ctx: Ctx, name: str, properties: Any, required: set[str], parts: PathParts, *, what: str
) -> None:
    where = (*parts, "http", "path")
    prop = properties.get(name) if isinstance(properties, dict) else None
    if not isinstance(prop, dict):
        ctx.fail(where, f"{{{name}}} is not a property of {what}")
        return
    if name not in required:
        ctx.fail(where, f"{{{name}}} must be a required property of {what}")
    kind = prop.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if not kinds or not all(isinstance(k, str) and k in _SEGMENT_TYPES for k in kinds):
        ctx.fail(where, f"{{{name}}} must have type string or integer in {what}")


def http_upstream(node: Any) -> HttpUpstream | None:
    """The `http` block of a checked upstream (None when absent: the defaults)."""
    if not isinstance(node, Mapping):
        return None
    return HttpUpstream(
        base_path=node.get("base_path", ""),
        headers=tuple((str(k), str(v)) for k, v in node.get("headers", {}).items()),
        max_redirects=node.get("max_redirects", 0),
        http2=node.get("http2", True),
    )


def http_route(node: Any) -> HttpRoute | None:
    """The `http` block of a checked capability."""
    if not isinstance(node, Mapping):
        return None
    method = node["method"]
    default_body = "input" if method in BODY_METHODS else "none"
    return HttpRoute(
        method=method,
        path=parse_template(node["path"]),
        template=node["path"],
        query=tuple(node.get("query", ())),
        body=node.get("body", default_body),
        contract_errors=frozenset(node.get("contract_errors", ())),
    )


def mcp_upstream(node: Any) -> McpUpstream | None:
    """The `mcp` block of a checked upstream (None when absent: the defaults)."""
    if not isinstance(node, Mapping):
        return None
    return McpUpstream(
        path=node.get("path", "/mcp"),
        protocol=node.get("protocol", "auto"),
        headers=tuple((str(k), str(v)) for k, v in node.get("headers", {}).items()),
        oauth=_oauth(node.get("oauth")),
    )


def _oauth(node: Any) -> OAuthClient | None:
    if not isinstance(node, Mapping):
        return None
    return OAuthClient(
        token_url=node["token_url"],
        client_id=node["client_id"],
        client_secret=node["client_secret"],
        scope=node.get("scope", ""),
        audience=node.get("audience", ""),
    )
