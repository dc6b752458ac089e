"""Preparing the capabilities of upstreams served over HTTP (`kind: http`, `kind: mcp`) for the
snapshot: their input and output schemas, the prepared call, and the name bound into approvals
(the gRPC kinds are prepared in gateway/pipeline/snapshot.py from descriptors)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.model import Capability
from gateway.upstream.call import UpstreamCall, rerun_safe
from gateway.upstream.errors import UpstreamConfigError
from gateway.upstream.http import http_call
from gateway.upstream.mcpcall import McpToolCall, load_tool, plain_schema, schema_problems
from gateway.upstream.mcpclient import McpClient
from gateway.upstream.spec import Upstream

if TYPE_CHECKING:
    from gateway.upstream.channels import ChannelPool

__all__ = ["LOAD_TIMEOUT_S", "Target", "prepare_target"]

LOAD_TIMEOUT_S = 10.0  # listing an MCP server's tools at load


@dataclass(frozen=True, slots=True)
class Target:
    capability: Capability  # with the schemas the upstream supplied, when config had none
    input_schema: Mapping[str, Any]
    call: UpstreamCall
    method: str  # bound into the approval digest with the schema
    # What map_input builds, when the capability has one (docs/cache.md#input-mappers).
    request_schema: Mapping[str, Any] | None = None


async def prepare_target(
    cap: Capability, upstream: Upstream, pool: ChannelPool, *, connect: bool
) -> Target | None:
    """The prepared target; None when it needs the upstream and `connect` is False (`capgate
    config check` without resolving); raises `UpstreamConfigError` when it cannot be prepared."""
    if upstream.kind == "http":
        if cap.http is None or cap.input_schema is None:
            raise UpstreamConfigError("an http upstream needs http and input_schema")
        call = http_call(
            pool.http,
            upstream,
            cap.http,
            effect_free=cap.side_effect in ("none", "read"),
            rerun_safe=rerun_safe(cap),
        )
        request = cap.map_input_schema if cap.map_input else None
        return Target(cap, cap.input_schema, call, call.full_method, request)
    if upstream.kind == "mcp" and cap.tool is not None:
        return await _mcp_target(cap, upstream, pool, connect=connect)
    raise UpstreamConfigError(f"kind {upstream.kind} is not served over HTTP")


async def _mcp_target(
    cap: Capability, upstream: Upstream, pool: ChannelPool, *, connect: bool
) -> Target | None:
    """The tool as the server lists it now: its schemas unless the config gives them."""
    assert cap.tool is not None
    client = pool.http.shared(upstream, lambda http: McpClient(http, upstream))
    if not connect:
        return None
    tool, generation = await load_tool(client, cap.tool, timeout_s=LOAD_TIMEOUT_S)
    arguments = _checked(tool.get("inputSchema"), f"tool {cap.tool} inputSchema")
    input_schema = cap.input_schema if cap.input_schema is not None else arguments
    output_schema = cap.output_schema
    if output_schema is None and tool.get("outputSchema") is not None:
        output_schema = _checked(tool.get("outputSchema"), f"tool {cap.tool} outputSchema")
    found = dataclasses.replace(cap, input_schema=input_schema, output_schema=output_schema)
    call = McpToolCall(client, tool, generation)
    # map_input builds the tool's arguments: the tool's inputSchema is what it builds.
    request = arguments if cap.map_input else None
    return Target(found, input_schema, call, call.full_method, request)


def _checked(schema: Any, what: str) -> Mapping[str, Any]:
    problems = schema_problems(schema, what)
    if problems:
        raise UpstreamConfigError("; ".join(problems[:5]))
    assert isinstance(schema, Mapping)
    return plain_schema(schema)
