"""Verifying the forwarded actor token — what a Python upstream service runs on every call.

The checks run in a fixed order and each failure has one reason class; the golden vectors in
tests/vectors/actor_token/ pin both, and every language's verifier must agree with them:

 1. `malformed`          not three base64url segments of JSON objects, or a `crit` header
 2. `bad_alg`            header `alg` is not EdDSA or ES256 (`none`, HS256, ...)
 3. `wrong_type`         header `typ` is not `capgate-actor+jwt`
 4. `unknown_kid`        header `kid` is absent or names no key in the JWKS
 5. `bad_alg`            header `alg` differs from the algorithm pinned on that JWKS key
 6. `bad_signature`      the signature does not verify (ES256 is raw R || S, 64 bytes)
 7. `invalid_claims`     a required claim is missing or mistyped, or `exp <= iat`
 8. `wrong_issuer`       `iss` differs from the expected gateway issuer
 9. `wrong_audience`     `aud` is not exactly this upstream's name (a string)
10. `expired`            now >= exp + leeway
11. `not_yet_valid`      iat > now + leeway (or `nbf` > now + leeway)
12. `lifetime_exceeded`  exp - iat > max_lifetime_s (60)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, cast

from gateway.auth import jws

TOKEN_TYPE: Final = "capgate-actor+jwt"  # noqa: S105 — a media type, not a secret
MAX_LIFETIME_S: Final = 60
ALLOWED_ALGS: Final[frozenset[str]] = frozenset({"EdDSA", "ES256"})
REASONS: Final[frozenset[str]] = frozenset(
    {
        "malformed",
        "bad_alg",
        "wrong_type",
        "unknown_kid",
        "bad_signature",
        "invalid_claims",
        "wrong_issuer",
        "wrong_audience",
        "expired",
        "not_yet_valid",
        "lifetime_exceeded",
    }
)
_STRING_CLAIMS: Final = ("iss", "sub", "actor_iss", "kind", "exec_id", "cap", "surface", "jti")
_OPTIONAL_STRING_CLAIMS: Final = ("approval_id", "approver")


class ActorTokenInvalid(Exception):
    """The token was refused; `reason` is one of `REASONS` (never token contents)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _is_number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def _load_jwks(jwks: Mapping[str, Any]) -> dict[str, jws.VerifyKey]:
    entries = jwks.get("keys")
    if not isinstance(entries, list) or not entries:
        raise ValueError("the JWKS has no keys")
    keys: dict[str, jws.VerifyKey] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            raise ValueError("every JWKS key must be a JSON object")
        kid, alg = entry.get("kid"), entry.get("alg")
        if not isinstance(kid, str) or not kid or alg not in ALLOWED_ALGS:
            raise ValueError("every actor token JWKS key needs a 'kid' and alg EdDSA or ES256")
        key, served = jws.public_key_from_jwk(cast("dict[str, Any]", entry))
        if alg not in served or kid in keys:
            raise ValueError(f"JWKS key {kid!r}: alg does not fit its key type, or duplicate kid")
        keys[kid] = jws.VerifyKey(kid, alg, key)
    return keys


def _check_claims(claims: dict[str, Any]) -> None:
    ok = (
        all(isinstance(claims.get(name), str) for name in _STRING_CLAIMS)
        and all(isinstance(claims.get(n, ""), str) for n in _OPTIONAL_STRING_CLAIMS)
        and "aud" in claims
        and isinstance(claims.get("roles"), list)
        and all(isinstance(role, str) for role in claims["roles"])
        and _is_number(claims.get("iat"))
        and _is_number(claims.get("exp"))
        and ("nbf" not in claims or _is_number(claims["nbf"]))
    )
    if not ok or claims["exp"] <= claims["iat"]:
        raise ActorTokenInvalid("invalid_claims")


class ActorTokenVerifier:
    """Verifies actor tokens for one upstream (`audience`) from one gateway (`issuer`)."""

    def __init__(
        self,
        jwks: Mapping[str, Any],
        *,
        issuer: str,
        audience: str,
        leeway_s: float = 5,
        max_lifetime_s: float = MAX_LIFETIME_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not issuer or not audience:
            raise ValueError("an actor token verifier needs the gateway issuer and its audience")
        self._keys = _load_jwks(jwks)
        self._issuer = issuer
        self._audience = audience
        self._leeway = leeway_s
        self._max_lifetime = max_lifetime_s
        self._clock = clock

    @classmethod
    def from_file(cls, path: str, *, issuer: str, audience: str, **kw: Any) -> ActorTokenVerifier:
        """A verifier over the JWKS file the gateway publishes (`actor_token.jwks_out`)."""
        jwks = jws.loads_object(Path(path).read_bytes())
        return cls(jwks, issuer=issuer, audience=audience, **kw)

    def verify(self, token: str, *, now: float | None = None) -> dict[str, Any]:
        """The verified claims, or `ActorTokenInvalid` with the reason class of the first
        failed check (module docstring order)."""
        try:
            parsed = jws.parse_compact(token)
        except jws.MalformedToken:
            raise ActorTokenInvalid("malformed") from None
        header = parsed.header
        if "crit" in header:
            raise ActorTokenInvalid("malformed")
        if header.get("alg") not in ALLOWED_ALGS:
            raise ActorTokenInvalid("bad_alg")
        if header.get("typ") != TOKEN_TYPE:
            raise ActorTokenInvalid("wrong_type")
        kid = header.get("kid")
        key = self._keys.get(kid) if isinstance(kid, str) else None
        if key is None:
            raise ActorTokenInvalid("unknown_kid")
        if header["alg"] != key.alg:
            raise ActorTokenInvalid("bad_alg")
        if not key.verify(parsed.signing_input, parsed.signature):
            raise ActorTokenInvalid("bad_signature")
        claims = parsed.payload
        _check_claims(claims)
        if claims["iss"] != self._issuer:
            raise ActorTokenInvalid("wrong_issuer")
        if not isinstance(claims["aud"], str) or claims["aud"] != self._audience:
            raise ActorTokenInvalid("wrong_audience")
        now = self._clock() if now is None else now
        if now >= claims["exp"] + self._leeway:
            raise ActorTokenInvalid("expired")
        if claims["iat"] > now + self._leeway or claims.get("nbf", 0) > now + self._leeway:
            raise ActorTokenInvalid("not_yet_valid")
        if claims["exp"] - claims["iat"] > self._max_lifetime:
            raise ActorTokenInvalid("lifetime_exceeded")
        return claims
