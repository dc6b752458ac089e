"""What an MCP request must pass before any JSON-RPC is read: the Host and Origin allow-lists
(DNS-rebinding protection, MCP "Security Warning") and the bearer challenge with its RFC 9728
protected-resource metadata.

Host: a request whose Host header names no allowed host is refused (421): a rebinding page
reaches the listener under the attacker's host name. Origin: browsers send it, other clients
usually don't; when present it must be the listener's own origin or listed (403), and accepted
origins get CORS headers. The listener's own origins: the request's own (`scheme://Host`, the
Host having passed the allow-list), the origin of `resource_url`, and on a loopback listener
`localhost`, `127.0.0.1` and `[::1]` at the listener's port (loopback equivalents).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final
from urllib.parse import urlsplit

from gateway.config.mcp import WELL_KNOWN, is_loopback
from gateway.config.settings import McpSettings

LOOPBACK_NAMES: Final = ("localhost", "127.0.0.1", "[::1]")
CORS_REQUEST_HEADERS: Final = (
    "authorization, content-type, accept, mcp-session-id, mcp-protocol-version, "
    "last-event-id, traceparent, tracestate"
)
CORS_EXPOSED_HEADERS: Final = "mcp-session-id, www-authenticate"


def split_authority(value: str) -> tuple[str, str | None]:
    """`host[:port]` (a bracketed IPv6 host included) as (lower-case host, port or None)."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return "", None
        rest = value[end + 1 :]
        return value[: end + 1], rest[1:] if rest.startswith(":") else None
    host, sep, port = value.rpartition(":")
    return (host, port) if sep else (value, None)


class HostAllowList:
    """Entries are `host` (any port) or `host:port`; matching ignores case."""

    def __init__(self, entries: Iterable[str]) -> None:
        self._any_port: set[str] = set()
        self._exact: set[tuple[str, str]] = set()
        for entry in entries:
            host, port = split_authority(entry)
            if port is None:
                self._any_port.add(host)
            else:
                self._exact.add((host, port))

    def __bool__(self) -> bool:
        return bool(self._any_port or self._exact)

    def allows(self, header: str) -> bool:
        host, port = split_authority(header)
        if not host:
            return False
        return host in self._any_port or (port is not None and (host, port) in self._exact)


def host_allow_list(settings: McpSettings, bind_host: str) -> HostAllowList:
    """The configured hosts, the resource URL's host, and the loopback names when the listener
    binds a loopback address (where only local clients can reach it anyway)."""
    entries = list(settings.allowed_hosts)
    if settings.resource_url:
        entries.append(urlsplit(settings.resource_url).netloc)
    if is_loopback(bind_host.strip("[]")):
        entries.extend(LOOPBACK_NAMES)
    return HostAllowList(entries)


_DEFAULT_PORTS: Final = {"http": "80", "https": "443"}

Origin = tuple[str, str, str]  # (scheme, lower-case host, port with the scheme's default filled)


def parse_origin(value: str) -> Origin | None:
    """`scheme://host[:port]` (RFC 6454 serialization) as a comparable triple, else None (an
    opaque `null` origin, a path, credentials, or a scheme that is not http(s))."""
    scheme, sep, authority = value.strip().lower().partition("://")
    if not sep or scheme not in _DEFAULT_PORTS or not authority or "/" in authority:
        return None
    if "@" in authority:
        return None
    host, port = split_authority(authority)
    if not host or (port is not None and not port.isdigit()):
        return None
    return scheme, host, str(int(port)) if port else _DEFAULT_PORTS[scheme]


def own_origins(
    settings: McpSettings, *, scheme: str, host_header: str, bind_host: str, port: int | None
) -> frozenset[Origin]:
    """The origins of this listener: the request's own (`scheme://Host`), `resource_url`'s, and
    the loopback names at the listener's `port` when it binds a loopback address."""
    found = {parse_origin(f"{scheme}://{host_header}")}
    if settings.resource_url:
        found.add(parse_origin(_origin_part(settings.resource_url)))
    if port is not None and is_loopback(bind_host.strip("[]")):
        found.update(parse_origin(f"{scheme}://{name}:{port}") for name in LOOPBACK_NAMES)
    return frozenset(o for o in found if o is not None)


def _origin_part(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def origin_allowed(
    settings: McpSettings, origin: str, own: frozenset[Origin] = frozenset()
) -> bool:
    """Whether a request carrying `origin` may proceed: the listener's own origin (`own`) or
    one listed in `allowed_origins` (exact, ignoring case and a trailing slash)."""
    parsed = parse_origin(origin)
    if parsed is not None and parsed in own:
        return True
    wanted = origin.strip().lower()
    return any(wanted == allowed.lower().rstrip("/") for allowed in settings.allowed_origins)


def resource_url(settings: McpSettings, *, scheme: str, host: str) -> str:
    """The RFC 9728 resource identifier: configured, else this listener as the client reached it
    (the Host header has passed the allow-list by then)."""
    return settings.resource_url or f"{scheme}://{host}{settings.path}"


def metadata_url(resource: str) -> str:
    """RFC 9728 §3.1: the well-known path goes between the host and the resource's path."""
    parts = urlsplit(resource)
    return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{parts.path.rstrip('/')}"


def metadata_paths(settings: McpSettings) -> frozenset[str]:
    paths = {WELL_KNOWN, WELL_KNOWN + settings.path.rstrip("/")}
    if settings.resource_url:
        paths.add(WELL_KNOWN + urlsplit(settings.resource_url).path.rstrip("/"))
    return frozenset(paths)


def authorization_servers(settings: McpSettings, issuers: Iterable[str]) -> list[str]:
    """Configured servers, else the listener's JWT issuers that are URLs (RFC 8414 issuers)."""
    if settings.authorization_servers:
        return list(settings.authorization_servers)
    return [i for i in issuers if i.startswith(("https://", "http://"))]


def metadata_document(resource: str, servers: list[str], name: str) -> dict[str, Any]:
    document: dict[str, Any] = {
        "resource": resource,
        "bearer_methods_supported": ["header"],
        "resource_name": name,
    }
    if servers:
        document["authorization_servers"] = servers
    return document


def challenge(resource_metadata: str, reason: str | None) -> str:
    """`WWW-Authenticate` for a 401 (RFC 6750 §3, RFC 9728 §5.1). Without a presented token
    there is no error code; `reason` is a fixed phrase (AuthenticationFailed), never token text."""
    value = f'Bearer resource_metadata="{resource_metadata}"'
    if reason is not None:
        value += f', error="invalid_token", error_description="{reason}"'
    return value
