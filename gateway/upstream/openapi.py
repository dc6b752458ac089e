"""Capabilities for a `kind: http` upstream drafted from an OpenAPI 3 document
(`capgate config openapi FILE --upstream NAME`; docs/upstreams.md section 9).

The output is config to review, not config applied at load: the config stays authoritative.
Each operation becomes one capability with its `http` block (method, path, query parameters,
body), an `input_schema` from its parameters and JSON request body, and an `output_schema`
from its first 2xx JSON response. What capgate decides is drafted conservatively: the
`side_effect` from the method (GET and HEAD `read`, DELETE `destructive`, others `write`), risk
`medium` for writes, and `expose: {}` — hidden everywhere until someone exposes it (SI-1).

Operations that cannot be mapped safely are left out with the reason, never approximated: a
path placeholder that is not a whole segment (`/files/{id}.json`), a path parameter that is not
a string or integer, a query parameter that is not a scalar, header or cookie parameters, a
non-JSON or non-object request body, a body property named like a parameter, `$ref`s that
leave the document or recurse, and schemas using JSON Schema keywords after draft 7 (the same
rule as MCP tool schemas, gateway/upstream/mcpcall.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from gateway.upstream.mcpcall import schema_problems

__all__ = ["Draft", "draft_capabilities"]

_METHODS: Final = ("get", "post", "put", "patch", "delete")
_SEGMENT: Final = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=:@-]+|\{[A-Za-z_][A-Za-z0-9_]*\}")
_SCALARS: Final = frozenset({"string", "integer", "number", "boolean"})
_MAX_REF_DEPTH: Final = 32


class Unmappable(Exception):
    """Why an operation is left out."""


@dataclass(frozen=True, slots=True)
class Draft:
    """The drafted capabilities (config mappings) and the operations left out, with why."""

    capabilities: list[dict[str, Any]]
    skipped: list[str]


def _resolve(node: Any, root: Mapping[str, Any], depth: int = 0) -> Any:
    """`node` with every local `$ref` inlined."""
    if depth > _MAX_REF_DEPTH:
        raise Unmappable("$ref nesting deeper than 32 (recursive schema?)")
    if isinstance(node, dict):
        ref = node.get("$ref")
        if ref is not None:
            if not isinstance(ref, str) or not ref.startswith("#/"):
                raise Unmappable(f"$ref {ref!r} leaves the document")
            target: Any = root
            for raw in ref[2:].split("/"):
                part = raw.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, dict) or part not in target:
                    raise Unmappable(f"$ref {ref} points nowhere")
                target = target[part]
            return _resolve(target, root, depth + 1)
        return {k: _resolve(v, root, depth + 1) for k, v in node.items()}
    if isinstance(node, list):
        return [_resolve(v, root, depth + 1) for v in node]
    return node


def _capability_id(prefix: str, operation: Mapping[str, Any], method: str, path: str) -> str:
    raw = operation.get("operationId") or f"{method}_{path}"
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", str(raw)).lower()
    slug = re.sub(r"[^a-z0-9_-]+", "_", words).strip("_-") or "op"
    if not slug[0].isalpha():
        slug = f"op_{slug}"
    return f"{prefix}.{slug}"


def _json_schema(content: Any) -> Any:
    if not isinstance(content, dict):
        return None
    for media, entry in content.items():
        if media.split(";", 1)[0].strip() == "application/json" and isinstance(entry, dict):
            return entry.get("schema")
    return None


def _operation(
    root: Mapping[str, Any], path: str, method: str, operation: Mapping[str, Any], shared: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(http block, input schema) of one operation."""
    segments = path.split("/")[1:]
    if path != "/" and not all(_SEGMENT.fullmatch(s) for s in segments):
        raise Unmappable("a path placeholder is not a whole segment, or a segment is empty")
    if any(s in (".", "..") for s in segments):
        raise Unmappable("a . or .. path segment")
    properties: dict[str, Any] = {}
    required: list[str] = []
    query: list[str] = []
    listed = [*_resolve(shared or [], root), *_resolve(operation.get("parameters", []), root)]
    if not all(isinstance(p, dict) for p in listed):
        raise Unmappable("a parameter is not an object")
    # An operation's parameter overrides the path item's of the same name and location.
    parameters = list({(p.get("name"), p.get("in")): p for p in listed}.values())
    for param in parameters:
        name, where = param.get("name"), param.get("in")
        schema = param.get("schema") if isinstance(param.get("schema"), dict) else {}
        if where not in ("path", "query"):
            raise Unmappable(f"{where} parameter {name}: only path and query are mapped")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise Unmappable(f"parameter name {name!r} is not an identifier")
        if where == "path":
            if schema.get("type") not in ("string", "integer"):
                raise Unmappable(f"path parameter {name} is not a string or integer")
            required.append(name)
        else:
            if schema.get("type") not in _SCALARS:
                raise Unmappable(f"query parameter {name} is not a scalar")
            query.append(name)
            if param.get("required") is True:
                required.append(name)
        properties[name] = schema or {"type": "string"}
    placeholders = {s[1:-1] for s in segments if s.startswith("{")}
    if placeholders != {n for n in required if n not in query}:
        raise Unmappable("path placeholders and path parameters differ")
    body = _resolve(operation.get("requestBody"), root)
    http: dict[str, Any] = {"method": method.upper(), "path": path}
    if query:
        http["query"] = query
    if isinstance(body, dict):
        schema = _json_schema(body.get("content"))
        if not isinstance(schema, dict) or schema.get("type") != "object":
            raise Unmappable("the request body is not a JSON object")
        for name, sub in (schema.get("properties") or {}).items():
            if name in properties:
                raise Unmappable(f"body property {name} has a parameter's name")
            properties[name] = sub
        required += [r for r in schema.get("required", []) if isinstance(r, str)]
        http["body"] = "input"
    elif method in ("post", "put", "patch"):
        http["body"] = "none"
    input_schema: dict[str, Any] = {"type": "object", "additionalProperties": False}
    input_schema["properties"] = properties
    if required:
        input_schema["required"] = list(dict.fromkeys(required))
    return http, input_schema


def _output_schema(root: Mapping[str, Any], operation: Mapping[str, Any]) -> Any:
    responses = operation.get("responses")
    if not isinstance(responses, dict):
        return None
    for status, entry in sorted(responses.items(), key=lambda kv: str(kv[0])):
        if str(status).startswith("2"):
            response = _resolve(entry, root)
            if isinstance(response, dict):
                return _json_schema(response.get("content"))
    return None


def draft_capabilities(document: Mapping[str, Any], *, upstream: str, prefix: str) -> Draft:
    """Capabilities for every mappable operation of an OpenAPI 3 `document`."""
    version = str(document.get("openapi", ""))
    if not version.startswith("3."):
        raise ValueError("not an OpenAPI 3 document (no openapi: 3.x)")
    capabilities: list[dict[str, Any]] = []
    skipped: list[str] = []
    for path, item in (document.get("paths") or {}).items():
        if not isinstance(item, dict):
            continue
        for method in _METHODS:
            operation = item.get(method)
            if not isinstance(operation, dict):
                continue
            where = f"{method.upper()} {path}"
            try:
                http, input_schema = _operation(
                    document, str(path), method, operation, item.get("parameters")
                )
                output = _resolve(_output_schema(document, operation), document)
            except Unmappable as why:
                skipped.append(f"{where}: {why}")
                continue
            problems = schema_problems(input_schema, "input") + (
                schema_problems(output, "output") if isinstance(output, dict) else []
            )
            if problems:
                skipped.append(f"{where}: {problems[0]}")
                continue
            side_effect = {"get": "read", "delete": "destructive"}.get(method, "write")
            summary = operation.get("summary") or operation.get("description") or where
            capability: dict[str, Any] = {
                "id": _capability_id(prefix, operation, method, str(path)),
                "description": " ".join(str(summary).split())[:500],
                "upstream": upstream,
                "http": http,
                "side_effect": side_effect,
                "risk": "low" if side_effect == "read" else "medium",
                "expose": {},
                "input_schema": input_schema,
            }
            if isinstance(output, dict):
                capability["output_schema"] = output
            capabilities.append(capability)
    return Draft(capabilities, skipped)
