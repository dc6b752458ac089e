"""Preparing the capabilities of upstreams served over HTTP (`kind: http`, `kind: mcp`) for the
snapshot: their input and output schemas, the prepared call, and the name bound into approvals
(the gRPC kinds are prepared in gateway/snapshot.py from descriptors)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.model import Capability
from gateway.settings import Upstream
from gateway.upstream.call import UpstreamCall
from gateway.upstream.errors import UpstreamConfigError
from gateway.upstream.http import http_call

if TYPE_CHECKING:
    from gateway.upstream.channels import ChannelPool

__all__ = ["Target", "prepare_target"]


@dataclass(frozen=True, slots=True)
class Target:
    capability: Capability  # with the schemas the upstream supplied, when config had none
    input_schema: Mapping[str, Any]
    call: UpstreamCall
    method: str  # bound into the approval digest with the schema


async def prepare_target(
    cap: Capability, upstream: Upstream, pool: ChannelPool, *, connect: bool
) -> Target | None:
    """The prepared target; None when it needs the upstream and `connect` is False (`capgate
    config check` without resolving); raises `UpstreamConfigError` when it cannot be prepared."""
    if upstream.kind == "http":
        if cap.http is None or cap.input_schema is None:
            raise UpstreamConfigError("an http upstream needs http and input_schema")
        call = http_call(pool.http, upstream, cap.http)
        return Target(cap, cap.input_schema, call, call.full_method)
    raise UpstreamConfigError(f"kind {upstream.kind} is not served over HTTP")
