"""`kind: mcp` capabilities: one MCP tool each (docs/upstreams.md "MCP upstreams", ADR 0028).

At load the server's tools are listed: the capability's `tool` must be there, its `inputSchema`
becomes the input schema (unless the config gives one: the config is authoritative) and its
`outputSchema` the output schema (likewise). A schema using what capgate's validator does not
implement — JSON Schema keywords after draft 7 such as `unevaluatedProperties` or
`prefixItems`, a `$ref` outside the document, an unknown `$schema` — is refused at load, since
a keyword the validator ignored would let through input the server's author meant to refuse.

A call is `tools/call` with the validated input (or what map_input built). The result:

| tools/call answer                             | code             | exposed     | state     |
|-----------------------------------------------|------------------|-------------|-----------|
| `structuredContent`                           | (the output)     |             | COMPLETED |
| text content: strict JSON, else the text      | (the output)     |             | COMPLETED |
| `isError: true`                               | EXECUTION_FAILED | its text    | COMPLETED |
| JSON-RPC error -32600, -32601, -32602         | EXECUTION_FAILED | no          | COMPLETED |
| any other JSON-RPC error (-32603, server's)   | EXECUTION_FAILED | no          | UNKNOWN   |
| transport failures                            | as for `kind: http` (gateway/upstream/http.py)  |

`isError` text is the tool's deliberate answer to the model (the MCP spec says so), shown
sanitised and bounded (`public_text`). When the server announced `tools/list_changed` since the
tool was checked, the call lists the tools again first and refuses (NOT_STARTED) if this tool's
schemas changed: policies and approvals were written against the schemas at load; a reload
picks up the new ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from typing import Any, Final

from gateway.errors import CapabilityError, Code
from gateway.upstream.errors import UpstreamConfigError, UpstreamUnreachable
from gateway.upstream.headers import Metadata
from gateway.upstream.httpclient import (
    SentTracker,
    answered,
    deadline_exceeded,
    public_text,
    transport_failure,
)
from gateway.upstream.mcpclient import McpClient, McpProtocolError
from gateway.upstream.state import UPSTREAM_STATUS_KEY, ExecutionState, with_state
from gateway.values.canonical import canonical_json
from gateway.values.jsonvalue import parse_strict

__all__ = [
    "UNSUPPORTED_KEYWORDS",
    "McpToolCall",
    "draft_tool_capabilities",
    "find_tool",
    "load_tool",
    "plain_schema",
    "schema_problems",
    "tool_output",
]

# Keywords of JSON Schema 2019-09 / 2020-12 that a draft 7 validator would silently ignore.
UNSUPPORTED_KEYWORDS: Final = frozenset(
    {
        "unevaluatedProperties",
        "unevaluatedItems",
        "prefixItems",
        "dependentSchemas",
        "dependentRequired",
        "minContains",
        "maxContains",
        "$dynamicRef",
        "$dynamicAnchor",
        "$recursiveRef",
        "$recursiveAnchor",
        "$anchor",
        "$vocabulary",
        "contentSchema",
    }
)
_SCHEMAS: Final = frozenset(
    {
        "http://json-schema.org/draft-07/schema#",
        "http://json-schema.org/draft-07/schema",
        "https://json-schema.org/draft/2020-12/schema",
    }
)
_FORWARDED_PREFIXES: Final = ("x-capgate-", "traceparent", "tracestate")
# JSON-RPC errors that say the request was refused before any tool ran: invalid request,
# method not found, invalid params. Any other code (-32603 internal error, a server's own
# -32000..-32099 or application codes) may come after the tool acted: UNKNOWN.
_NOT_RUN_ERRORS: Final = frozenset({-32600, -32601, -32602})


def _walk(node: Any, path: str) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            where = f"{path}/{key}"
            if key in UNSUPPORTED_KEYWORDS:
                yield f"{where}: {key} is not supported (capgate validates JSON Schema draft 7)"
            elif key == "$ref" and not (isinstance(value, str) and value.startswith("#")):
                yield f"{where}: only references inside the schema (#/...) are supported"
            elif key == "$schema" and path and value not in _SCHEMAS:
                yield f"{where}: not a schema version capgate supports"
            if key not in ("properties", "$defs", "definitions", "patternProperties"):
                yield from _walk(value, where)
            elif isinstance(value, dict):
                for name, sub in value.items():
                    yield from _walk(sub, f"{where}/{name}")
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _walk(item, f"{path}/{index}")


def schema_problems(schema: Any, what: str) -> list[str]:
    """Why a tool's schema cannot be used (empty when it can)."""
    if not isinstance(schema, dict):
        return [f"{what} is not a JSON object"]
    problems = [f"{what}{p}" for p in _walk(schema, "")]
    declared = schema.get("$schema")
    if declared is not None and declared not in _SCHEMAS:
        problems.append(f"{what}/$schema: not a schema version capgate supports")
    return problems


def plain_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema without its `$schema` (the validator is draft 7; 2020-12 documents that use
    none of the keywords refused above mean the same there)."""
    return {k: v for k, v in schema.items() if k != "$schema"}


def find_tool(tools: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    return next((t for t in tools if t.get("name") == name), None)


def _signature(tool: Mapping[str, Any] | None) -> bytes:
    if tool is None:
        return b""
    return canonical_json({"input": tool.get("inputSchema"), "output": tool.get("outputSchema")})


def tool_output(result: Mapping[str, Any], upstream: str) -> Any:
    """The output of a `tools/call` result, or the governed error (module table)."""
    content = result.get("content")
    items = content if isinstance(content, list) else []
    texts = [i["text"] for i in items if isinstance(i, dict) and isinstance(i.get("text"), str)]
    if result.get("isError") is True:
        error = CapabilityError(
            Code.EXECUTION_FAILED,
            message=public_text(" ".join(texts)),
            reason=f"upstream {upstream}: the tool answered isError",
            expose_to_model=True,
        )
        error.details["contract_reason"] = "mcp_is_error"
        raise answered(error, "MCP isError")
    structured = result.get("structuredContent")
    if structured is not None:
        return structured
    if not texts:
        reason = f"upstream {upstream}: no structuredContent and no text content"
        raise answered(CapabilityError(Code.OUTPUT_INVALID, reason=reason), "MCP result")
    text = "".join(texts)
    try:
        return parse_strict(text.encode(), what="tool text")
    except CapabilityError:
        return text


class McpToolCall:
    """The prepared call of one capability on a `kind: mcp` upstream."""

    def __init__(self, client: McpClient, tool: Mapping[str, Any], generation: int) -> None:
        self.tool = str(tool["name"])
        self.full_method = f"tools/call {self.tool}"
        # The attempt span's attributes: MCP is JSON-RPC (as the MCP listener's SERVER span).
        self.span_attributes: dict[str, str] = {
            "rpc.system": "jsonrpc",
            "rpc.method": "tools/call",
            "mcp.method.name": "tools/call",
            "gen_ai.tool.name": self.tool,
        }
        self._client = client
        self._signature = _signature(tool)
        self._checked = generation  # the client's tool-list generation the schemas are from

    async def __call__(
        self,
        input_value: Any,
        *,
        timeout: float,  # noqa: ASYNC109 - the attempt's share of the deadline
        metadata: Metadata = (),
    ) -> Any:
        headers = {k: v for k, v in metadata if k.startswith(_FORWARDED_PREFIXES)}
        sent = SentTracker()
        upstream = self._client.upstream
        try:
            async with asyncio.timeout(timeout):
                await self._still_the_same()
                result = await self._client.call_tool(
                    self.tool, input_value, sent=sent, headers=headers
                )
        except TimeoutError:
            raise deadline_exceeded(upstream, sent) from None
        except McpProtocolError as err:
            error = CapabilityError(Code.EXECUTION_FAILED, reason=f"upstream {upstream}: {err}")
            error.details[UPSTREAM_STATUS_KEY] = f"JSON-RPC {err.code}"
            refused = err.code in _NOT_RUN_ERRORS
            state = ExecutionState.COMPLETED if refused else ExecutionState.UNKNOWN
            raise with_state(error, state) from None
        return tool_output(result, upstream)

    async def _still_the_same(self) -> None:
        """After tools/list_changed: refuse the call when this tool's schemas changed."""
        if self._client.generation == self._checked:
            return
        try:
            tools, generation = await self._client.current_tools()
        except (CapabilityError, McpProtocolError) as err:
            reason = f"upstream {self._client.upstream}: tools/list after list_changed: {err}"
            raise transport_failure(Code.UPSTREAM_UNAVAILABLE, reason, sent=False) from None
        if _signature(find_tool(tools, self.tool)) != self._signature:
            reason = (
                f"upstream {self._client.upstream}: tool {self.tool} changed since the config "
                "was loaded (reload to take the new schemas)"
            )
            error = CapabilityError(Code.EXECUTION_FAILED, reason=reason)
            raise with_state(error, ExecutionState.NOT_STARTED)
        self._checked = generation


async def load_tool(
    client: McpClient, name: str, *, timeout_s: float
) -> tuple[dict[str, Any], int]:
    """The tool named `name` as the server lists it now, with the list's generation; raises
    `UpstreamConfigError` when the server cannot be reached or lists no such tool."""
    try:
        async with asyncio.timeout(timeout_s):
            tools, generation = await client.current_tools(refresh=True)
    except TimeoutError:
        raise UpstreamUnreachable(f"tools/list took longer than {timeout_s:g}s") from None
    except CapabilityError as err:  # the call failed on its way: the server may answer later
        raise UpstreamUnreachable(f"cannot list the server's tools: {err.reason}") from None
    except McpProtocolError as err:
        raise UpstreamConfigError(f"tools/list failed: {err}") from None
    tool = find_tool(tools, name)
    if tool is None:
        raise UpstreamConfigError(f"the server lists no tool named {name!r}")
    return tool, generation


def draft_tool_capabilities(
    tools: list[dict[str, Any]], *, upstream: str, prefix: str
) -> list[dict[str, Any]]:
    """Capabilities (config mappings) for every tool a server lists, to review: the tool's
    annotations only suggest `side_effect` and `idempotent` (`readOnlyHint` → read,
    `destructiveHint` true or absent on a non-read-only tool → destructive, else write,
    `idempotentHint` → idempotent), risk follows, and `expose: {}` hides each one until someone
    exposes it (SI-1). The schemas are not copied: they are read from the server at load."""
    drafts = []
    for tool in tools:
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            continue
        found = tool.get("annotations")
        hints: dict[str, Any] = found if isinstance(found, dict) else {}
        if hints.get("readOnlyHint") is True:
            side_effect = "read"
        elif hints.get("destructiveHint") is False:
            side_effect = "write"
        else:  # MCP: destructiveHint defaults to true for tools that are not read-only
            side_effect = "destructive"
        slug = "".join(c if c.isalnum() else "_" for c in name.lower()).strip("_") or "tool"
        draft: dict[str, Any] = {
            "id": f"{prefix}.{slug if slug[0].isalpha() else 'tool_' + slug}",
            "description": " ".join(str(tool.get("description") or name).split())[:500],
            "upstream": upstream,
            "tool": name,
            "side_effect": side_effect,
            "risk": {"read": "low", "write": "medium"}.get(side_effect, "high"),
            "expose": {},
        }
        if hints.get("idempotentHint") is True and side_effect != "read":
            draft["idempotent"] = True
        drafts.append(draft)
    return drafts
