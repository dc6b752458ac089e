"""`capgate token --dev --config FILE [--listener NAME] --sub ID [--role R ...]` — mint a
short-lived bearer JWT for local use: a caller token for a caller listener, an approver token
for an admin listener (`--listener` names it; the default is the config's first JWT caller
listener speaking gRPC).

It only mints for an issuer this machine owns, and refuses everything else:

  - the listener must be a JWT listener of the config, and the issuer one it trusts
    (`jwt.issuers`) that is a plain name (`demo-idp`), not a URL: an identity provider that
    names itself by URL (`https://login.example.com`) is a real issuer, never impersonated here;
  - the signing key must be one the listener trusts and this command can read: an HS256
    `secret` of the listener's `jwt.keys` (as the config resolves it, `{{ env.X }}` included),
    or the private key in `--key FILE` (PEM) whose public half is one of the listener's keys
    (`public_key_pem` or `jwks_file`). A listener whose keys come from elsewhere gets nothing.

The token (only the token) goes to stdout: `export CAPGATE_TOKEN=$(capgate token --dev ...)`.
Its audience is the listener's, its lifetime at most the listener's `max_lifetime`.
Exit codes: 0 minted, 1 refused (the reason on stderr), 2 usage or an invalid config.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jwt
from cryptography.hazmat.primitives import serialization

from gateway.cli.args import Parser
from gateway.config.jwtkeys import load_keys
from gateway.config.loader import load_settings
from gateway.config.problems import ConfigError
from gateway.config.settings import Listener, Settings
from gateway.values import jws

_OK, _REFUSED, _USAGE = 0, 1, 2


class Refused(Exception):
    """Not a key or issuer this command owns."""


def _parser() -> Parser:
    p = Parser(
        prog="capgate token",
        description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--dev",
        action="store_true",
        help="required: says you mean a local development token (nothing else is minted)",
    )
    p.add_argument("--config", required=True, help="the gateway config whose listener trusts it")
    p.add_argument("--listener", default="", help="listener name (default: first JWT caller)")
    p.add_argument(
        "--issuer", default="", help="one of the listener's jwt.issuers (default: first)"
    )
    p.add_argument("--sub", required=True, help="the actor id (the `sub` claim)")
    p.add_argument("--kind", default="user", help="the actor kind claim (default: user)")
    p.add_argument(
        "--role", action="append", default=[], help="a role (repeatable; approvers need theirs)"
    )
    p.add_argument(
        "--claim",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="another string claim (repeatable), e.g. an attribute_claims entry",
    )
    p.add_argument("--lifetime", type=int, default=3600, help="seconds (default 3600)")
    p.add_argument("--key", default=None, help="private key PEM for an RS256/ES256/EdDSA key")
    return p


def _listener(settings: Settings, name: str) -> Listener:
    jwt_listeners = [x for x in settings.listeners if x.auth == "jwt" and x.jwt is not None]
    if name:
        for listener in settings.listeners:
            if listener.name == name:
                if listener not in jwt_listeners:
                    raise Refused(f"listener {name!r} does not take JWTs (auth: {listener.auth})")
                return listener
        raise Refused(f"the config has no listener {name!r}")
    callers = [x for x in jwt_listeners if x.role == "caller" and x.protocol == "grpc"]
    if not callers:
        raise Refused("the config has no JWT caller listener: pass --listener NAME")
    return callers[0]


def _issuer(listener: Listener, wanted: str) -> str:
    assert listener.jwt is not None
    issuers = listener.jwt.issuers
    issuer = wanted or (issuers[0] if issuers else "")
    if issuer not in issuers:
        raise Refused(f"listener {listener.name!r} does not trust issuer {issuer!r}")
    if urlsplit(issuer).scheme:
        raise Refused(
            f"issuer {issuer!r} is a URL: a real identity provider's; dev tokens are only "
            "minted for a local issuer name"
        )
    return issuer


def _signing_key(listener: Listener, key_file: str | None) -> tuple[str, str, Any]:
    """(kid, alg, key to sign with) for a key the listener trusts and this command holds."""
    assert listener.jwt is not None
    try:
        trusted = load_keys(listener.jwt)
    except ValueError as exc:
        raise Refused(f"listener {listener.name!r}: its keys cannot be loaded: {exc}") from exc
    if key_file is None:
        for vk in trusted.values():
            if vk.alg == "HS256":
                return vk.kid, "HS256", vk.key
        raise Refused(
            f"listener {listener.name!r} trusts no HS256 secret of the config: pass --key FILE "
            "with the private key of one of its public keys"
        )
    try:
        private = serialization.load_pem_private_key(Path(key_file).read_bytes(), None)
    except (OSError, ValueError, TypeError) as exc:
        raise Refused(f"--key {key_file}: not a readable unencrypted PEM private key") from exc
    public = private.public_key()
    for vk in trusted.values():
        if vk.alg != "HS256" and jws.thumbprint(vk.key) == jws.thumbprint(public):  # type: ignore[arg-type]
            return vk.kid, vk.alg, private
    raise Refused(f"--key {key_file} is not the private half of a key {listener.name!r} trusts")


def _claims(args: argparse.Namespace, listener: Listener, issuer: str) -> dict[str, Any]:
    assert listener.jwt is not None
    now = int(time.time())
    lifetime = max(1, min(args.lifetime, listener.jwt.max_lifetime_s))
    claims: dict[str, Any] = {}
    for item in args.claim:
        name, eq, value = item.partition("=")
        if not eq or not name:
            raise ValueError(f"--claim {name or item!r}: expected NAME=VALUE")
        claims[name] = value
    claims.update(
        {
            listener.jwt.id_claim: args.sub,
            listener.jwt.kind_claim: args.kind,
            listener.jwt.roles_claim: list(args.role),
            "iss": issuer,
            "aud": listener.jwt.audience,
            "iat": now,
            "exp": now + lifetime,
        }
    )
    return claims


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    if not args.dev:
        sys.stderr.write(
            "capgate token: only local development tokens are minted: pass --dev "
            "(capgate token --help says for which keys)\n"
        )
        return _USAGE
    try:
        settings = load_settings(args.config)
        listener = _listener(settings, args.listener)
        issuer = _issuer(listener, args.issuer)
        kid, alg, key = _signing_key(listener, args.key)
        claims = _claims(args, listener, issuer)
    except ConfigError as exc:
        sys.stderr.write(f"capgate token: {exc}\n")
        return _USAGE
    except ValueError as exc:
        sys.stderr.write(f"capgate token: {exc}\n")
        return _USAGE
    except Refused as exc:
        sys.stderr.write(f"capgate token: refused: {exc}\n")
        return _REFUSED
    print(jwt.encode(claims, key, algorithm=alg, headers={"kid": kid}))
    return _OK
