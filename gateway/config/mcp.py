"""Config of MCP listeners (`protocol: mcp`): the semantic checks and the settings they build.

Refused at load (docs/mcp.md): any auth but `jwt` (a model-facing listener never trusts the
caller's own claim, §12), the admin role, a unix socket, client certificates, a `mcp` block on a
gRPC listener, a tool-name mapping for an unknown capability, two tools with one name or one
named like the approval tool (ADR 0010), and a listener bound beyond loopback without a host
allow-list (DNS rebinding).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final
from urllib.parse import urlsplit

from gateway.config.context import Ctx, is_unix, items, mapping, text
from gateway.config.durations import parse_duration
from gateway.config.mcpnames import build_table
from gateway.config.problems import PathParts
from gateway.config.settings import McpSettings
from gateway.config.source import LDict

# The OAuth protected-resource metadata path (RFC 9728): served by the listener
# (transport/mcp/guard.py), so no MCP path may lie below it.
WELL_KNOWN: Final = "/.well-known/oauth-protected-resource"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_mcp_listener(ctx: Ctx, listener: LDict, parts: PathParts) -> None:
    protocol = text(listener, "protocol", "grpc")
    if protocol != "mcp":
        if "mcp" in listener:
            ctx.fail((*parts, "mcp"), "only used with protocol: mcp")
        return
    if text(listener, "auth") != "jwt":
        ctx.fail((*parts, "auth"), "mcp listeners need auth: jwt")
    if text(listener, "role", "caller") == "admin":
        ctx.fail((*parts, "role"), "mcp listeners are caller listeners (ApprovalAdmin is gRPC)")
    address = text(listener, "address")
    if is_unix(address):
        ctx.fail((*parts, "address"), "mcp listeners need a host:port address")
    if "client_ca_file" in mapping(listener.get("tls")):
        ctx.fail((*parts, "tls", "client_ca_file"), "client certificates are not used by mcp")
    block = mapping(listener.get("mcp"))
    here: PathParts = (*parts, "mcp")
    ctx.positive(block, "session_idle_timeout", here)
    if text(block, "path").startswith(WELL_KNOWN):
        ctx.fail((*here, "path"), f"must not be under {WELL_KNOWN}")
    resource = text(block, "resource_url")
    if resource and (urlsplit(resource).query or urlsplit(resource).fragment):
        ctx.fail((*here, "resource_url"), "must have no query or fragment (RFC 9728)")
    host = address.rpartition(":")[0].strip("[]")
    beyond_loopback = bool(address) and not is_unix(address) and not is_loopback(host)
    if beyond_loopback and not block.get("allowed_hosts") and not resource:
        ctx.fail(here, "a listener bound beyond loopback needs allowed_hosts or resource_url")
    _check_tool_names(ctx, listener, block, here)


def _check_tool_names(ctx: Ctx, listener: LDict, block: LDict, here: PathParts) -> None:
    surface = text(listener, "surface")
    known: set[str] = set()
    exposed: list[str] = []
    for _, cap in items(ctx.root.get("capabilities")):
        cap_id = text(cap, "id")
        known.add(cap_id)
        if mapping(cap.get("expose")).get(surface) is True:  # SI-1: exactly true
            exposed.append(cap_id)
    names = block.get("tool_names")
    names = names if isinstance(names, dict) else {}
    wanted = {k: v for k, v in names.items() if isinstance(v, str)}
    for cap_id in wanted:
        if cap_id not in known:
            ctx.fail((*here, "tool_names", cap_id), "no capability with this id")
    approvals = mapping(ctx.root.get("approvals")).get("enabled", True) is not False
    approval_tool = block.get("approval_tool", True) is not False and approvals
    _, clashes = build_table(dict.fromkeys(exposed), wanted, approval_tool=approval_tool)
    for clash in clashes:
        ctx.fail((*here, "tool_names"), clash)


def mcp_settings(node: Mapping[str, Any] | None) -> McpSettings:
    """The settings of a checked `mcp` block (absent keys keep the dataclass defaults)."""
    node = node or {}
    values: dict[str, Any] = {}
    for key in ("path", "resource_url", "approval_tool", "max_sessions"):
        if key in node:
            values[key] = node[key]
    for key in ("allowed_origins", "allowed_hosts", "authorization_servers"):
        if key in node:
            values[key] = tuple(node[key])
    if "tool_names" in node:
        values["tool_names"] = MappingProxyType(dict(node["tool_names"]))
    if "session_idle_timeout" in node:
        values["session_idle_timeout_s"] = parse_duration(node["session_idle_timeout"])
    return McpSettings(**values)
