"""Compact JWS primitives shared by caller-JWT verification and the forwarded actor token.

Deliberately small and explicit instead of a general JOSE library: the algorithm used to verify a
signature always comes from the key (pinned in config or in the JWKS), never from the token's
header (RFC 8725 §3.1), so there is exactly one verification routine per pinned algorithm and no
code path that lets a token choose how it is checked.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias, cast

import orjson
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.backends.openssl.backend import backend as openssl_backend
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)

Alg: TypeAlias = Literal["HS256", "RS256", "ES256", "EdDSA"]
ALGORITHMS: Final[frozenset[str]] = frozenset({"HS256", "RS256", "ES256", "EdDSA"})
HS256_MIN_SECRET_BYTES: Final = 32  # RFC 7518 §3.2: a key at least as long as the hash output
RSA_MIN_BITS: Final = 2048

PublicKey: TypeAlias = rsa.RSAPublicKey | ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey
SigningKey: TypeAlias = ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey

_DETERMINISTIC_ECDSA: Final = bool(openssl_backend.ecdsa_deterministic_supported())
_B64URL = re.compile(r"[A-Za-z0-9_-]*")
_P256_COORD_BYTES: Final = 32


class MalformedToken(ValueError):
    """The token is not a well-formed compact JWS with JSON object header and payload."""


class DuplicateKeyError(ValueError):
    """A JSON object repeats a member name (parsers disagree on which one wins: refuse)."""


def b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Strict unpadded base64url (RFC 7515 §2): no padding, no whitespace, no other alphabet."""
    if not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise MalformedToken("invalid base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(key)
        out[key] = value
    return out


def loads_object(data: bytes) -> dict[str, Any]:
    """Parse a JSON object, refusing duplicate member names and non-object documents."""
    try:
        value = json.loads(data, object_pairs_hook=_no_duplicates)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError and DuplicateKeyError
        raise MalformedToken("invalid JSON") from exc
    if not isinstance(value, dict):
        raise MalformedToken("not a JSON object")
    return cast("dict[str, Any]", value)


def dumps_compact(value: dict[str, Any]) -> bytes:
    """Sorted, compact JSON: the same claims always encode to the same bytes (orjson: the same
    bytes as `json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)` for claim
    values, without its ~18 µs per token)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


@dataclass(frozen=True, slots=True)
class Parsed:
    header: dict[str, Any]
    payload: dict[str, Any]
    signing_input: bytes
    signature: bytes


def parse_compact(token: str) -> Parsed:
    """Split and decode a compact JWS; no signature or claim is checked here."""
    parts = token.split(".")
    if len(parts) != 3:
        raise MalformedToken("expected three segments")
    header = loads_object(b64url_decode(parts[0]))
    payload = loads_object(b64url_decode(parts[1]))
    signature = b64url_decode(parts[2])
    return Parsed(header, payload, f"{parts[0]}.{parts[1]}".encode("ascii"), signature)


@dataclass(frozen=True, slots=True)
class VerifyKey:
    """One verification key with its pinned algorithm."""

    kid: str
    alg: Alg
    key: PublicKey | bytes  # bytes only for HS256

    def verify(self, signing_input: bytes, signature: bytes) -> bool:
        """True iff `signature` is valid for `signing_input` under this key's own algorithm."""
        try:
            if self.alg == "HS256":
                expected = hmac.new(cast("bytes", self.key), signing_input, hashlib.sha256)
                return hmac.compare_digest(expected.digest(), signature)
            if self.alg == "RS256":
                rsa_key = cast("rsa.RSAPublicKey", self.key)
                rsa_key.verify(signature, signing_input, padding.PKCS1v15(), hashes.SHA256())
                return True
            if self.alg == "ES256":
                # JWS carries ECDSA as raw R || S (RFC 7518 §3.4), not DER.
                if len(signature) != 2 * _P256_COORD_BYTES:
                    return False
                r = int.from_bytes(signature[:_P256_COORD_BYTES], "big")
                s = int.from_bytes(signature[_P256_COORD_BYTES:], "big")
                ec_key = cast("ec.EllipticCurvePublicKey", self.key)
                ec_key.verify(encode_dss_signature(r, s), signing_input, ec.ECDSA(hashes.SHA256()))
                return True
            ed_key = cast("ed25519.Ed25519PublicKey", self.key)
            ed_key.verify(signature, signing_input)
            return True
        except InvalidSignature:
            return False


def check_key_matches_alg(key: object, alg: str) -> PublicKey:
    """Refuse a key whose type cannot serve the pinned algorithm (config error)."""
    if alg == "RS256" and isinstance(key, rsa.RSAPublicKey):
        if key.key_size < RSA_MIN_BITS:
            raise ValueError(f"RS256 keys must have at least {RSA_MIN_BITS} bits")
        return key
    if (
        alg == "ES256"
        and isinstance(key, ec.EllipticCurvePublicKey)
        and isinstance(key.curve, ec.SECP256R1)
    ):
        return key
    if alg == "EdDSA" and isinstance(key, ed25519.Ed25519PublicKey):
        return key
    raise ValueError(f"the key type does not match its pinned algorithm {alg}")


def public_key_from_pem(pem: str | bytes, alg: str) -> PublicKey:
    """A public key (or certificate) from PEM text, checked against its pinned algorithm."""
    data = pem.encode() if isinstance(pem, str) else pem
    if b"BEGIN CERTIFICATE" in data:
        key: object = x509.load_pem_x509_certificate(data).public_key()
    else:
        key = serialization.load_pem_public_key(data)
    return check_key_matches_alg(key, alg)


def hs256_secret(secret: str) -> bytes:
    raw = secret.encode()
    if len(raw) < HS256_MIN_SECRET_BYTES:
        raise ValueError(f"HS256 secrets must be at least {HS256_MIN_SECRET_BYTES} bytes")
    return raw


def _uint(jwk: dict[str, Any], member: str) -> int:
    value = jwk.get(member)
    if not isinstance(value, str) or not value:
        raise ValueError(f"JWK member {member!r} is missing")
    return int.from_bytes(b64url_decode(value), "big")


def public_key_from_jwk(jwk: dict[str, Any]) -> tuple[PublicKey, tuple[Alg, ...]]:
    """A public key from a JWK and the algorithms its key type can serve."""
    kty = jwk.get("kty")
    if "d" in jwk or "p" in jwk or "k" in jwk:
        raise ValueError("a JWKS for verification must hold public keys only")
    if kty == "RSA":
        return rsa.RSAPublicNumbers(_uint(jwk, "e"), _uint(jwk, "n")).public_key(), ("RS256",)
    if kty == "EC" and jwk.get("crv") == "P-256":
        x, y = _uint(jwk, "x"), _uint(jwk, "y")
        return ec.EllipticCurvePublicNumbers(x, y, ec.SECP256R1()).public_key(), ("ES256",)
    if kty == "OKP" and jwk.get("crv") == "Ed25519":
        raw = jwk.get("x")
        if not isinstance(raw, str):
            raise ValueError("JWK member 'x' is missing")
        return ed25519.Ed25519PublicKey.from_public_bytes(b64url_decode(raw)), ("EdDSA",)
    raise ValueError("unsupported JWK key type (RSA, EC P-256 and OKP Ed25519 are supported)")


def public_jwk(key: PublicKey) -> dict[str, str]:
    """The required public members of a key's JWK (RFC 7638 §3.2 for the thumbprint)."""
    if isinstance(key, ed25519.Ed25519PublicKey):
        raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return {"crv": "Ed25519", "kty": "OKP", "x": b64url_encode(raw)}
    if isinstance(key, ec.EllipticCurvePublicKey):
        nums = key.public_numbers()
        return {
            "crv": "P-256",
            "kty": "EC",
            "x": b64url_encode(nums.x.to_bytes(_P256_COORD_BYTES, "big")),
            "y": b64url_encode(nums.y.to_bytes(_P256_COORD_BYTES, "big")),
        }
    rnums = key.public_numbers()
    return {
        "e": b64url_encode(rnums.e.to_bytes((rnums.e.bit_length() + 7) // 8, "big")),
        "kty": "RSA",
        "n": b64url_encode(rnums.n.to_bytes((rnums.n.bit_length() + 7) // 8, "big")),
    }


def thumbprint(key: PublicKey) -> str:
    """RFC 7638 JWK thumbprint: SHA-256 of the required members, sorted, no whitespace."""
    canonical = json.dumps(public_jwk(key), sort_keys=True, separators=(",", ":"))
    return b64url_encode(hashlib.sha256(canonical.encode("ascii")).digest())


def signing_alg(key: SigningKey) -> Alg:
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return "EdDSA"
    if isinstance(key.curve, ec.SECP256R1):
        return "ES256"
    raise ValueError("actor token keys must be Ed25519 or EC P-256")


def sign(key: SigningKey, signing_input: bytes) -> bytes:
    """A JWS signature in its wire form (raw R || S for ES256)."""
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key.sign(signing_input)
    # RFC 6979 deterministic nonces where OpenSSL offers them: no dependence on the RNG at
    # signing time, and reproducible golden vectors.
    ecdsa = ec.ECDSA(hashes.SHA256(), deterministic_signing=_DETERMINISTIC_ECDSA)
    r, s = decode_dss_signature(key.sign(signing_input, ecdsa))
    return r.to_bytes(_P256_COORD_BYTES, "big") + s.to_bytes(_P256_COORD_BYTES, "big")


def encode_compact(header: dict[str, Any], payload: dict[str, Any], key: SigningKey) -> str:
    signing_input = (
        f"{b64url_encode(dumps_compact(header))}.{b64url_encode(dumps_compact(payload))}"
    )
    signature = sign(key, signing_input.encode("ascii"))
    return f"{signing_input}.{b64url_encode(signature)}"
