"""The stateless MCP revision (2026-07-28), next to the handshake era on the same endpoint.

A request of this era is one self-contained POST: no `initialize`, no `Mcp-Session-Id`. It
carries its protocol version and client capabilities in `params._meta`, and the transport
repeats the version, the method and (for `tools/call`) the tool name in headers. The era is
chosen by `Mcp-Session-Id` and the `MCP-Protocol-Version` header: a request naming a session,
or carrying a handshake-era version or none, takes the session path; anything else this one,
where an unknown version is refused with the versions spoken here. Checks run in a fixed order
and the first failure answers (ADR 0010):

1. `params._meta` holds the protocol version and the client capabilities, else -32602;
2. the headers agree with the body (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`), else
   -32020;
3. the version is spoken here, else -32022 with `{"supported", "requested"}`.

Results carry `resultType: "complete"` and the server's identity in `_meta`; lists say how long
a client may cache them (`ttlMs: 0`, `cacheScope: "private"`: what a caller sees depends on who
it is). Nothing here keeps state between requests.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any, Final

from gateway.transport.mcp.jsonrpc import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    RpcError,
)

MODERN_VERSIONS: Final = ("2026-07-28",)  # newest first
PROTOCOL_VERSION_KEY: Final = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_KEY: Final = "io.modelcontextprotocol/serverInfo"
VERSION_HEADER: Final = "mcp-protocol-version"
METHOD_HEADER: Final = "mcp-method"
NAME_HEADER: Final = "mcp-name"

HEADER_MISMATCH: Final = -32020
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022

# The body parameter each name-bearing method repeats in `Mcp-Name`.
_NAMED: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_CACHEABLE: Final = frozenset({"tools/list", "server/discover"})
_STATUS: Final = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}
_BASE64_VALUE: Final = re.compile(r"^=\?base64\?(?P<payload>.*)\?=$")


def is_modern(
    version_header: str | None, handshake_versions: tuple[str, ...], *, session: bool
) -> bool:
    """Whether a POST belongs to the stateless era: it names no session (a request carrying
    `Mcp-Session-Id` is a handshake-era request, whatever version it claims, and is told so
    when that version is not spoken on sessions) and its version header is present and not a
    handshake-era version."""
    if session:
        return False
    return version_header is not None and version_header not in handshake_versions


_VERSION_SHAPE: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def unsupported(requested: str, handshake_versions: tuple[str, ...]) -> RpcError:
    """-32022. `requested` is said back only when it has a version's shape: error data never
    carries arbitrary caller text."""
    return RpcError(
        UNSUPPORTED_PROTOCOL_VERSION,
        "Unsupported protocol version.",
        data={
            "supported": [*MODERN_VERSIONS, *handshake_versions],
            "requested": requested if _VERSION_SHAPE.fullmatch(requested) else "(not a version)",
        },
    )


def repeated(headers: Any) -> RpcError | None:
    """-32020 when a routing header is sent more than once: which copy a proxy routed on
    cannot be known, so none is trusted (`headers`: Starlette's, with `getlist`)."""
    for name in (VERSION_HEADER, METHOD_HEADER, NAME_HEADER):
        if len(headers.getlist(name)) > 1:
            return RpcError(HEADER_MISMATCH, "A routing header is repeated.")
    return None


def _header_value(raw: str | None) -> str | None:
    """A header value as sent: plain ASCII, or `=?base64?…?=` for text that is not."""
    if raw is None:
        return None
    match = _BASE64_VALUE.match(raw)
    if match is None:
        return raw
    try:
        return base64.b64decode(match["payload"], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def classify(
    method: str,
    params: Mapping[str, Any],
    headers: Mapping[str, str],
    handshake_versions: tuple[str, ...],
) -> str:
    """The request's protocol version, or the `RpcError` of the first check that fails."""
    meta = params.get("_meta")
    if not isinstance(meta, Mapping):
        raise RpcError(
            INVALID_PARAMS, "params._meta must carry the protocol version and capabilities."
        )
    if PROTOCOL_VERSION_KEY not in meta or CLIENT_CAPABILITIES_KEY not in meta:
        raise RpcError(INVALID_PARAMS, "params._meta lacks the protocol version or capabilities.")
    version = meta[PROTOCOL_VERSION_KEY]
    if headers.get(VERSION_HEADER) != version:
        raise RpcError(HEADER_MISMATCH, "MCP-Protocol-Version does not match params._meta.")
    if headers.get(METHOD_HEADER) != method:
        raise RpcError(HEADER_MISMATCH, "Mcp-Method does not match the method.")
    named = _NAMED.get(method)
    if (
        named is not None
        and params.get(named) is not None
        and _header_value(headers.get(NAME_HEADER)) != params[named]
    ):
        raise RpcError(HEADER_MISMATCH, "Mcp-Name does not match the request.")
    if not isinstance(version, str):
        raise RpcError(INVALID_PARAMS, "The protocol version must be a string.")
    if version not in MODERN_VERSIONS:
        raise unsupported(version, handshake_versions)
    return version


def shape(method: str, result: dict[str, Any], server_info: Mapping[str, Any]) -> dict[str, Any]:
    """A result as this era requires it (a new dict; the handler's stays untouched)."""
    shaped = {"resultType": "complete", **result}  # an input_required result keeps its type
    if method in _CACHEABLE:
        shaped.setdefault("ttlMs", 0)
        shaped.setdefault("cacheScope", "private")
    meta = shaped.get("_meta")
    shaped["_meta"] = {
        **(meta if isinstance(meta, dict) else {}),
        SERVER_INFO_KEY: dict(server_info),
    }
    return shaped


def status_of(code: int) -> int:
    """The HTTP status of a JSON-RPC error in this era (200 for the ones a tool call owns)."""
    return _STATUS.get(code, 200)
