"""Settings of `capgate inbox`: how it reaches ApprovalAdmin and who may use it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from gateway.config.settings import JwtAuth, RedisSettings


@dataclass(frozen=True, slots=True)
class ServiceToken:
    """The JWT the inbox mints for itself; (issuer, subject) must be in the admin listener's
    `on_behalf_of` allow-list and the key must be one the admin listener verifies."""

    issuer: str
    subject: str
    audience: str
    alg: Literal["HS256", "RS256", "ES256", "EdDSA"] = "HS256"
    kid: str = ""
    secret: str = field(default="", repr=False)  # HS256
    private_key_pem: str = field(default="", repr=False)  # RS256 / ES256 / EdDSA
    lifetime_s: int = 300


@dataclass(frozen=True, slots=True)
class AdminConnection:
    """The admin listener. A client certificate makes it mTLS (the inbox identity may then be
    the certificate alone, named in the listener's on_behalf_of)."""

    address: str
    token: ServiceToken | None = None
    tls: bool = False
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    server_name: str | None = None
    timeout_s: float = 10.0


@dataclass(frozen=True, slots=True)
class ProxyAuth:
    """A signed identity assertion set by an authenticating proxy: a compact JWS (HS256 is
    HMAC-SHA256) with `exp`, in `header`, verified with the same rules as a bearer JWT."""

    jwt: JwtAuth
    header: str = "x-capgate-identity"


@dataclass(frozen=True, slots=True)
class InboxSettings:
    admin: AdminConnection
    jwt: JwtAuth | None = None  # approvers' bearer JWTs (header or the login form)
    proxy: ProxyAuth | None = None
    listen: str = "127.0.0.1:8080"
    base_url: str = ""  # the public URL; https makes cookies Secure
    auditor_roles: tuple[str, ...] = ("auditor",)
    # Sign-in sessions live here; no url = a private embedded redis-server (one process only),
    # its data in `data_dir`/inbox-redis, or ("") in a temporary directory removed at stop.
    redis: RedisSettings = field(default_factory=lambda: RedisSettings(data_dir=""))
    # HMAC key of the CSRF tokens of header-authenticated requests and of the sign-in form;
    # "" = random per process (a restart invalidates open forms, not sessions).
    session_secret: str = field(default="", repr=False)
    session_lifetime_s: int = 8 * 3600  # absolute: a session ends this long after sign-in
    session_idle_s: int = 30 * 60  # or this long after its last request
    sessions_per_actor: int = 5  # a human's older sessions end when a newer one exceeds it
    history_limit: int = 200
    # Deprecated and unused for the pages: every approval carries the gateway's own
    # approvals.reject_self_approval (Approval.self_approval_refused). When set here and
    # different from the gateway's, the inbox logs a warning. None: not set.
    reject_self_approval: bool | None = None
