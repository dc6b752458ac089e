"""Turning checked config data into the frozen `Settings` (runs only when no problem was found).

Keys absent from the file are not passed, so the dataclass defaults apply; a test pins the
schema's documented defaults to those dataclass defaults.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from gateway.config.capabilities import PROCEDURE_METHOD
from gateway.config.context import plain, resolve
from gateway.config.durations import parse_duration, whole_seconds
from gateway.config.hooks import build_hooks
from gateway.config.kinds import http_route, http_upstream, mcp_upstream
from gateway.config.limits import build_limits
from gateway.config.mcp import mcp_settings
from gateway.config.revision import SHORT_HASH
from gateway.config.settings import (
    ApprovalSettings,
    AuditSettings,
    CacheSettings,
    Defaults,
    IdempotencySettings,
    JwtAuth,
    JwtKey,
    Listener,
    MtlsAuth,
    NotifySettings,
    RedisSettings,
    Settings,
    TelemetrySettings,
    TlsSettings,
    TrustedLocalAuth,
    Webhook,
)
from gateway.model import (
    ApprovalSpec,
    CacheSpec,
    Capability,
    Limits,
    RedactRule,
    RedactSpec,
    RetrySpec,
)
from gateway.upstream.actor_token import ActorTokenSettings
from gateway.upstream.spec import Upstream
from gateway.values.canonical import canonical_json

Spec = dict[str, tuple[str, Callable[[Any], Any]]]


def _same(value: Any) -> Any:
    return value


def _kw(node: Any, spec: Spec) -> dict[str, Any]:
    """Dataclass keyword arguments for the keys present in `node` (YAML key -> field, convert)."""
    if not isinstance(node, Mapping):
        return {}
    return {name: convert(node[key]) for key, (name, convert) in spec.items() if key in node}


def short_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:SHORT_HASH]


def jwt_auth(node: Mapping[str, Any], base: Path) -> JwtAuth:
    """The JwtAuth of one listener's `jwt` block (also used by the checks to pre-load keys)."""
    return _Builder(base).jwt(node)


def _file_digest(path: str) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return "?"  # unreadable right now: the checks report it; a later load will differ


class _Builder:
    def __init__(self, base: Path) -> None:
        self.base = base

    def path(self, value: str) -> str:
        return str(resolve(self.base, value))

    def tls(self, node: Any) -> TlsSettings | None:
        if not isinstance(node, Mapping):
            return None
        client_ca = node.get("client_ca_file")
        return TlsSettings(
            cert_file=self.path(node["cert_file"]),
            key_file=self.path(node["key_file"]),
            client_ca_file=self.path(client_ca) if client_ca else None,
        )

    def jwt(self, node: Mapping[str, Any]) -> JwtAuth:
        keys = tuple(self.jwt_key(k) for k in node.get("keys", ()))
        jwks = node.get("jwks_file")
        return JwtAuth(
            keys=keys,
            jwks_digest=_file_digest(self.path(jwks)) if jwks else "",
            **_kw(
                node,
                {
                    "jwks_file": ("jwks_file", self.path),
                    "issuers": ("issuers", tuple),
                    "audience": ("audience", _same),
                    "max_lifetime": ("max_lifetime_s", whole_seconds),
                    "leeway": ("leeway_s", whole_seconds),
                    "id_claim": ("id_claim", _same),
                    "kind_claim": ("kind_claim", _same),
                    "default_kind": ("default_kind", _same),
                    "roles_claim": ("roles_claim", _same),
                    "attribute_claims": ("attribute_claims", tuple),
                    "on_behalf_of_claim": ("on_behalf_of_claim", _same),
                },
            ),
        )

    def jwt_key(self, node: Mapping[str, Any]) -> JwtKey:
        pem, source = node.get("public_key_pem"), None
        if "public_key_file" in node:
            source = self.path(node["public_key_file"])
            pem = Path(source).read_text()
        return JwtKey(
            kid=node["kid"],
            alg=node["alg"],
            secret=node.get("secret"),
            public_key_pem=pem,
            public_key_file=source,
        )

    def listener(self, node: Mapping[str, Any]) -> Listener:
        auth, tls = node["auth"], self.tls(node.get("tls"))
        extra: dict[str, Any] = {}
        if auth == "jwt":
            extra["jwt"] = self.jwt(node["jwt"])
        elif auth == "mtls":
            mtls = node.get("mtls", {})
            roles = {k: tuple(v) for k, v in mtls.get("roles", {}).items()}
            extra["mtls"] = MtlsAuth(
                client_ca_file=(tls.client_ca_file or "") if tls else "",
                roles=MappingProxyType(roles),
                **_kw(mtls, {"kind": ("kind", _same), "issuer": ("issuer", _same)}),
            )
        elif auth == "trusted-local":
            spec: Spec = {
                "issuer": ("issuer", _same),
                "allow_anonymous": ("allow_anonymous", _same),
            }
            extra["trusted_local"] = TrustedLocalAuth(**_kw(node.get("trusted_local"), spec))
        if node.get("protocol") == "mcp":
            extra["mcp"] = mcp_settings(node.get("mcp"))
        return Listener(
            name=node["name"],
            address=node["address"],
            surface=node["surface"],
            auth=auth,
            tls=tls,
            **extra,
            **_kw(
                node,
                {
                    "role": ("role", _same),
                    "socket_mode": ("socket_mode", _mode),
                    "on_behalf_of": ("on_behalf_of", _identities),
                    "auditor_roles": ("auditor_roles", tuple),
                    "protocol": ("protocol", _same),
                },
            ),
        )

    def upstream(self, name: str, node: Mapping[str, Any]) -> Upstream:
        spec: Spec = {
            "kind": ("kind", _same),
            "descriptor_set": ("descriptor_set", self.path),
            "tls": ("tls", _same),
            "allow_plaintext": ("allow_plaintext", _same),
            "ca_file": ("ca_file", self.path),
            "client_cert_file": ("client_cert_file", self.path),
            "client_key_file": ("client_key_file", self.path),
            "server_name": ("server_name", _same),
            "max_response_bytes": ("max_response_bytes", _same),
            "keepalive": ("keepalive_s", whole_seconds),
        }
        http = http_upstream(node.get("http")) if node.get("kind") == "http" else None
        mcp = mcp_upstream(node.get("mcp")) if node.get("kind") == "mcp" else None
        return Upstream(name=name, address=node["address"], http=http, mcp=mcp, **_kw(node, spec))

    def capability(
        self, node: Mapping[str, Any], upstreams: Mapping[str, Upstream], limits: Limits
    ) -> Capability:
        upstream = upstreams[node["upstream"]]
        route = http_route(node.get("http"))  # kind http: the method is the route's
        method = f"{route.method} {route.template}" if route else node.get("method")
        if "tool" in node:  # kind mcp: the tool is the method
            method = f"tools/call {node['tool']}"
        method = method or PROCEDURE_METHOD
        input_schema = plain(node["input_schema"]) if "input_schema" in node else None
        output_schema = plain(node["output_schema"]) if "output_schema" in node else None
        redact = node.get("redact", {})
        approval = node.get("approval", {})
        version = {"input_schema": input_schema, "method": method, "upstream": upstream.name}
        if route is not None:  # the query and body binding change what is sent, too
            version |= {"http": plain(node["http"])}
        map_input = node.get("map_input")
        map_schema = plain(node["map_input_schema"]) if "map_input_schema" in node else None
        if map_input is not None:  # what reaches the upstream changes: approvals must not resume
            version |= {"map_input": map_input, "map_input_schema": map_schema}
        return Capability(
            id=node["id"],
            description=node["description"],
            upstream=upstream.name,
            method=method,
            input_schema=input_schema,
            output_schema=output_schema,
            side_effect=node["side_effect"],
            risk=node["risk"],
            expose=MappingProxyType(dict(node.get("expose", {}))),
            retry=RetrySpec(**_kw(node.get("retry"), _RETRY)),
            redact=RedactSpec(
                output=_rules(redact.get("output", ())),
                approval_input=_rules(redact.get("approval_input", ())),
                output_expr=redact.get("output_expr"),
            ),
            approval=ApprovalSpec(
                roles=tuple(approval.get("approvers", {}).get("roles", ())),
                **_kw(approval, _APPROVAL),
            ),
            limits=dataclasses.replace(limits, **_kw(node.get("limits"), _LIMITS)),
            # §12: approvals bind this digest; a changed schema, upstream or method refuses Resume.
            schema_version=short_sha256(canonical_json(version)),
            http=route,
            tool=node.get("tool"),
            cache=_cache(node.get("cache")),
            map_input=map_input,
            map_input_schema=map_schema,
            **_kw(
                node,
                {
                    "tags": ("tags", tuple),
                    "idempotent": ("idempotent", _same),
                    "timeout": ("timeout_s", parse_duration),
                    "policies": ("policies", tuple),
                    "hooks": ("hooks", tuple),
                },
            ),
        )


_RETRY: Spec = {
    "max_attempts": ("max_attempts", _same),
    "initial_backoff": ("initial_backoff_s", parse_duration),
    "max_backoff": ("max_backoff_s", parse_duration),
    "multiplier": ("multiplier", float),
}
_APPROVAL: Spec = {
    "required": ("required", _same),
    "reason": ("reason", _same),
    "expires_in": ("expires_in_s", parse_duration),
    "inline_approver": ("inline_approver", _same),
    "editable": ("editable", _same),
    "grantable": ("grantable", _same),
    "quorum": ("quorum", _same),
    "distinct_roles": ("distinct_roles", tuple),
    "escalate_after": ("escalate_after_s", parse_duration),
    "escalation_roles": ("escalation_roles", tuple),
}
_LIMITS: Spec = {
    k: (k, _same) for k in ("max_bytes", "max_depth", "max_list_length", "max_string_length")
}


def _cache(node: Any) -> CacheSpec | None:
    if not isinstance(node, Mapping):
        return None
    scope = node.get("scope", "actor")
    key = scope["key"] if isinstance(scope, Mapping) else ""
    return CacheSpec(
        ttl_s=parse_duration(node["ttl"]),
        scope="key" if key else scope,
        key=key,
        max_bytes=node.get("max_bytes", 65536),
    )


def _rules(nodes: Any) -> tuple[RedactRule, ...]:
    return tuple(RedactRule(path=n["path"], action=n["action"]) for n in nodes)


def _mode(value: Any) -> int:
    return value if isinstance(value, int) else int(value, 8)


def _identities(nodes: Any) -> tuple[tuple[str, str], ...]:
    return tuple((n["issuer"], n["id"]) for n in nodes)


def build_settings(root: Mapping[str, Any], base: Path, *, source: str, revision: str) -> Settings:
    """The frozen settings of a config that passed the schema and every check."""
    b = _Builder(base)
    upstreams = {name: b.upstream(name, node) for name, node in root.get("upstreams", {}).items()}
    defaults_node = root.get("defaults", {})
    limits = Limits(**_kw(defaults_node.get("limits"), _LIMITS))
    defaults = Defaults(
        limits=limits,
        **_kw(
            defaults_node,
            {
                "timeout": ("timeout_s", parse_duration),
                "deadline_margin": ("deadline_margin_s", parse_duration),
                "metadata_allowlist": ("metadata_allowlist", tuple),
            },
        ),
    )
    path: Callable[[Any], Any] = b.path
    return Settings(
        listeners=tuple(b.listener(n) for n in root["listeners"]),
        upstreams=MappingProxyType(upstreams),
        capabilities=tuple(
            b.capability(n, upstreams, limits) for n in root.get("capabilities", ())
        ),
        policy_paths=tuple(b.path(p) for p in root.get("policies", {}).get("paths", ())),
        redis=RedisSettings(
            **_kw(
                root.get("redis"),
                _simple("url", "key_prefix", "limits_url") | {"data_dir": ("data_dir", path)},
            )
        ),
        approvals=_approval_settings(root.get("approvals")),
        idempotency=IdempotencySettings(
            **_kw(root.get("idempotency"), _simple("enabled") | {"ttl": ("ttl_s", parse_duration)})
        ),
        audit=AuditSettings(**_kw(root.get("audit"), _audit_spec(path))),
        telemetry=TelemetrySettings(
            **_kw(root.get("telemetry"), _simple("tracing", "prometheus_address", "otlp"))
        ),
        actor_token=ActorTokenSettings(**_kw(root.get("actor_token"), _actor_token_spec(path))),
        notify=_notify(root.get("notify")),
        limits=build_limits(root),
        hooks=build_hooks(root),
        defaults=defaults,
        cache=CacheSettings(
            **_kw(
                root.get("cache"),
                _simple("key", "max_entries") | {"timeout": ("timeout_s", parse_duration)},
            )
        ),
        source=source,
        revision=revision,
    )


def _simple(*keys: str) -> Spec:
    return {k: (k, _same) for k in keys}


_APPROVALS: Spec = _simple(
    "enabled", "reject_self_approval", "max_pending_per_actor", "default_approver_role"
) | {
    "default_expires_in": ("default_expires_in_s", parse_duration),
    "retention": ("retention_s", parse_duration),
}
_GRANTS: Spec = {
    "enabled": ("grants_enabled", _same),
    "max_expires_in": ("grants_max_expires_in_s", parse_duration),
    "max_active": ("grants_max_active", _same),
}


def _approval_settings(node: Any) -> ApprovalSettings:
    grants = node.get("grants") if isinstance(node, Mapping) else None
    return ApprovalSettings(**_kw(node, _APPROVALS), **_kw(grants, _GRANTS))


def _audit_spec(path: Callable[[Any], Any]) -> Spec:
    return _simple(
        "redis_stream", "redis_maxlen", "strict", "buffer", "hmac_key", "hmac_key_id"
    ) | {
        "sinks": ("sinks", tuple),
        "file": ("file", path),
    }


_WEBHOOK: Spec = _simple("url", "kind", "secret") | {"timeout": ("timeout_s", parse_duration)}
_NOTIFY: Spec = _simple("inbox_base_url", "max_attempts", "max_pending") | {
    "initial_backoff": ("initial_backoff_s", parse_duration),
    "max_backoff": ("max_backoff_s", parse_duration),
}


def _notify(node: Any) -> NotifySettings:
    if not isinstance(node, Mapping):
        return NotifySettings()
    hooks = tuple(Webhook(name=n["name"], **_kw(n, _WEBHOOK)) for n in node.get("webhooks", ()))
    return NotifySettings(webhooks=hooks, **_kw(node, _NOTIFY))


def _actor_token_spec(path: Callable[[Any], Any]) -> Spec:
    return _simple("issuer", "kid") | {
        "key_file": ("key_file", path),
        "jwks_out": ("jwks_out", path),
        "lifetime": ("lifetime_s", whole_seconds),
    }
