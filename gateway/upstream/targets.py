"""The one place an upstream kind maps to its implementation: `KINDS`, kind → the function
that prepares a capability over it for the snapshot (its input schema, the prepared call, the
method bound into approvals, what map_input builds). gateway/pipeline/snapshot.py calls
`prepare_target` for every capability, whatever its kind; a new kind is a row here."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from gateway.model import Capability
from gateway.upstream.call import (
    PROCEDURE_METHOD,
    UpstreamCall,
    grpc_call,
    procedure_call,
    rerun_safe,
)
from gateway.upstream.descriptors import resolve_method
from gateway.upstream.errors import UpstreamConfigError
from gateway.upstream.http import http_call
from gateway.upstream.mcpcall import McpToolCall, load_tool, plain_schema, schema_problems
from gateway.upstream.mcpclient import McpClient
from gateway.upstream.schema import derive_schema
from gateway.upstream.spec import Upstream

if TYPE_CHECKING:
    from google.protobuf.descriptor_pool import DescriptorPool

    from gateway.upstream.channels import ChannelPool

__all__ = [
    "KINDS",
    "LOAD_TIMEOUT_S",
    "DescriptorLookup",
    "Target",
    "TargetRefused",
    "UpstreamUnusable",
    "prepare_target",
]

LOAD_TIMEOUT_S = 10.0  # listing an MCP server's tools at load

# A gRPC upstream's descriptors for a capability: the pool, why there is none, or None when it
# was not resolved (server reflection, not asked for). The snapshot looks each upstream up once.
DescriptorLookup = Callable[
    [Upstream, Capability], Awaitable["DescriptorPool | UpstreamConfigError | None"]
]


@dataclass(frozen=True, slots=True)
class Target:
    capability: Capability  # with the schemas the upstream supplied, when config had none
    input_schema: Mapping[str, Any]
    call: UpstreamCall
    method: str  # bound into the approval digest with the schema
    # What map_input builds, when the capability has one (docs/cache.md#input-mappers).
    request_schema: Mapping[str, Any] | None = None


class TargetRefused(UpstreamConfigError):
    """A capability that cannot be prepared; `key`: the capability's key the problem is at
    (`upstream`, `method`), None for the capability itself."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class UpstreamUnusable(UpstreamConfigError):
    """The upstream's own problem (its descriptors could not be looked up): reported once at
    the upstream by whoever looked it up, not at each capability."""


async def prepare_target(
    cap: Capability,
    upstream: Upstream,
    pool: ChannelPool,
    *,
    connect: bool,
    descriptors: DescriptorLookup,
) -> Target | None:
    """The prepared target; None when it needs the upstream and `connect` (or, for kind grpc,
    the descriptor lookup) did not resolve it (`capgate config check` without resolving);
    raises `UpstreamConfigError` (`TargetRefused`, `UpstreamUnusable`) when it cannot be
    prepared."""
    prepare = KINDS.get(upstream.kind)
    if prepare is None:
        raise TargetRefused(f"kind {upstream.kind} is not a known upstream kind")
    return await prepare(_Site(cap, upstream, pool, connect, descriptors))


@dataclass(frozen=True, slots=True)
class _Site:
    """What every kind's preparation is given."""

    cap: Capability
    upstream: Upstream
    pool: ChannelPool
    connect: bool  # False: `capgate config check` without resolving upstreams
    descriptors: DescriptorLookup


async def _grpc_target(site: _Site) -> Target | None:
    """Kind grpc: the method resolved in the upstream's descriptors; the input schema derived
    from its request message unless the config gives one."""
    cap, upstream = site.cap, site.upstream
    channel = _channel(site)
    found = await site.descriptors(upstream, cap)
    if found is None:
        return None
    if isinstance(found, UpstreamConfigError):
        raise UpstreamUnusable(str(found))
    try:
        info = resolve_method(found, cap.method)
    except UpstreamConfigError as exc:
        raise TargetRefused(str(exc), key="method") from None
    input_schema = cap.input_schema if cap.input_schema is not None else derive_schema(info.input)
    request = derive_schema(info.input) if cap.map_input else None
    call = grpc_call(channel, info, upstream=upstream)
    return Target(cap, input_schema, call, info.full_method, request)


async def _procedure_target(site: _Site) -> Target | None:
    """Kind procedure: capgate's own Procedure service, the schema the config's."""
    cap, upstream = site.cap, site.upstream
    channel = _channel(site)
    if cap.input_schema is None:
        raise TargetRefused("a procedure upstream needs input_schema")
    call = procedure_call(channel, cap.id, upstream=upstream)
    method = cap.method or PROCEDURE_METHOD
    return Target(cap, cap.input_schema, call, method, cap.map_input_schema)


def _channel(site: _Site) -> Any:
    try:
        return site.pool.channel(site.upstream)  # reads the upstream's TLS files
    except UpstreamConfigError as exc:
        raise TargetRefused(str(exc), key="upstream") from None


async def _http_target(site: _Site) -> Target | None:
    """Kind http: one HTTP request per call, the schema the config's."""
    cap, upstream, pool = site.cap, site.upstream, site.pool
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


async def _mcp_target(site: _Site) -> Target | None:
    """Kind mcp: the tool as the server lists it now, its schemas unless the config gives
    them."""
    cap, upstream, pool = site.cap, site.upstream, site.pool
    if cap.tool is None:
        raise UpstreamConfigError("an mcp upstream needs tool")
    client = pool.http.shared(upstream, lambda http: McpClient(http, upstream))
    if not site.connect:
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


_Prepare = Callable[[_Site], Awaitable[Target | None]]

# kind → how a capability over it is prepared: the one dispatch on an upstream's kind.
KINDS: Final[Mapping[str, _Prepare]] = {
    "grpc": _grpc_target,
    "procedure": _procedure_target,
    "http": _http_target,
    "mcp": _mcp_target,
}
