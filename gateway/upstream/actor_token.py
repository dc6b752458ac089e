"""The forwarded actor token: who the upstream is serving, signed by the gateway (DESIGN §8, §12).

A compact JWS (EdDSA with Ed25519, or ES256 with a P-256 key) from a key only the gateway holds.
Caller credentials are never passed through; this token is the only actor fact an upstream gets,
so its middleware can verify it against the gateway's published JWKS (`capgate_client.server`).

Header: `alg`, `kid`, `typ: capgate-actor+jwt` (explicit typing, RFC 8725 §3.11).
Claims: `iss` (the gateway), `aud` (the upstream's name), `sub` (actor id), `actor_iss` (the
actor's own issuer: identity is the pair, §12), `kind`, `roles`, `surface`, `approval_id` /
`approver` when the call was approved, `grant_id` (with `approver` = the grant's creator) when a
standing grant stood in for the approval (ADR 0038), `iat`, `exp` (≤ 60 s later), `jti` (one per
token).

Reuse (DESIGN §12, amended 2026-12-01; ADR 0029): the token names no execution. The execution
id and the capability travel beside it as `x-capgate-execution-id` / `x-capgate-capability`,
so one token serves every call of the same (actor identity, kind and roles, upstream, surface)
for the first half of its lifetime: every token an upstream receives has at least half its
lifetime left. A call of an approved execution gets a token of its own (approval_id and its
approver are single-use facts; caching them would only fill the cache); calls a standing grant
covers share one per grant as well (grant_id and its creator are the same for every use). The
cache is bounded (`MAX_CACHED` entries, expired ones dropped first). `exec_id` and `cap` are
optional claims for verifiers: tokens signed before this change carry them, and a verifier then
checks that the metadata agrees.
"""

from __future__ import annotations

import os
import secrets
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from gateway.model import Actor
from gateway.values import jws

TOKEN_TYPE: Final = "capgate-actor+jwt"  # noqa: S105 — a media type, not a secret
MAX_LIFETIME_S: Final = 60  # what every verifier (capgate_client and its ports) accepts at most
MAX_CACHED: Final = 4096  # reusable tokens kept at once (one per actor, upstream and surface)

# (actor id, actor issuer, kind, roles, upstream, surface): everything a reusable token says.
# (actor id, issuer, kind, roles, upstream, surface, grant id, grant approver)
_Key = tuple[str, str, str, tuple[str, ...], str, str, str, str]


@dataclass(frozen=True, slots=True)
class ActorTokenSettings:
    """The gateway-signed actor token forwarded upstream (§12)."""

    issuer: str = "capgate"
    key_file: str | None = None  # PEM private key (Ed25519 or P-256); None => generated per process
    kid: str = ""
    jwks_out: str | None = None  # where to publish the public JWKS
    lifetime_s: int = 60


def new_jti() -> str:
    return secrets.token_urlsafe(16)  # 128 random bits


def load_signing_key(path: str) -> jws.SigningKey:
    """An Ed25519 or EC P-256 private key from an unencrypted PEM (PKCS#8 or SEC1)."""
    try:
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        # Never echo the file's contents: only its path and the kind of failure.
        raise ValueError(f"cannot load actor token key {path}: {type(exc).__name__}") from None
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key
    if isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1):
        return key
    raise ValueError(f"actor token key {path} must be Ed25519 or EC P-256")


class ActorTokenSigner:
    """Signs actor tokens (reused per actor, upstream and surface for half their lifetime);
    publishes the public key as a JWKS."""

    def __init__(
        self,
        settings: ActorTokenSettings,
        *,
        private_key: jws.SigningKey | None = None,
        clock: Callable[[], float] = time.time,
        jti_factory: Callable[[], str] = new_jti,
    ) -> None:
        if not 0 < settings.lifetime_s <= MAX_LIFETIME_S:
            raise ValueError(f"actor token lifetime_s must be within 1..{MAX_LIFETIME_S}")
        if not settings.issuer:
            raise ValueError("actor token issuer must not be empty")
        if private_key is None:
            # No key file: a fresh key per process; upstreams must then read this process's
            # published JWKS (jwks_out), and a restart rotates the key.
            private_key = (
                load_signing_key(settings.key_file)
                if settings.key_file
                else ed25519.Ed25519PrivateKey.generate()
            )
        self._key = private_key
        self._alg = jws.signing_alg(private_key)
        self._kid = settings.kid or jws.thumbprint(private_key.public_key())
        self._issuer = settings.issuer
        self._lifetime = settings.lifetime_s
        self._clock = clock
        self._jti = jti_factory
        # A token is handed out again while now < iat + reuse_s (half its lifetime, rounded
        # down; a 1 s lifetime is never reused).
        self._reuse_s = self._lifetime // 2
        self._cache: dict[_Key, tuple[str, int, int]] = {}  # key -> (token, iat, reuse_until)
        # The header never changes: encode it once.
        header = {"alg": self._alg, "kid": self._kid, "typ": TOKEN_TYPE}
        self._header_b64 = jws.b64url_encode(jws.dumps_compact(header))

    @property
    def kid(self) -> str:
        return self._kid

    @property
    def alg(self) -> str:
        return self._alg

    def claims(
        self,
        actor: Actor,
        *,
        upstream: str,
        surface: str,
        approval_id: str | None = None,
        approver: str | None = None,
        grant_id: str | None = None,
    ) -> dict[str, Any]:
        """The claims a token signed at this instant carries (also what an upstream gets back)."""
        iat = int(self._clock())
        claims: dict[str, Any] = {
            "iss": self._issuer,
            "aud": upstream,
            "sub": actor.id,
            "actor_iss": actor.issuer,
            "kind": actor.kind,
            "roles": list(actor.roles),
            "surface": surface,
            "iat": iat,
            "exp": iat + self._lifetime,
            "jti": self._jti(),
        }
        if approval_id is not None:
            claims["approval_id"] = approval_id
        if approver is not None:
            claims["approver"] = approver
        if grant_id is not None:
            claims["grant_id"] = grant_id
        return claims

    def sign(
        self,
        actor: Actor,
        *,
        upstream: str,
        surface: str,
        approval_id: str | None = None,
        approver: str | None = None,
        grant_id: str | None = None,
    ) -> str:
        """A compact JWS for an upstream call of `actor`: the one signed for the same actor,
        upstream and surface (and standing grant) within the last half lifetime, else a new
        one. An approval's token is never reused: the approval is single-use."""
        if approval_id is not None or (approver is not None and grant_id is None):
            return self._signed(
                self.claims(
                    actor,
                    upstream=upstream,
                    surface=surface,
                    approval_id=approval_id,
                    approver=approver,
                    grant_id=grant_id,
                )
            )
        key: _Key = (
            actor.id,
            actor.issuer,
            actor.kind,
            tuple(actor.roles),
            upstream,
            surface,
            grant_id or "",
            approver or "",
        )
        now = self._clock()
        hit = self._cache.get(key)
        if hit is not None and hit[1] <= now < hit[2]:
            return hit[0]
        claims = self.claims(
            actor, upstream=upstream, surface=surface, approver=approver, grant_id=grant_id
        )
        token = self._signed(claims)
        if self._reuse_s > 0:
            self._remember(key, (token, claims["iat"], claims["iat"] + self._reuse_s), now)
        return token

    def _signed(self, claims: dict[str, Any]) -> str:
        signing_input = f"{self._header_b64}.{jws.b64url_encode(jws.dumps_compact(claims))}"
        signature = jws.sign(self._key, signing_input.encode("ascii"))
        return f"{signing_input}.{jws.b64url_encode(signature)}"

    def _remember(self, key: _Key, entry: tuple[str, int, int], now: float) -> None:
        cache = self._cache
        cache.pop(key, None)
        if len(cache) >= MAX_CACHED:
            for stale in [k for k, (_t, _iat, until) in cache.items() if now >= until]:
                del cache[stale]
            while len(cache) >= MAX_CACHED:  # all still fresh: drop the oldest
                del cache[next(iter(cache))]
        cache[key] = entry

    def jwks(self) -> dict[str, Any]:
        """The public JWKS upstreams verify against (one key; merge files across a rotation)."""
        jwk: dict[str, Any] = dict(jws.public_jwk(self._key.public_key()))
        jwk.update({"kid": self._kid, "alg": self._alg, "use": "sig"})
        return {"keys": [jwk]}

    def write_jwks(self, path: str | os.PathLike[str]) -> None:
        """Write the JWKS atomically (temp file + rename) so readers never see half a file."""
        target = Path(path)
        data = jws.dumps_compact(self.jwks()) + b"\n"
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(tmp, 0o644)  # public key material: readable by the upstream's user
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
