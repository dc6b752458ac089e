"""Core value types shared by every part of the gateway: actors and the immutable config snapshot.

The config loader (`gateway.config`) builds these from YAML; everything else only reads them.
All are frozen: a reload builds a new `Snapshot` and swaps it atomically (DESIGN §12).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Surface = str  # e.g. "direct", "agent", "mcp", "workflow" — fixed by the listener (SI-2)
SideEffect = Literal["none", "read", "write", "destructive"]
Risk = Literal["low", "medium", "high", "critical"]


@dataclass(frozen=True, slots=True)
class Actor:
    """An authenticated identity (SI-3). Identity is the pair (issuer, id)."""

    id: str
    kind: str  # user | service | agent | anonymous
    issuer: str = ""
    roles: tuple[str, ...] = ()
    attributes: Mapping[str, Any] = field(default_factory=dict)
    # Whom the actor acts for, as its credential said (a JWT's on_behalf_of_claim); "" = unsaid.
    on_behalf_of: str = ""

    @property
    def identity(self) -> tuple[str, str]:
        return (self.issuer, self.id)

    @property
    def anonymous(self) -> bool:
        return self.kind == "anonymous"

    def as_policy_value(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "issuer": self.issuer,
            "roles": list(self.roles),
            "attributes": dict(self.attributes),
        }


ANONYMOUS = Actor(id="anonymous", kind="anonymous", issuer="capgate")


@dataclass(frozen=True, slots=True)
class Limits:
    """Input/output size limits checked before stage 5 and on upstream replies (DESIGN §12)."""

    max_bytes: int = 256 * 1024
    max_depth: int = 32
    max_list_length: int = 10_000
    max_string_length: int = 64 * 1024


@dataclass(frozen=True, slots=True)
class RetrySpec:
    max_attempts: int = 0  # re-attempts after the first call
    initial_backoff_s: float = 0.05
    max_backoff_s: float = 1.0
    multiplier: float = 2.0


@dataclass(frozen=True, slots=True)
class RedactRule:
    """One redaction: a JSONPath subset (`$.a.b`, `$.items[*].c`) and an action."""

    path: str
    action: Literal["drop", "mask", "hmac"]


@dataclass(frozen=True, slots=True)
class RedactSpec:
    output: tuple[RedactRule, ...] = ()
    approval_input: tuple[RedactRule, ...] = ()
    output_expr: str | None = None  # optional CEL expression producing the redacted output


@dataclass(frozen=True, slots=True)
class ApprovalSpec:
    required: bool = False
    reason: str = ""
    roles: tuple[str, ...] = ()
    expires_in_s: float | None = None
    inline_approver: str | None = None  # upstream name of an Approver service (inline mode)
    editable: bool = False  # approvers may approve a changed input (docs/approvals.md "Edits")
    grantable: bool = True  # false: a standing grant never stands in (docs/approvals.md "Grants")
    quorum: int = 1  # distinct approvers; at least len(distinct_roles)
    distinct_roles: tuple[str, ...] = ()  # each held by a different approver
    escalate_after_s: float | None = None  # pending this long: escalation_roles may decide too
    escalation_roles: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CacheSpec:
    """A capability's result cache (docs/cache.md): how long an entry answers, who shares it
    (`actor`, `shared`, or `key` = the CEL key expression's text), the largest output stored."""

    ttl_s: float
    scope: Literal["actor", "shared", "key"] = "actor"
    key: str = ""  # the scope key expression when scope == "key"
    max_bytes: int = 65536


@dataclass(frozen=True, slots=True)
class PathPart:
    """One path segment of a template: a literal (already valid in a URL) or a placeholder."""

    literal: str = ""
    name: str = ""  # the input property that fills the segment, when a placeholder


@dataclass(frozen=True, slots=True)
class HttpRoute:
    """The `http` block of a capability served by a `kind: http` upstream."""

    method: str  # GET, POST, PUT, PATCH, DELETE
    path: tuple[PathPart, ...]  # parsed from the template, e.g. /orders/{order_id}
    template: str
    query: tuple[str, ...] = ()  # input properties sent as query parameters (when present)
    body: Literal["none", "input"] = "none"
    # 4xx statuses whose body is the upstream's public message (EXECUTION_FAILED, exposed).
    contract_errors: frozenset[int] = frozenset()

    @property
    def bound(self) -> frozenset[str]:
        """Input properties that go into the URL (path placeholders and query)."""
        return frozenset({p.name for p in self.path if p.name} | set(self.query))


@dataclass(frozen=True, slots=True)
class Capability:
    id: str
    description: str
    upstream: str
    method: str  # full gRPC method, "/pkg.Service/Method"
    input_schema: Mapping[str, Any] | None  # None => derived from the upstream message
    output_schema: Mapping[str, Any] | None
    side_effect: SideEffect = "read"
    risk: Risk = "low"
    tags: tuple[str, ...] = ()
    expose: Mapping[Surface, bool] = field(default_factory=dict)
    idempotent: bool = False
    timeout_s: float | None = None
    retry: RetrySpec = RetrySpec()
    redact: RedactSpec = RedactSpec()
    approval: ApprovalSpec = ApprovalSpec()
    policies: tuple[str, ...] = ()
    hooks: tuple[str, ...] = ()  # capability-scoped hooks it lists (docs/hooks.md)
    limits: Limits = Limits()
    schema_version: str = ""  # digest of the input schema, bound into approvals (§12)
    http: HttpRoute | None = None  # method, path, query, body: kind http only (upstreams.md)
    tool: str | None = None  # the MCP tool it calls: kind mcp only (docs/upstreams.md)
    cache: CacheSpec | None = None  # none/read capabilities only (docs/cache.md)
    map_input: str | None = None  # CEL building the upstream request at stage 11
    map_input_schema: Mapping[str, Any] | None = None  # what map_input builds (procedure)

    def exposed_on(self, surface: Surface) -> bool:
        # SI-1: exactly True; anything else (False, absent, "yes") is not exposed.
        return self.expose.get(surface) is True

    def as_policy_value(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tags": list(self.tags),
            "side_effect": self.side_effect,
            "risk": self.risk,
        }
