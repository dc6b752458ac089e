"""Checks of the listeners section: uniqueness, auth refusals (§12) and verification keys.

Refused by config: `trusted-local` anywhere but a unix socket, and on admin or mcp listeners;
`auth: none` on an admin listener; admin-only keys on a caller listener; HS256 secrets shorter
than 32 bytes; public keys whose type does not match their pinned algorithm.
"""

from __future__ import annotations

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

from gateway.config.context import Ctx, check_port, is_unix, items, mapping, plain, text
from gateway.config.jwtkeys import load_keys
from gateway.config.mcp import check_mcp_listener
from gateway.config.problems import PathParts
from gateway.config.source import LDict
from gateway.values import jws

_AUTH_BLOCKS = {"jwt": "jwt", "mtls": "mtls", "trusted_local": "trusted-local"}
_ADMIN_ONLY = ("on_behalf_of", "auditor_roles")


def check_listeners(ctx: Ctx) -> None:
    names: dict[str, int] = {}
    addresses: dict[str, int] = {}
    for i, listener in items(ctx.root.get("listeners")):
        parts: PathParts = ("listeners", i)
        name, address = text(listener, "name"), text(listener, "address")
        if name in names:
            ctx.fail((*parts, "name"), f"duplicate listener name (also listeners[{names[name]}])")
        names.setdefault(name, i)
        if address in addresses and not address.endswith(":0"):  # port 0: each gets its own
            ctx.fail(
                (*parts, "address"), f"address already used by listeners[{addresses[address]}]"
            )
        addresses.setdefault(address, i)
        _check_auth(ctx, listener, parts)
        _check_files(ctx, listener, parts)
        check_mcp_listener(ctx, listener, parts)


def _check_auth(ctx: Ctx, listener: LDict, parts: PathParts) -> None:
    auth, role, surface = (
        text(listener, "auth"),
        text(listener, "role", "caller"),
        text(listener, "surface"),
    )
    unix = is_unix(text(listener, "address"))
    check_port(ctx, text(listener, "address"), (*parts, "address"))
    for block, owner in _AUTH_BLOCKS.items():
        if block in listener and auth != owner:
            ctx.fail((*parts, block), f"only used with auth: {owner}")
    if auth == "jwt":
        if "jwt" in listener:
            _check_jwt(ctx, mapping(listener["jwt"]), (*parts, "jwt"))
        else:
            ctx.fail((*parts, "auth"), "auth: jwt needs a jwt block")
    if auth == "mtls" and "client_ca_file" not in mapping(listener.get("tls")):
        ctx.fail((*parts, "auth"), "auth: mtls needs tls.client_ca_file")
    if auth == "trusted-local":
        # §12: the caller asserts its own actor, so only a socket reachable by the app container
        # may offer it, and never where approvals are decided or where a model calls directly.
        if not unix:
            ctx.fail((*parts, "auth"), "trusted-local is only allowed on a unix socket address")
        if role == "admin":
            ctx.fail((*parts, "auth"), "trusted-local is refused on admin listeners")
        if surface == "mcp":
            ctx.fail((*parts, "auth"), "trusted-local is refused on mcp listeners")
    if auth == "none" and role == "admin":
        ctx.fail((*parts, "auth"), "auth: none is refused on admin listeners")
    if role != "admin":
        for key in _ADMIN_ONLY:
            if key in listener:
                ctx.fail((*parts, key), "only allowed on admin listeners")
    if "socket_mode" in listener and not unix:
        ctx.fail((*parts, "socket_mode"), "only used with a unix socket address")


def _check_files(ctx: Ctx, listener: LDict, parts: PathParts) -> None:
    tls = listener.get("tls")
    for key in ("cert_file", "key_file", "client_ca_file"):
        ctx.existing_file(tls, key, (*parts, "tls"))


def _check_jwt(ctx: Ctx, jwt: LDict, parts: PathParts) -> None:
    before = len(ctx.problems)
    if "keys" not in jwt and "jwks_file" not in jwt:
        ctx.fail(parts, "needs keys or jwks_file")
    ctx.whole_seconds(jwt, "max_lifetime", parts)
    ctx.positive(jwt, "max_lifetime", parts)
    ctx.whole_seconds(jwt, "leeway", parts)
    kids: dict[str, int] = {}
    for k, key in items(jwt.get("keys")):
        here = (*parts, "keys", k)
        kid = text(key, "kid")
        if kid in kids:
            ctx.fail((*here, "kid"), f"duplicate kid (also keys[{kids[kid]}])")
        kids.setdefault(kid, k)
        _check_key(ctx, key, here, pins_allowed="jwks_file" in jwt)
    ctx.existing_file(jwt, "jwks_file", parts)
    if len(ctx.problems) == before:
        _check_with_verifier(ctx, jwt, parts)


def _check_with_verifier(ctx: Ctx, jwt: LDict, parts: PathParts) -> None:
    """Load the keys exactly as the listener will, so that what passes here also starts there
    (JWKS contents: `use`, private members, pins, key types, duplicate kids — ADR 0003)."""
    from gateway.config.build import jwt_auth  # noqa: PLC0415 - build imports the checks

    try:
        settings = jwt_auth(plain(jwt), ctx.base)
    except (KeyError, TypeError, ValueError, OSError):
        return  # malformed: the schema has reported it
    try:
        load_keys(settings)
    except ValueError as exc:
        ctx.fail(parts, str(exc))


def _check_key(ctx: Ctx, key: LDict, parts: PathParts, *, pins_allowed: bool) -> None:
    alg = text(key, "alg")
    given = [m for m in ("secret", "public_key_pem", "public_key_file") if m in key]
    if alg == "HS256":
        if given != ["secret"]:
            ctx.fail(parts, "an HS256 key needs exactly a secret (no public key)")
        secret = key.get("secret")
        if isinstance(secret, str):
            if len(secret.encode()) < jws.HS256_MIN_SECRET_BYTES:
                message = f"HS256 secret must be at least {jws.HS256_MIN_SECRET_BYTES} bytes"
                ctx.fail((*parts, "secret"), message)
            if "-----BEGIN" in secret:
                # A public key as an HMAC secret is the classic algorithm-confusion setup.
                ctx.fail((*parts, "secret"), "an HS256 secret must not be a PEM key")
        return
    if alg not in jws.ALGORITHMS or (not given and pins_allowed):
        return  # a material-less key pins the alg of the JWKS key with its kid (ADR 0003)
    if len(given) != 1 or given[0] == "secret":
        ctx.fail(parts, f"an {alg} key needs exactly one of public_key_pem or public_key_file")
        return
    pem: str | bytes | None = key.get("public_key_pem")
    if given[0] == "public_key_file":
        path = ctx.existing_file(key, "public_key_file", parts)
        pem = path.read_bytes() if path is not None else None
    if isinstance(pem, str | bytes):
        problem = _pem_problem(pem.encode() if isinstance(pem, str) else pem, alg)
        if problem:
            ctx.fail((*parts, given[0]), problem)


def _pem_problem(data: bytes, alg: str) -> str | None:
    try:
        if b"BEGIN CERTIFICATE" in data:
            key: object = x509.load_pem_x509_certificate(data).public_key()
        else:
            key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        return "not a readable PEM public key or certificate"
    try:
        jws.check_key_matches_alg(key, alg)
    except ValueError as exc:
        return str(exc)
    return None
