"""Regenerate the forwarded-actor-token golden vectors (vectors.json beside this file).

    .venv/bin/python tests/vectors/actor_token/generate.py          # rewrite vectors.json
    .venv/bin/python tests/vectors/actor_token/generate.py --check  # exit 1 if it is stale

Deterministic: the keys come from fixed seeds, Ed25519 signatures are deterministic and ES256 uses
RFC 6979 nonces, the clock and `jti`s are fixed. Valid tokens are produced by the gateway's own
`ActorTokenSigner`; invalid ones are built by hand, each breaking exactly one rule so that every
verifier reaches the same reason class whatever its check order. Format: README.md.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from gateway.model import Actor
from gateway.upstream.actor_token import ActorTokenSettings, ActorTokenSigner
from gateway.values import jws

HERE = Path(__file__).resolve().parent
OUT = HERE / "vectors.json"

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
ISSUER = "capgate"
AUDIENCE = "orders"
LEEWAY_S = 5
LIFETIME_S = 60
TYP = "capgate-actor+jwt"

REASONS = [
    ("malformed", "not three base64url segments of JSON objects, or a 'crit' header"),
    ("bad_alg", "header alg is not EdDSA or ES256 (none, HS256, ...)"),
    ("wrong_type", "header typ is not capgate-actor+jwt"),
    ("unknown_kid", "header kid is absent or names no key in the JWKS"),
    ("bad_alg", "header alg differs from the alg pinned on that JWKS key"),
    ("bad_signature", "the signature does not verify (ES256 is raw R||S, 64 bytes)"),
    ("invalid_claims", "a required claim is missing or mistyped, or exp <= iat"),
    ("wrong_issuer", "iss differs from the expected gateway issuer"),
    ("wrong_audience", "aud is not exactly this upstream's name (a string)"),
    ("expired", "now >= exp + leeway_s"),
    ("not_yet_valid", "iat > now + leeway_s (or nbf > now + leeway_s)"),
    ("lifetime_exceeded", "exp - iat > max_lifetime_s"),
]


def _seeded_ed25519(label: str) -> ed25519.Ed25519PrivateKey:
    return ed25519.Ed25519PrivateKey.from_private_bytes(hashlib.sha256(label.encode()).digest())


def _seeded_p256(label: str) -> ec.EllipticCurvePrivateKey:
    order = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
    scalar = int.from_bytes(hashlib.sha256(label.encode()).digest(), "big") % (order - 1) + 1
    return ec.derive_private_key(scalar, ec.SECP256R1())


ED_KEY = _seeded_ed25519("capgate actor token vectors: ed25519")
EC_KEY = _seeded_p256("capgate actor token vectors: p-256")
OTHER_ED_KEY = _seeded_ed25519("capgate actor token vectors: not the gateway's key")
ED_KID = jws.thumbprint(ED_KEY.public_key())
EC_KID = jws.thumbprint(EC_KEY.public_key())

ACTOR = Actor(
    id="user-42", kind="user", issuer="https://idp.example.com", roles=("support", "approver")
)
CALL = {"upstream": AUDIENCE, "surface": "agent"}
# What a token signed before reuse (DESIGN §12, amended 2026-12-01) also carried: still valid.
EXECUTION = {"exec_id": "exe_01JGZ3T5Q8W2N6M4K7R9B1C3D5", "cap": "orders.refund"}


def _signer(key: jws.SigningKey, now: int = T0, jti: str = "jti-0001") -> ActorTokenSigner:
    return ActorTokenSigner(
        ActorTokenSettings(issuer=ISSUER, lifetime_s=LIFETIME_S),
        private_key=key,
        clock=lambda: float(now),
        jti_factory=lambda: jti,
    )


def _b64(data: bytes) -> str:
    return jws.b64url_encode(data)


def _raw(header: dict[str, Any], claims: dict[str, Any], sign: Callable[[bytes], bytes]) -> str:
    """A token from an arbitrary header and claims with any signing function."""
    head = f"{_b64(jws.dumps_compact(header))}.{_b64(jws.dumps_compact(claims))}"
    return f"{head}.{_b64(sign(head.encode('ascii')))}"


def _claims(**changes: Any) -> dict[str, Any]:
    claims = _signer(ED_KEY).claims(ACTOR, **CALL)
    for name, value in changes.items():
        if value is None:
            claims.pop(name, None)
        else:
            claims[name] = value
    return claims


def _ed_header(**changes: Any) -> dict[str, Any]:
    header: dict[str, Any] = {"alg": "EdDSA", "kid": ED_KID, "typ": TYP}
    for name, value in changes.items():
        if value is None:
            header.pop(name, None)
        else:
            header[name] = value
    return header


def _ed(header: dict[str, Any], claims: dict[str, Any]) -> str:
    return _raw(header, claims, ED_KEY.sign)


def _case(name: str, token: str, *, now: int = T0 + 10, audience: str = AUDIENCE) -> dict[str, Any]:
    return {"name": name, "token": token, "now": now, "issuer": ISSUER, "audience": audience}


def _valid(name: str, token: str, **kw: Any) -> dict[str, Any]:
    case = _case(name, token, **kw)
    case.update(expect="valid", claims=jws.parse_compact(token).payload)
    return case


def _invalid(name: str, reason: str, token: str, **kw: Any) -> dict[str, Any]:
    case = _case(name, token, **kw)
    case.update(expect="invalid", reason=reason)
    return case


def _cases() -> list[dict[str, Any]]:
    approved = _signer(ED_KEY).sign(ACTOR, **CALL, approval_id="apr_7f3a", approver="alice")
    plain = _signer(ED_KEY).sign(ACTOR, **CALL)
    es256 = _signer(EC_KEY, jti="jti-0002").sign(ACTOR, **CALL)
    anonymous = _signer(ED_KEY, jti="jti-0003").sign(
        Actor("anonymous", "anonymous", "capgate"), **CALL
    )
    exp = T0 + LIFETIME_S
    head, payload, _ = plain.split(".")
    forged = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    forged["sub"] = "admin"
    ec_head, ec_payload, ec_sig = es256.split(".")
    raw_sig = jws.b64url_decode(ec_sig)
    # The same ES256 signature re-encoded as DER (what Java's Signature and Go's ASN.1 helpers
    # produce by default): JWS requires raw R || S, so this must not verify.
    der = encode_dss_signature(
        int.from_bytes(raw_sig[:32], "big"), int.from_bytes(raw_sig[32:], "big")
    )
    pub_raw = ED_KEY.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    pub_pem = ED_KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    hs256 = _ed_header(alg="HS256")

    def hmac_with(secret: bytes) -> Callable[[bytes], bytes]:
        return lambda data: hmac.new(secret, data, hashlib.sha256).digest()

    def p256_sign(data: bytes) -> bytes:
        return jws.sign(EC_KEY, data)

    return [
        _valid("valid_eddsa_with_approval", approved),
        _valid("valid_eddsa_without_approval", plain),
        _valid("valid_es256", es256),
        _valid("valid_anonymous_actor", anonymous),
        _valid("valid_just_before_expiry_plus_leeway", plain, now=exp + LEEWAY_S - 1),
        _valid("valid_iat_ahead_within_leeway", plain, now=T0 - LEEWAY_S),
        _valid("valid_with_exec_id_and_cap", _ed(_ed_header(), _claims(**EXECUTION))),
        _invalid("expired_at_expiry_plus_leeway", "expired", plain, now=exp + LEEWAY_S),
        _invalid("expired_long_ago", "expired", plain, now=T0 + 86_400),
        _invalid("not_yet_valid_iat_in_future", "not_yet_valid", plain, now=T0 - LEEWAY_S - 1),
        _invalid("wrong_audience", "wrong_audience", plain, audience="billing"),
        _invalid(
            "audience_list_is_not_a_string",
            "wrong_audience",
            _ed(_ed_header(), _claims(aud=[AUDIENCE])),
        ),
        _invalid("wrong_issuer", "wrong_issuer", _ed(_ed_header(), _claims(iss="capgate-staging"))),
        _invalid(
            "bad_signature_tampered_payload",
            "bad_signature",
            f"{head}.{_b64(jws.dumps_compact(forged))}.{plain.split('.')[2]}",
        ),
        _invalid(
            "bad_signature_other_key_same_kid",
            "bad_signature",
            _raw(_ed_header(), _claims(), OTHER_ED_KEY.sign),
        ),
        _invalid(
            "bad_signature_es256_in_der_form",
            "bad_signature",
            f"{ec_head}.{ec_payload}.{_b64(der)}",
        ),
        _invalid(
            "alg_none", "bad_alg", f"{_b64(jws.dumps_compact(_ed_header(alg='none')))}.{payload}."
        ),
        _invalid(
            "alg_hs256_keyed_with_raw_public_key",
            "bad_alg",
            _raw(hs256, _claims(), hmac_with(pub_raw)),
        ),
        _invalid(
            "alg_hs256_keyed_with_public_key_pem",
            "bad_alg",
            _raw(hs256, _claims(), hmac_with(pub_pem)),
        ),
        _invalid(
            "alg_es256_header_on_ed25519_kid",
            "bad_alg",
            _raw(_ed_header(alg="ES256"), _claims(), p256_sign),
        ),
        _invalid("unknown_kid", "unknown_kid", _ed(_ed_header(kid="retired-key-2025"), _claims())),
        _invalid(
            "kid_is_a_path", "unknown_kid", _ed(_ed_header(kid="../../etc/passwd"), _claims())
        ),
        _invalid("kid_missing", "unknown_kid", _ed(_ed_header(kid=None), _claims())),
        _invalid("typ_plain_jwt", "wrong_type", _ed(_ed_header(typ="JWT"), _claims())),
        _invalid("typ_missing", "wrong_type", _ed(_ed_header(typ=None), _claims())),
        _invalid("lifetime_61s", "lifetime_exceeded", _ed(_ed_header(), _claims(exp=T0 + 61))),
        _invalid("missing_surface", "invalid_claims", _ed(_ed_header(), _claims(surface=None))),
        _invalid(
            "exec_id_not_a_string",
            "invalid_claims",
            _ed(_ed_header(), _claims(**{**EXECUTION, "exec_id": 7})),
        ),
        _invalid("roles_not_a_list", "invalid_claims", _ed(_ed_header(), _claims(roles="admin"))),
        _invalid("exp_before_iat", "invalid_claims", _ed(_ed_header(), _claims(exp=T0 - 1))),
        _invalid("crit_header", "malformed", _ed(_ed_header(crit=["exp"]), _claims())),
        _invalid("two_segments", "malformed", f"{head}.{payload}"),
        _invalid("padded_base64", "malformed", f"{head}=.{payload}.{plain.split('.')[2]}"),
        _invalid(
            "header_not_json", "malformed", f"{_b64(b'not json')}.{payload}.{plain.split('.')[2]}"
        ),
    ]


def build() -> dict[str, Any]:
    """The whole vectors document (what vectors.json holds)."""
    jwks = {"keys": _signer(ED_KEY).jwks()["keys"] + _signer(EC_KEY).jwks()["keys"]}
    pem = serialization.Encoding.PEM
    pkcs8 = serialization.PrivateFormat.PKCS8
    private = {
        kid: key.private_bytes(pem, pkcs8, serialization.NoEncryption()).decode()
        for kid, key in ((ED_KID, ED_KEY), (EC_KID, EC_KEY))
    }
    return {
        "format": "capgate-actor-token-vectors/1",
        "about": "Golden vectors for verifiers of the capgate forwarded actor token. "
        "Test keys only: never use them anywhere else.",
        "token_type": TYP,
        "verifier": {"leeway_s": LEEWAY_S, "max_lifetime_s": LIFETIME_S},
        "check_order": [{"reason": r, "rule": rule} for r, rule in REASONS],
        "jwks": jwks,
        "private_keys_pem": private,
        "cases": _cases(),
    }


def render() -> str:
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if vectors.json is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is stale: run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(build()['cases'])} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
