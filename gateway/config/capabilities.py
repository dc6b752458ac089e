"""Checks of upstreams and capabilities: references, methods, schemas, redaction, retries.

Methods of upstreams with a descriptor set are looked up at load, so a typo or a streaming
method (§12: only unary methods) fails `capgate config check` rather than the first call.
Unknown policy names are checked where the policy set is loaded (gateway/pipeline/snapshot.py, run
by
`capgate config check` and `serve` alike, gateway/process/load.py).
"""

from __future__ import annotations

import logging
import re
from typing import Any

import fastjsonschema
from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError

from gateway.config.cachescope import reads_actor, uncovered_reads
from gateway.config.context import Ctx, check_port, items, mapping, plain, seconds_of, text
from gateway.config.kinds import check_grpc_plaintext, check_http_capability, check_http_upstream
from gateway.config.problems import PathParts
from gateway.config.source import LDict
from gateway.values.outputexpr import OutputExpr, OutputExprError
from gateway.values.redact import RedactPathError, parse_path

log = logging.getLogger("gateway.config")

PROCEDURE_METHOD = "/capgate.v1.Procedure/Invoke"
_TLS_ONLY = ("ca_file", "client_cert_file", "client_key_file", "server_name")
_NO_RETRY_EFFECTS = ("write", "destructive")

# method -> (client_streaming, server_streaming), per upstream with a descriptor set
Methods = dict[str, tuple[bool, bool]]


def check_upstreams(ctx: Ctx) -> dict[str, Methods]:
    """Check every upstream; return the methods known from descriptor sets, by upstream."""
    known: dict[str, Methods] = {}
    for name, upstream in mapping(ctx.root.get("upstreams")).items():
        if not isinstance(upstream, LDict):
            continue
        parts: PathParts = ("upstreams", name)
        check_port(ctx, text(upstream, "address"), (*parts, "address"))
        ctx.whole_seconds(upstream, "keepalive", parts)
        ctx.positive(upstream, "keepalive", parts)
        if upstream.get("tls") is not True:
            for key in _TLS_ONLY:
                if key in upstream:
                    ctx.fail((*parts, key), "only used with tls: true")
        if ("client_cert_file" in upstream) != ("client_key_file" in upstream):
            ctx.fail(parts, "client_cert_file and client_key_file go together")
        for key in ("ca_file", "client_cert_file", "client_key_file"):
            ctx.existing_file(upstream, key, parts)
        check_http_upstream(ctx, upstream, parts)  # kind http (gateway/config/kinds.py)
        check_grpc_plaintext(ctx, upstream, parts)  # the actor token over the network
        if text(upstream, "kind") in ("http", "mcp"):
            continue
        if "descriptor_set" in upstream and text(upstream, "kind", "grpc") == "procedure":
            ctx.fail((*parts, "descriptor_set"), "not used by procedure upstreams")
            continue
        path = ctx.existing_file(upstream, "descriptor_set", parts)
        if path is not None:
            methods = _methods(path.read_bytes())
            if methods is None:
                ctx.fail((*parts, "descriptor_set"), "not a serialized FileDescriptorSet")
            else:
                known[name] = methods
    return known


def _methods(data: bytes) -> Methods | None:
    fds = descriptor_pb2.FileDescriptorSet()
    try:
        fds.ParseFromString(data)
    except DecodeError:
        return None
    out: Methods = {}
    for file in fds.file:
        prefix = f"{file.package}." if file.package else ""
        for service in file.service:
            for method in service.method:
                key = f"/{prefix}{service.name}/{method.name}"
                out[key] = (method.client_streaming, method.server_streaming)
    return out


def check_capabilities(ctx: Ctx, methods: dict[str, Methods]) -> None:
    upstreams = mapping(ctx.root.get("upstreams"))
    surfaces = {text(lst, "surface") for _, lst in items(ctx.root.get("listeners"))}
    hmac_key = text(mapping(ctx.root.get("audit")), "hmac_key")
    ids: dict[str, int] = {}
    for i, cap in items(ctx.root.get("capabilities")):
        parts: PathParts = ("capabilities", i)
        cap_id = text(cap, "id")
        if cap_id in ids:
            ctx.fail((*parts, "id"), f"duplicate capability id (also capabilities[{ids[cap_id]}])")
        ids.setdefault(cap_id, i)
        _check_target(ctx, cap, parts, upstreams, methods)
        for key in ("input_schema", "output_schema"):
            _check_json_schema(ctx, cap.get(key), (*parts, key))
        _check_redact(ctx, mapping(cap.get("redact")), (*parts, "redact"), hmac_key)
        approval = mapping(cap.get("approval"))
        inline = approval.get("inline_approver")
        if isinstance(inline, str) and inline not in upstreams:
            ctx.fail((*parts, "approval", "inline_approver"), "no upstream with this name")
        ctx.positive(approval, "expires_in", (*parts, "approval"))
        _check_escalation(ctx, approval, (*parts, "approval"))
        ctx.positive(cap, "timeout", parts)
        retry = mapping(cap.get("retry"))
        low, high = seconds_of(retry, "initial_backoff"), seconds_of(retry, "max_backoff")
        if low is not None and high is not None and high < low:
            ctx.fail((*parts, "retry", "max_backoff"), "must not be less than initial_backoff")
        _check_cache_and_mapper(ctx, cap, parts, upstreams)
        _warn(cap, cap_id, surfaces)


def _check_escalation(ctx: Ctx, approval: LDict, parts: PathParts) -> None:
    """`escalate_after` and `escalation_roles` come together (docs/approvals.md, Escalation)."""
    ctx.positive(approval, "escalate_after", parts)
    if "escalation_roles" in approval and "escalate_after" not in approval:
        ctx.fail((*parts, "escalation_roles"), "escalation_roles needs escalate_after")
    if "escalate_after" in approval and "escalation_roles" not in approval:
        ctx.fail((*parts, "escalate_after"), "escalate_after needs escalation_roles")


def _check_target(
    ctx: Ctx, cap: LDict, parts: PathParts, upstreams: LDict, methods: dict[str, Methods]
) -> None:
    name = text(cap, "upstream")
    if name and name not in upstreams:
        ctx.fail((*parts, "upstream"), "no upstream with this name")
        return
    kind = text(mapping(upstreams.get(name)), "kind", "grpc")
    method = cap.get("method")
    if check_http_capability(ctx, cap, parts, kind):
        return
    if kind == "procedure":
        if method is not None and method != PROCEDURE_METHOD:
            ctx.fail((*parts, "method"), f"procedure upstreams are called at {PROCEDURE_METHOD}")
        if "input_schema" not in cap:
            ctx.fail(parts, "input_schema is required for a procedure upstream")
        return
    if method is None:
        ctx.fail(parts, "method is required for a grpc upstream")
        return
    known = methods.get(name)
    if known is None or not isinstance(method, str):
        return  # no descriptor set: resolved by server reflection when the upstream connects
    who = f"upstream {name} (capability {text(cap, 'id')})"
    if method not in known:
        ctx.fail((*parts, "method"), f"{who}: {method} is not in the upstream's descriptor set")
    elif any(known[method]):
        message = f"{who}: {method} is a streaming method; only unary methods are supported"
        ctx.fail((*parts, "method"), message)


def _check_cache_and_mapper(ctx: Ctx, cap: LDict, parts: PathParts, upstreams: LDict) -> None:
    """docs/cache.md: a cache only where a repeat is harmless; map_input_schema describes what
    map_input builds for a procedure upstream (a grpc method's request message does that).
    The CEL texts are type-checked with the snapshot, where the upstream messages are known."""
    effect = cap.get("side_effect")
    if "cache" in cap and effect not in ("none", "read"):
        ctx.fail(
            (*parts, "cache"),
            f"only capabilities with side_effect none or read are cached, not {effect}",
        )
    mapper = cap.get("map_input")
    scope = mapping(cap.get("cache")).get("scope")
    if scope == "shared" and isinstance(mapper, str) and reads_actor(mapper):  # per caller
        ctx.fail(
            (*parts, "cache", "scope"),
            "a shared cache cannot serve a map_input that reads actor: use scope actor "
            "or a key that covers what the mapping reads",
        )
    key = mapping(scope).get("key") if isinstance(scope, dict) else None
    if isinstance(key, str) and isinstance(mapper, str):
        missing = uncovered_reads(mapper, key)
        if missing:  # entries keyed by one field, requests built from another: a leak
            ctx.fail(
                (*parts, "cache", "scope", "key"),
                f"map_input reads {', '.join(missing)}, which the scope key never names: "
                "callers with the same key would share answers to different requests; use "
                "scope actor or a key that covers what the mapping reads",
            )
    kind = text(mapping(upstreams.get(text(cap, "upstream"))), "kind", "grpc")
    if "map_input_schema" in cap:
        if "map_input" not in cap:
            ctx.fail((*parts, "map_input_schema"), "only used with map_input")
        elif kind not in ("procedure", "http"):
            ctx.fail(
                (*parts, "map_input_schema"),
                f"{kind} upstreams: the method's request message (grpc) or the tool's "
                "inputSchema (mcp) is the schema",
            )
        _check_json_schema(ctx, cap.get("map_input_schema"), (*parts, "map_input_schema"))
    elif "map_input" in cap and kind in ("procedure", "http"):
        ctx.fail((*parts, "map_input"), f"a {kind} upstream needs map_input_schema with map_input")


def _check_json_schema(ctx: Ctx, schema: Any, parts: PathParts) -> None:
    if not isinstance(schema, dict):
        return
    try:
        fastjsonschema.compile(plain(schema))
    except fastjsonschema.JsonSchemaDefinitionException as exc:
        ctx.fail(parts, f"not a valid JSON Schema: {exc}")
    except (TypeError, ValueError, KeyError, AttributeError, re.error):
        # fastjsonschema trips over some malformed schemas (e.g. a bad regex) with plain errors.
        ctx.fail(parts, "not a valid JSON Schema")


def _check_redact(ctx: Ctx, redact: LDict, parts: PathParts, hmac_key: str) -> None:
    for key in ("output", "approval_input"):
        for r, rule in items(redact.get(key)):
            path = rule.get("path")
            if isinstance(path, str):
                try:
                    parse_path(path)
                except RedactPathError:
                    message = "unsupported path: use $.a.b, $.items[*].c or $['key']"
                    ctx.fail((*parts, key, r, "path"), message)
            if rule.get("action") == "hmac" and not hmac_key:
                ctx.fail((*parts, key, r, "action"), "hmac redaction needs audit.hmac_key")
    expr = redact.get("output_expr")
    if isinstance(expr, str) and expr:
        try:
            OutputExpr(expr)  # compiled again for the snapshot; here only to report at load
        except OutputExprError as exc:
            # One line per problem: cel-cpp's caret drawing below the message is left out.
            ctx.fail((*parts, "output_expr"), str(exc).splitlines()[0])


def _warn(cap: LDict, cap_id: str, surfaces: set[str]) -> None:
    retry = mapping(cap.get("retry"))
    attempts = retry.get("max_attempts")
    if (
        isinstance(attempts, int)
        and attempts > 0
        and cap.get("side_effect") in _NO_RETRY_EFFECTS
        and cap.get("idempotent") is not True
    ):
        # SI-11: the runtime never retries these; the setting is accepted but has no effect.
        log.warning(
            "capability %s: retry.max_attempts has no effect on a %s capability that is not "
            "idempotent (SI-11)",
            cap_id,
            cap.get("side_effect"),
        )
    for surface, on in mapping(cap.get("expose")).items():
        if on is True and surface not in surfaces:
            log.warning(
                "capability %s: exposed on surface %s, which no listener serves", cap_id, surface
            )
