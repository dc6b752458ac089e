"""Loading the inbox config: YAML → `{{ env.NAME }}` substitution → schema → `InboxSettings`.

The same machinery as the gateway's loader (located problems, every problem at once, substituted
values never echoed). The approver `jwt` blocks reuse the gateway's schema definition and
builder, so a token is validated exactly as a gateway listener would (DESIGN §12).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any, cast

from jsonschema import Draft7Validator

from gateway.config.build import jwt_auth
from gateway.config.context import resolve
from gateway.config.durations import parse_duration, whole_seconds
from gateway.config.env import substitute
from gateway.config.kinds import on_this_machine
from gateway.config.problems import ConfigError, Problem
from gateway.config.schema import config_schema
from gateway.config.settings import RedisSettings
from gateway.config.source import SourceFile, parse, problem_at
from gateway.inbox.settings import AdminConnection, InboxSettings, ProxyAuth, ServiceToken
from gateway.transport.auth.jwt import JwtAuthenticator


@functools.cache
def inbox_schema() -> dict[str, Any]:
    text = resources.files("gateway.inbox").joinpath("config.schema.json").read_text()
    schema = cast("dict[str, Any]", json.loads(text))
    schema["definitions"] = config_schema()["definitions"]
    return schema


def _message(keyword: str, schema: Mapping[str, Any], instance: Any) -> list[tuple[str, str]]:
    # Never jsonschema's own text: it quotes the value, which may be a substituted secret.
    if keyword == "required" and isinstance(instance, dict):
        return [
            ("", f"missing required key '{k}'") for k in schema["required"] if k not in instance
        ]
    if keyword == "additionalProperties" and isinstance(instance, dict):
        return [(str(k), "unknown key") for k in instance if k not in schema.get("properties", {})]
    hint = schema.get("x-message")
    return [("", str(hint) if hint else f"violates '{keyword}'")]


def _problems(root: Any) -> list[Problem]:
    out: list[Problem] = []
    for error in Draft7Validator(inbox_schema()).iter_errors(root):
        for extra, text in _message(str(error.validator), error.schema, error.instance):
            parts = (*error.absolute_path, extra) if extra else tuple(error.absolute_path)
            out.append(problem_at(root, parts, text))
    return out


def load_inbox_settings(
    path: str | Path, *, environ: Mapping[str, str] | None = None, **overrides: Any
) -> InboxSettings:
    """Load and validate the file at `path`; `overrides` (e.g. admin address) win over it."""
    config_path = Path(os.path.abspath(path))
    try:
        source = SourceFile(config_path, config_path.read_bytes())
    except OSError as exc:
        raise ConfigError([Problem("", None, f"cannot read: {exc.strerror}", str(path))]) from None
    root, problems = parse(source, str(config_path))
    if root is None:
        raise ConfigError(problems)
    env_problems, used, _ = substitute(root, os.environ if environ is None else environ)
    problems += env_problems or _problems(root)
    if problems:
        raise ConfigError(problems, secrets=used)
    try:
        settings = build(root, config_path.parent, **overrides)
        if settings.jwt is not None:
            JwtAuthenticator(settings.jwt)  # loads every key now: a bad key is a config error
        if settings.proxy is not None:
            JwtAuthenticator(settings.proxy.jwt)
    except (ValueError, OSError) as exc:
        raise ConfigError([Problem("", None, str(exc), str(config_path))], secrets=used) from None
    return settings


def build(root: Mapping[str, Any], base: Path, **overrides: Any) -> InboxSettings:
    """`InboxSettings` from checked config data."""
    admin = root.get("admin", {})
    tls = admin.get("tls")
    token = admin.get("token")

    def path(value: str | None) -> str | None:
        return str(resolve(base, value)) if value else None

    service: ServiceToken | None = None
    if token is not None:
        key_file = path(token.get("private_key_file"))
        service = ServiceToken(
            issuer=token["issuer"],
            subject=token["subject"],
            audience=token["audience"],
            alg=token.get("alg", "HS256"),
            kid=token.get("kid", ""),
            secret=token.get("secret", ""),
            private_key_pem=Path(key_file).read_text() if key_file else "",
            lifetime_s=whole_seconds(token.get("lifetime", "5m")),
        )
    address = overrides.pop("admin_address", None) or admin.get("address")
    if not address:
        raise ValueError("the admin address is required (admin.address or --admin)")
    if tls is None and admin.get("allow_plaintext") is not True and not on_this_machine(address):
        # The inbox's token decides on behalf of approvers (on_behalf_of): never readable on
        # the wire (ADR 0033).
        raise ValueError(
            f"admin address {address}: the inbox's credentials would travel in plaintext: "
            "without admin.tls it must be a loopback address or a unix socket, or set "
            "admin.allow_plaintext: true where the network itself is encrypted or trusted "
            "(a service mesh's mTLS)"
        )
    if tls is not None and admin.get("allow_plaintext") is True:
        raise ValueError("admin.allow_plaintext is only used without admin.tls")
    connection = AdminConnection(
        address=address,
        token=service,
        tls=tls is not None,
        ca_file=path(tls.get("ca_file")) if tls else None,
        cert_file=path(tls.get("cert_file")) if tls else None,
        key_file=path(tls.get("key_file")) if tls else None,
        server_name=tls.get("server_name") if tls else None,
        timeout_s=parse_duration(admin.get("timeout", "10s")),
    )
    if service is None and connection.cert_file is None:
        raise ValueError("the inbox needs its own identity: admin.token or an mTLS certificate")
    approvers = root.get("approvers", {})
    proxy = approvers.get("proxy")
    session = root.get("session", {})
    redis = root.get("redis", {})
    values: dict[str, Any] = {
        "admin": connection,
        "jwt": jwt_auth(approvers["jwt"], base) if "jwt" in approvers else None,
        "proxy": ProxyAuth(
            jwt=jwt_auth(proxy["jwt"], base),
            header=proxy.get("header", "x-capgate-identity").lower(),
        )
        if proxy
        else None,
        "listen": root.get("listen", "127.0.0.1:8080"),
        "base_url": root.get("base_url", ""),
        "auditor_roles": tuple(approvers.get("auditor_roles", ("auditor",))),
        "redis": RedisSettings(
            url=redis.get("url"),
            key_prefix=redis.get("key_prefix", "capgate"),
            data_dir=str(resolve(base, redis["data_dir"])) if "data_dir" in redis else "",
        ),
        "session_secret": session.get("secret", ""),
        "session_lifetime_s": whole_seconds(session.get("lifetime", "8h")),
        "session_idle_s": whole_seconds(session.get("idle_timeout", "30m")),
        "sessions_per_actor": session.get("max_per_actor", 5),
        "history_limit": root.get("history_limit", 200),
        "reject_self_approval": root.get("reject_self_approval"),
    }
    values.update({k: v for k, v in overrides.items() if v is not None})
    if values["jwt"] is None and values["proxy"] is None:
        raise ValueError("approvers need a way to sign in: approvers.jwt or approvers.proxy")
    return InboxSettings(**values)
