"""What the config says about `kind: mcp` upstreams (docs/upstreams.md "MCP upstreams"). Plain
frozen data; the client is `gateway.upstream.mcpclient`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

__all__ = ["HANDSHAKE_VERSIONS", "STATELESS_VERSION", "McpUpstream", "OAuthClient", "Protocol"]

# The handshake era (initialize, Mcp-Session-Id), newest first, and the stateless era.
HANDSHAKE_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26")
STATELESS_VERSION: Final = "2026-07-28"
Protocol = Literal["auto", "2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"]


@dataclass(frozen=True, slots=True)
class OAuthClient:
    """OAuth 2.0 client credentials towards the upstream (gateway/upstream/oauth.py)."""

    token_url: str
    client_id: str
    client_secret: str = field(default="", repr=False)
    scope: str = ""
    audience: str = ""  # sent as `audience` when set (several providers ask for it)


@dataclass(frozen=True, slots=True)
class McpUpstream:
    """The `mcp` block of a `kind: mcp` upstream (Streamable HTTP)."""

    path: str = "/mcp"  # the MCP endpoint below the upstream's origin
    # auto: server/discover decides (the stateless era when offered, else initialize).
    protocol: Protocol = "auto"
    # Static headers on every request (a bearer credential via {{ env.X }}); repr=False.
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    oauth: OAuthClient | None = None  # an access token from a token endpoint, per upstream
