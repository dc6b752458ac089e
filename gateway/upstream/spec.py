"""What the config says about one upstream, whatever its kind (docs/upstreams.md): plain values
that config/ builds and every upstream module reads, so the upstream layer needs nothing above
it (docs/architecture.md). Kind-specific parts: `httpspec` (kind http), `mcpspec` (kind mcp).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gateway.upstream.httpspec import HttpUpstream
from gateway.upstream.mcpspec import McpUpstream

__all__ = ["Upstream"]


@dataclass(frozen=True, slots=True)
class Upstream:
    name: str
    address: str  # "127.0.0.1:50051" or "unix:///path"
    kind: Literal["grpc", "procedure", "http", "mcp"] = "grpc"
    descriptor_set: str | None = None  # FileDescriptorSet; else server reflection
    tls: bool = False
    # tls false off this machine: the actor token in plaintext, accepted (ADR 0033)
    allow_plaintext: bool = False
    ca_file: str | None = None
    client_cert_file: str | None = None
    client_key_file: str | None = None
    server_name: str | None = None
    max_response_bytes: int = 4 * 1024 * 1024
    keepalive_s: int = 30
    http: HttpUpstream | None = None  # kind http only (docs/upstreams.md)
    mcp: McpUpstream | None = None  # kind mcp only (docs/upstreams.md)
