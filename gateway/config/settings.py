"""Process-level settings from the config file: listeners, upstreams, Redis, approvals, audit,
telemetry. Listeners change only on restart (their authentication settings excepted, which a
reload swaps in place); the rest is part of the reloadable snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from gateway.config.hookspec import HookSpec
from gateway.config.limitspec import LimitSpec
from gateway.model import Capability, Limits
from gateway.upstream.actor_token import ActorTokenSettings
from gateway.upstream.spec import Upstream


@dataclass(frozen=True, slots=True)
class JwtKey:
    """One verification key. The algorithm is pinned per key, never taken from the token."""

    kid: str
    alg: Literal["HS256", "RS256", "ES256", "EdDSA"]
    # HS256 only (>= 32 bytes). repr=False: secrets never reach logs or error text (§12).
    secret: str | None = field(default=None, repr=False)
    public_key_pem: str | None = None  # RS256 / ES256 / EdDSA
    public_key_file: str | None = None  # where public_key_pem was read from (watched for reload)


@dataclass(frozen=True, slots=True)
class JwtAuth:
    keys: tuple[JwtKey, ...] = ()
    jwks_file: str | None = None  # keys from a JWKS file; each key's alg must be set there
    # SHA-256 of the JWKS file as loaded: settings differ when its keys do (a reload rebinds)
    jwks_digest: str = ""
    issuers: tuple[str, ...] = ()  # allow-list; required
    audience: str = ""  # checked per listener; required
    max_lifetime_s: int = 3600
    leeway_s: int = 30
    id_claim: str = "sub"
    kind_claim: str = "kind"
    default_kind: str = "user"
    roles_claim: str = "roles"
    attribute_claims: tuple[str, ...] = ()
    # Dotted path of the claim naming whom the caller acts for; "" (the default) = not read.
    # Off by default: in RFC 8693 token exchange `act.sub` is the acting party, not the
    # principal, so no claim path is right for every identity provider (docs/auth.md).
    on_behalf_of_claim: str = ""


@dataclass(frozen=True, slots=True)
class MtlsAuth:
    """Actor from the client certificate: SPIFFE URI SAN first, else a DNS SAN."""

    client_ca_file: str = ""
    kind: str = "service"
    issuer: str = "mtls"
    roles: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # identity -> roles


@dataclass(frozen=True, slots=True)
class TrustedLocalAuth:
    """The caller asserts the actor in x-capgate-actor-* metadata; unix sockets only (§12)."""

    issuer: str = "local"
    allow_anonymous: bool = True


@dataclass(frozen=True, slots=True)
class TlsSettings:
    cert_file: str
    key_file: str
    client_ca_file: str | None = None  # set => mTLS required


@dataclass(frozen=True, slots=True)
class McpSettings:
    """An MCP listener (docs/mcp.md): endpoint, DNS-rebinding allow-lists, RFC 9728 metadata."""

    path: str = "/mcp"
    allowed_origins: tuple[str, ...] = ()  # a request carrying any other Origin gets 403
    allowed_hosts: tuple[str, ...] = ()  # "host" or "host:port"; loopback names when bound there
    resource_url: str | None = None  # the RFC 9728 `resource`; None => from the Host header
    authorization_servers: tuple[str, ...] = ()  # empty => the listener's JWT issuers
    tool_names: Mapping[str, str] = field(default_factory=dict)  # capability id -> tool name
    approval_tool: bool = True  # offer capgate_approval_status (check or resume; never decide)
    session_idle_timeout_s: float = 3600.0
    max_sessions: int = 10_000


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    address: str  # "127.0.0.1:7443" or "unix:///run/capgate/capgate.sock"
    surface: str
    role: Literal["caller", "admin"] = "caller"
    auth: Literal["jwt", "mtls", "trusted-local", "none"] = "jwt"
    jwt: JwtAuth | None = None
    mtls: MtlsAuth | None = None
    trusted_local: TrustedLocalAuth | None = None
    tls: TlsSettings | None = None
    socket_mode: int = 0o660
    # Admin listeners: identities (issuer, id) allowed to decide on behalf of a human (the inbox).
    on_behalf_of: tuple[tuple[str, str], ...] = ()
    # Admin listeners: roles that may list every approval (auditors).
    auditor_roles: tuple[str, ...] = ("auditor",)
    # grpc: the CapabilityGateway/ApprovalAdmin services; mcp: MCP Streamable HTTP (docs/mcp.md).
    protocol: Literal["grpc", "mcp"] = "grpc"
    mcp: McpSettings | None = None  # protocol mcp only


@dataclass(frozen=True, slots=True)
class RedisSettings:
    # None => embedded private redis-server (demo / single process). May embed a password.
    url: str | None = field(default=None, repr=False)
    data_dir: str = ".capgate"
    key_prefix: str = "capgate"
    # Limit state's own Redis (ADR 0037); None: redis.url's, or with neither URL a second
    # embedded server run with `appendfsync everysec`.
    limits_url: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class ApprovalSettings:
    enabled: bool = True
    default_expires_in_s: float = 900.0
    retention_s: float = 7 * 24 * 3600.0
    reject_self_approval: bool = True
    max_pending_per_actor: int = 20
    default_approver_role: str = "approver"
    grants_enabled: bool = True  # standing grants (docs/approvals.md "Grants")
    grants_max_expires_in_s: float = 30 * 24 * 3600.0  # the latest expiry a grant may have
    grants_max_active: int = 10_000  # live grants the gateway keeps at once


@dataclass(frozen=True, slots=True)
class IdempotencySettings:
    enabled: bool = True
    ttl_s: float = 24 * 3600.0


@dataclass(frozen=True, slots=True)
class AuditSettings:
    sinks: tuple[Literal["stdout", "file", "redis", "otlp"], ...] = ("stdout",)
    file: str | None = None
    redis_stream: str = "capgate:audit"
    redis_maxlen: int = 100_000
    strict: bool = False
    buffer: int = 10_000
    hmac_key: str = field(default="", repr=False)  # input-hash HMAC key; secret
    hmac_key_id: str = "k1"


@dataclass(frozen=True, slots=True)
class TelemetrySettings:
    tracing: bool = True
    prometheus_address: str | None = None  # "127.0.0.1:9464"
    otlp: bool = False  # exporter configured from OTEL_* variables


@dataclass(frozen=True, slots=True)
class Webhook:
    """One notification endpoint for `capability.approval_requested` and `.approval_escalated`
    (never carries input, §12)."""

    name: str
    # repr=False: a Slack incoming-webhook URL is itself a credential.
    url: str = field(default="", repr=False)
    kind: Literal["slack", "generic"] = "generic"
    secret: str = field(default="", repr=False)  # HMAC-SHA256 key of the body signature
    timeout_s: float = 5.0


@dataclass(frozen=True, slots=True)
class NotifySettings:
    """Webhook notifications: delivered in the background, retried with bounded backoff."""

    webhooks: tuple[Webhook, ...] = ()
    inbox_base_url: str = ""  # deep links: <inbox_base_url>/approvals/<id>
    max_attempts: int = 5
    initial_backoff_s: float = 1.0
    max_backoff_s: float = 60.0
    max_pending: int = 1000  # deliveries in flight or waiting to retry; more are dropped


@dataclass(frozen=True, slots=True)
class CacheSettings:
    """The result cache (docs/cache.md): the encryption key (empty: one random key per
    process), how long Redis may take before a call goes on uncached, entries per capability."""

    key: str = ""
    timeout_s: float = 0.05
    max_entries: int = 1000


@dataclass(frozen=True, slots=True)
class Defaults:
    timeout_s: float = 30.0
    deadline_margin_s: float = 0.05
    limits: Limits = field(default_factory=Limits)
    metadata_allowlist: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Settings:
    """The whole validated config. `capabilities` and `policy_paths` form the reloadable part."""

    listeners: tuple[Listener, ...]
    upstreams: Mapping[str, Upstream]
    capabilities: tuple[Capability, ...]
    policy_paths: tuple[str, ...] = ()
    redis: RedisSettings = RedisSettings()
    approvals: ApprovalSettings = ApprovalSettings()
    idempotency: IdempotencySettings = IdempotencySettings()
    audit: AuditSettings = AuditSettings()
    telemetry: TelemetrySettings = TelemetrySettings()
    actor_token: ActorTokenSettings = ActorTokenSettings()  # noqa: RUF009 - frozen, as the others
    notify: NotifySettings = NotifySettings()
    defaults: Defaults = Defaults()
    cache: CacheSettings = CacheSettings()  # the result cache (docs/cache.md)
    hooks: tuple[HookSpec, ...] = ()  # governance hooks, in config order (docs/hooks.md)
    limits: tuple[LimitSpec, ...] = ()  # rate limits and budgets (docs/limits.md)
    source: str = ""  # path of the file or directory
    revision: str = ""  # sha256 of the config files (short hex)
