"""Caller authentication with a bearer JWT (DESIGN §12 "Listeners and identity", SI-3).

The rules, each pinned by a test in tests/auth/test_auth_jwt.py:
- the algorithm is pinned per key; the token's `alg` must equal it and never selects it, so
  `none` and RS256-public-key-as-HS256-secret confusion cannot verify;
- `jku`, `x5u`, `jwk`, `x5c` are never read (no key ever comes from the token); `crit` is
  refused because no extension is understood (RFC 7515 §4.1.11);
- `kid` is only a dictionary key: a path or URL in it finds no key;
- `exp` and `iat` are required, `exp - iat` is bounded by `max_lifetime_s`, skew by `leeway_s`;
- `aud` must name this listener's audience, `iss` must be in the allow-list;
- verified tokens are cached by SHA-256 until `exp` (+ the same leeway), LRU-bounded (§11).
"""

from __future__ import annotations

import hashlib
import math
import time
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from gateway.config.jwtkeys import load_keys
from gateway.config.settings import JwtAuth
from gateway.model import Actor
from gateway.transport.auth.base import (
    AUTHENTICATED_KINDS,
    AuthContext,
    AuthenticationFailed,
    Metadata,
    metadata_values,
)
from gateway.transport.auth.lru import LruCache
from gateway.values import jws
from gateway.values.jsonvalue import has_nul as _has_nul

MAX_TOKEN_CHARS: Final = 8192  # far above real tokens; bounds parsing work per call
DEFAULT_CACHE_ENTRIES: Final = 10_000


@dataclass(frozen=True, slots=True)
class _Verified:
    actor: Actor
    valid_until: float  # exp + leeway: the same instant an uncached check would start refusing


def _number(claims: Mapping[str, Any], name: str) -> float:
    value = claims.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise AuthenticationFailed(f"missing or invalid '{name}' claim")
    return float(value)


class JwtAuthenticator:
    """Bearer-JWT authenticator for one listener (its audience and issuers)."""

    def __init__(
        self,
        settings: JwtAuth,
        *,
        clock: Callable[[], float] = time.time,
        cache_entries: int = DEFAULT_CACHE_ENTRIES,
    ) -> None:
        if not settings.issuers:
            raise ValueError("JWT auth needs at least one allowed issuer")
        if not settings.audience:
            raise ValueError("JWT auth needs the listener's audience")
        if settings.max_lifetime_s <= 0 or settings.leeway_s < 0:
            raise ValueError("JWT auth needs max_lifetime_s > 0 and leeway_s >= 0")
        if settings.default_kind not in AUTHENTICATED_KINDS:
            raise ValueError(f"JWT default_kind must be one of {sorted(AUTHENTICATED_KINDS)}")
        self._settings = settings
        self._keys = load_keys(settings)
        self._only_key = next(iter(self._keys.values())) if len(self._keys) == 1 else None
        self._issuers = frozenset(settings.issuers)
        self._clock = clock
        self._cache: LruCache[bytes, _Verified] = LruCache(cache_entries)

    def authenticate(self, metadata: Metadata, auth_context: AuthContext, peer: str) -> Actor:
        token = _bearer_token(metadata)
        digest = hashlib.sha256(token.encode()).digest()
        now = self._clock()
        hit = self._cache.get(digest)
        if hit is not None:
            if now < hit.valid_until:
                return hit.actor
            self._cache.pop(digest)
            raise AuthenticationFailed("token expired")
        actor, valid_until = self._verify(token, now)
        self._cache.put(digest, _Verified(actor, valid_until))
        return actor

    def _verify(self, token: str, now: float) -> tuple[Actor, float]:
        try:
            parsed = jws.parse_compact(token)
        except jws.MalformedToken:
            raise AuthenticationFailed("malformed token") from None
        header = parsed.header
        if "crit" in header:
            raise AuthenticationFailed("unsupported critical header")
        kid = header.get("kid")
        if "kid" not in header:
            key = self._only_key  # no kid: unambiguous only with exactly one key configured
        else:
            key = self._keys.get(kid) if isinstance(kid, str) else None
        if key is None:
            raise AuthenticationFailed("unknown signing key")
        # Pinned algorithm: the header may only repeat it (RFC 8725 §3.1). `jku`, `x5u`, `jwk`
        # and `x5c` are never looked at.
        if header.get("alg") != key.alg:
            raise AuthenticationFailed("algorithm not allowed")
        if not key.verify(parsed.signing_input, parsed.signature):
            raise AuthenticationFailed("invalid signature")
        return self._check_claims(parsed.payload, now)

    def _check_claims(self, claims: dict[str, Any], now: float) -> tuple[Actor, float]:
        s = self._settings
        exp, iat = _number(claims, "exp"), _number(claims, "iat")
        nbf = _number(claims, "nbf") if "nbf" in claims else iat
        if now >= exp + s.leeway_s:
            raise AuthenticationFailed("token expired")
        if max(iat, nbf) > now + s.leeway_s:
            raise AuthenticationFailed("token not yet valid")
        if exp <= iat or exp - iat > s.max_lifetime_s:
            raise AuthenticationFailed("token lifetime too long")
        iss = claims.get("iss")
        if not isinstance(iss, str) or iss not in self._issuers:
            raise AuthenticationFailed("issuer not allowed")
        aud = claims.get("aud")
        # RFC 7519 §4.1.3: a list audience is accepted when it names this listener.
        if not (aud == s.audience or (isinstance(aud, list) and s.audience in aud)):
            raise AuthenticationFailed("wrong audience")
        return self._actor(claims, iss), exp + s.leeway_s

    def _actor(self, claims: dict[str, Any], issuer: str) -> Actor:
        s = self._settings
        actor_id = claims.get(s.id_claim)
        if not isinstance(actor_id, str) or not actor_id:
            raise AuthenticationFailed("missing actor id claim")
        kind = claims.get(s.kind_claim, s.default_kind)
        if kind not in AUTHENTICATED_KINDS:
            # `anonymous` (or anything unknown) is never granted by a credential.
            raise AuthenticationFailed("actor kind not allowed")
        roles = claims.get(s.roles_claim, [])
        if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
            raise AuthenticationFailed("invalid roles claim")
        attributes = {name: claims[name] for name in s.attribute_claims if name in claims}
        if _has_nul([actor_id, roles, attributes]):
            # Policies would read these only up to the NUL (cel-expr-python): "admin\u0000x"
            # would be `actor.id == "admin"` (docs/policies.md).
            raise AuthenticationFailed("a claim contains U+0000 (NUL)")
        try:  # a lone surrogate ("\ud800" parses as JSON text) is not a string anyone can key
            orjson.dumps([actor_id, roles, attributes])
        except orjson.JSONEncodeError:
            raise AuthenticationFailed("a claim is not valid Unicode") from None
        # The actor is shared by every cache hit: a read-only mapping keeps one call from
        # changing what the next one sees.
        return Actor(
            id=actor_id,
            kind=kind,
            issuer=issuer,
            roles=tuple(roles),
            attributes=types.MappingProxyType(attributes),
            on_behalf_of=on_behalf_of(claims, s.on_behalf_of_claim),
        )


MAX_ON_BEHALF_OF: Final = 256


def on_behalf_of(claims: Mapping[str, Any], path: str) -> str:
    """The claim at the dotted `path` (e.g. `act.sub`), "" when absent or
    when `path` is empty; a value that is not a non-empty string of at most 256 characters
    (without U+0000) refuses the token."""
    if not path:
        return ""
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return ""
        value = value[part]
    if not isinstance(value, str) or not 0 < len(value) <= MAX_ON_BEHALF_OF or "\x00" in value:
        raise AuthenticationFailed("invalid on_behalf_of claim")
    return value


def _bearer_token(metadata: Metadata) -> str:
    values = metadata_values(metadata, "authorization")
    if not values:
        raise AuthenticationFailed("missing bearer token")
    if len(values) > 1:
        raise AuthenticationFailed("more than one authorization header")
    scheme, _, token = values[0].strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise AuthenticationFailed("missing bearer token")
    if len(token) > MAX_TOKEN_CHARS:
        raise AuthenticationFailed("token too large")
    return token
