"""Verifier of the gateway-signed actor token (`x-capgate-actor-token`), standalone: it needs only
`cryptography` (the `capgate-client[server]` extra), never the gateway package.

The checks run in the order of tests/vectors/actor_token/README.md and each failure has one
reason class; the golden vectors pin both:
 1 malformed · 2 bad_alg · 3 wrong_type · 4 unknown_kid · 5 bad_alg (header alg ≠ the key's) ·
 6 bad_signature · 7 invalid_claims · 8 wrong_issuer · 9 wrong_audience · 10 expired ·
 11 not_yet_valid · 12 lifetime_exceeded.
The algorithm always comes from the JWKS key that `kid` selects, never from the token (RFC 8725).
"""

from __future__ import annotations

import base64
import json
import math
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

TOKEN_TYPE: Final = "capgate-actor+jwt"  # noqa: S105 — a media type, not a secret
MAX_LIFETIME_S: Final = 60
_B64URL: Final = re.compile(r"[A-Za-z0-9_-]*")
_COORD: Final = 32  # P-256 coordinate bytes; an ES256 signature is raw R || S (RFC 7518 §3.4)
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
)  # every `ActorTokenInvalid.reason`
_STRING_CLAIMS: Final = ("iss", "sub", "actor_iss", "kind", "surface", "jti")
# exec_id and cap are optional since the gateway reuses a token across executions (DESIGN §12,
# amended 2026-12-01): they then travel as metadata beside it; older tokens still carry them.
_OPTIONAL_STRING_CLAIMS: Final = ("exec_id", "cap", "approval_id", "approver")

PublicKey = ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey


class ActorTokenInvalid(Exception):
    """The token was refused; `reason` is a fixed class, never token contents."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _b64url(text: str) -> bytes:
    """Strict unpadded base64url (RFC 7515 §2): no padding, whitespace or other alphabet."""
    if not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise ActorTokenInvalid("malformed")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:  # parsers disagree on which duplicate wins: refuse
            raise ValueError("duplicate member")
        out[key] = value
    return out


def _json_object(segment: str) -> dict[str, Any]:
    try:
        value = json.loads(_b64url(segment), object_pairs_hook=_unique)
    except (ValueError, UnicodeDecodeError):
        raise ActorTokenInvalid("malformed") from None
    if not isinstance(value, dict):
        raise ActorTokenInvalid("malformed")
    return value


def _is_number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def _public_key(jwk: Mapping[str, Any], alg: str) -> PublicKey:
    def coordinate(name: str) -> bytes:
        value = jwk.get(name)
        if not isinstance(value, str) or not _B64URL.fullmatch(value) or len(value) % 4 == 1:
            raise ValueError(f"JWK member {name!r} is missing or not base64url")
        return _b64url(value)

    if alg == "EdDSA" and jwk.get("kty") == "OKP" and jwk.get("crv") == "Ed25519":
        return ed25519.Ed25519PublicKey.from_public_bytes(coordinate("x"))
    if alg == "ES256" and jwk.get("kty") == "EC" and jwk.get("crv") == "P-256":
        x, y = (int.from_bytes(coordinate(n), "big") for n in ("x", "y"))
        return ec.EllipticCurvePublicNumbers(x, y, ec.SECP256R1()).public_key()
    raise ValueError("JWKS key: its alg does not fit its key type (EdDSA/Ed25519, ES256/P-256)")


def load_jwks(jwks: Mapping[str, Any]) -> dict[str, tuple[str, PublicKey]]:
    """kid → (alg, public key); every key needs a kid and alg EdDSA or ES256."""
    entries = jwks.get("keys")
    if not isinstance(entries, list) or not entries:
        raise ValueError("the JWKS has no keys")
    keys: dict[str, tuple[str, PublicKey]] = {}
    for jwk in entries:
        if not isinstance(jwk, dict):
            raise ValueError("every JWKS key must be a JSON object")
        kid, alg = jwk.get("kid"), jwk.get("alg")
        if not isinstance(kid, str) or not kid or alg not in ("EdDSA", "ES256") or kid in keys:
            raise ValueError("every JWKS key needs a unique 'kid' and alg EdDSA or ES256")
        if "d" in jwk:
            raise ValueError("a JWKS for verification must hold public keys only")
        keys[kid] = (alg, _public_key(jwk, alg))
    return keys


def _signature_valid(alg: str, key: PublicKey, signing_input: bytes, signature: bytes) -> bool:
    try:
        if alg == "EdDSA" and isinstance(key, ed25519.Ed25519PublicKey):
            key.verify(signature, signing_input)
            return True
        if alg == "ES256" and isinstance(key, ec.EllipticCurvePublicKey):
            if len(signature) != 2 * _COORD:  # DER or any other length is refused
                return False
            r = int.from_bytes(signature[:_COORD], "big")
            s = int.from_bytes(signature[_COORD:], "big")
            key.verify(encode_dss_signature(r, s), signing_input, ec.ECDSA(hashes.SHA256()))
            return True
    except InvalidSignature:
        return False
    return False


def _check_claims(c: dict[str, Any]) -> None:
    ok = (
        all(isinstance(c.get(n), str) for n in _STRING_CLAIMS)
        and all(isinstance(c.get(n, ""), str) for n in _OPTIONAL_STRING_CLAIMS)
        and "aud" in c
        and isinstance(c.get("roles"), list)
        and all(isinstance(r, str) for r in c["roles"])
        and _is_number(c.get("iat"))
        and _is_number(c.get("exp"))
        and ("nbf" not in c or _is_number(c["nbf"]))
    )
    if not ok or c["exp"] <= c["iat"]:
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
        self._keys = load_jwks(jwks)
        self._issuer, self._audience = issuer, audience
        self._leeway, self._max_lifetime, self._clock = leeway_s, max_lifetime_s, clock

    @classmethod
    def from_file(
        cls, path: str | Path, *, issuer: str, audience: str, **kw: Any
    ) -> ActorTokenVerifier:
        """A verifier over the JWKS file the gateway publishes (`actor_token.jwks_out`)."""
        return cls(json.loads(Path(path).read_bytes()), issuer=issuer, audience=audience, **kw)

    def verify(self, token: str, *, now: float | None = None) -> dict[str, Any]:
        """The verified claims, or `ActorTokenInvalid` with the reason of the first failed check."""
        parts = token.split(".")
        if len(parts) != 3:
            raise ActorTokenInvalid("malformed")
        header, claims = _json_object(parts[0]), _json_object(parts[1])
        signature = _b64url(parts[2])
        if "crit" in header:  # no extension is understood
            raise ActorTokenInvalid("malformed")
        if header.get("alg") not in ("EdDSA", "ES256"):
            raise ActorTokenInvalid("bad_alg")
        if header.get("typ") != TOKEN_TYPE:
            raise ActorTokenInvalid("wrong_type")
        kid = header.get("kid")  # a dictionary key only: never a path or a URL
        entry = self._keys.get(kid) if isinstance(kid, str) else None
        if entry is None:
            raise ActorTokenInvalid("unknown_kid")
        alg, key = entry
        if header["alg"] != alg:
            raise ActorTokenInvalid("bad_alg")
        if not _signature_valid(alg, key, f"{parts[0]}.{parts[1]}".encode("ascii"), signature):
            raise ActorTokenInvalid("bad_signature")
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
