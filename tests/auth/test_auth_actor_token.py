"""The forwarded actor token: what the gateway signs, and what an upstream's verifier accepts."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import jwt as pyjwt
import pytest
from authkit import FakeClock
from capgate_client.actor_token import ActorTokenInvalid, ActorTokenVerifier
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from gateway.model import Actor
from gateway.upstream.actor_token import ActorTokenSettings, ActorTokenSigner
from gateway.values import jws

NOW = 1_800_000_000
ACTOR = Actor(id="user-9", kind="agent", issuer="https://idp.example.com", roles=("ops", "audit"))
CALL: dict[str, Any] = {"upstream": "orders", "surface": "agent"}


def _signer(**kw: Any) -> ActorTokenSigner:
    settings = kw.pop("settings", ActorTokenSettings())
    return ActorTokenSigner(settings, clock=FakeClock(NOW), **kw)


def _verifier(signer: ActorTokenSigner, audience: str = "orders", **kw: Any) -> ActorTokenVerifier:
    return ActorTokenVerifier(
        signer.jwks(), issuer="capgate", audience=audience, clock=FakeClock(NOW + 1), **kw
    )


def _pem_file(tmp_path: Path, key: Any) -> str:
    path = tmp_path / "actor.key"
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(path)


def test_signed_token_carries_every_claim_and_verifies() -> None:
    signer = _signer()
    token = signer.sign(ACTOR, **CALL, approval_id="apr_1", approver="alice")
    claims = _verifier(signer).verify(token)
    jti = claims.pop("jti")
    assert claims == {
        "iss": "capgate",
        "aud": "orders",
        "sub": "user-9",
        "actor_iss": "https://idp.example.com",
        "kind": "agent",
        "roles": ["ops", "audit"],
        "surface": "agent",
        "approval_id": "apr_1",
        "approver": "alice",
        "iat": NOW,
        "exp": NOW + 60,
    }
    assert isinstance(jti, str)
    assert len(jti) >= 22  # 128 random bits
    header = jws.parse_compact(token).header
    assert header == {"alg": "EdDSA", "kid": signer.kid, "typ": "capgate-actor+jwt"}


def test_approval_claims_appear_only_when_the_call_was_approved() -> None:
    signer = _signer()
    claims = _verifier(signer).verify(signer.sign(ACTOR, **CALL))
    assert "approval_id" not in claims
    assert "approver" not in claims


def test_a_token_is_reused_for_the_same_actor_upstream_and_surface_for_half_its_life() -> None:
    clock = FakeClock(NOW)
    signer = ActorTokenSigner(ActorTokenSettings(lifetime_s=60), clock=clock)
    first = signer.sign(ACTOR, **CALL)
    clock.now = NOW + 29.9
    assert signer.sign(ACTOR, **CALL) == first
    claims = jws.parse_compact(first).payload
    assert "exec_id" not in claims and "cap" not in claims  # the execution travels as metadata
    clock.now = NOW + 30  # every token handed out has at least half its lifetime left
    second = signer.sign(ACTOR, **CALL)
    assert second != first
    assert jws.parse_compact(second).payload["iat"] == NOW + 30
    clock.now = NOW - 5  # the clock stepped back before iat: never hand out a future token
    assert signer.sign(ACTOR, **CALL) not in (first, second)


@pytest.mark.parametrize(
    ("actor", "call"),
    [
        (
            Actor(
                id="user-8", kind="agent", issuer="https://idp.example.com", roles=("ops", "audit")
            ),
            CALL,
        ),
        (
            Actor(
                id="user-9", kind="agent", issuer="https://other.example", roles=("ops", "audit")
            ),
            CALL,
        ),
        (
            Actor(
                id="user-9", kind="user", issuer="https://idp.example.com", roles=("ops", "audit")
            ),
            CALL,
        ),
        (Actor(id="user-9", kind="agent", issuer="https://idp.example.com", roles=("ops",)), CALL),
        (ACTOR, {**CALL, "upstream": "billing"}),
        (ACTOR, {**CALL, "surface": "direct"}),
    ],
    ids=["actor", "actor_issuer", "kind", "roles", "upstream", "surface"],
)
def test_a_token_is_never_reused_across_anything_it_states(
    actor: Actor, call: dict[str, Any]
) -> None:
    signer = _signer()
    base = signer.sign(ACTOR, **CALL)
    other = signer.sign(actor, **call)
    assert other != base
    payload = jws.parse_compact(other).payload
    assert (payload["sub"], payload["actor_iss"], payload["kind"], payload["roles"]) == (
        actor.id,
        actor.issuer,
        actor.kind,
        list(actor.roles),
    )
    assert (payload["aud"], payload["surface"]) == (call["upstream"], call["surface"])
    assert signer.sign(ACTOR, **CALL) == base  # and each keeps its own


def test_an_approved_call_gets_a_token_of_its_own() -> None:
    signer = _signer()
    plain = signer.sign(ACTOR, **CALL)
    approved = {signer.sign(ACTOR, **CALL, approval_id="apr_1", approver="alice") for _ in range(3)}
    assert len(approved) == 3 and plain not in approved
    assert signer.sign(ACTOR, **CALL) == plain


def test_the_reuse_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from gateway.upstream import actor_token  # noqa: PLC0415

    monkeypatch.setattr(actor_token, "MAX_CACHED", 8)
    clock = FakeClock(NOW)
    signer = ActorTokenSigner(ActorTokenSettings(), clock=clock)
    for i in range(20):
        signer.sign(Actor(id=f"u{i}", kind="user", issuer="idp"), **CALL)
        assert len(signer._cache) <= 8
    clock.now = NOW + 31  # all expired for reuse: dropped first, the new one kept
    signer.sign(ACTOR, **CALL)
    assert len(signer._cache) == 1


def test_a_one_second_lifetime_is_never_reused() -> None:
    signer = _signer(settings=ActorTokenSettings(lifetime_s=1))
    assert signer.sign(ACTOR, **CALL) != signer.sign(ACTOR, **CALL)


def test_lifetime_is_at_most_60_seconds() -> None:
    signer = _signer(settings=ActorTokenSettings(lifetime_s=30))
    claims = _verifier(signer).verify(signer.sign(ACTOR, **CALL))
    assert claims["exp"] - claims["iat"] == 30
    for bad in (0, 61, 3600):
        with pytest.raises(ValueError, match="lifetime_s"):
            _signer(settings=ActorTokenSettings(lifetime_s=bad))


def test_token_for_one_upstream_is_refused_by_another() -> None:
    signer = _signer()
    token = signer.sign(ACTOR, **CALL)
    with pytest.raises(ActorTokenInvalid) as info:
        _verifier(signer, audience="billing").verify(token)
    assert info.value.reason == "wrong_audience"


def test_expired_token_is_refused() -> None:
    signer = _signer()
    token = signer.sign(ACTOR, **CALL)
    verifier = _verifier(signer)
    assert verifier.verify(token, now=NOW + 64)["sub"] == "user-9"
    with pytest.raises(ActorTokenInvalid, match="expired"):
        verifier.verify(token, now=NOW + 65)


def test_kid_defaults_to_the_rfc7638_thumbprint_and_can_be_configured() -> None:
    key = ed25519.Ed25519PrivateKey.generate()
    signer = _signer(private_key=key)
    assert signer.kid == jws.thumbprint(key.public_key())
    assert _signer(settings=ActorTokenSettings(kid="gw-2026-01")).kid == "gw-2026-01"


def test_without_a_key_file_each_process_generates_its_own_key() -> None:
    first, second = _signer(), _signer()
    assert first.kid != second.kid
    with pytest.raises(ActorTokenInvalid) as info:
        _verifier(first).verify(second.sign(ACTOR, **CALL))
    assert info.value.reason == "unknown_kid"


def test_ed25519_key_file_signs_eddsa(tmp_path: Path) -> None:
    key = ed25519.Ed25519PrivateKey.generate()
    signer = _signer(settings=ActorTokenSettings(key_file=_pem_file(tmp_path, key)))
    assert (signer.alg, signer.kid) == ("EdDSA", jws.thumbprint(key.public_key()))
    assert _verifier(signer).verify(signer.sign(ACTOR, **CALL))["sub"] == "user-9"


def test_p256_key_file_signs_es256(tmp_path: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    signer = _signer(settings=ActorTokenSettings(key_file=_pem_file(tmp_path, key)))
    token = signer.sign(ACTOR, **CALL)
    assert signer.alg == "ES256"
    assert len(jws.parse_compact(token).signature) == 64  # raw R || S, not DER
    assert _verifier(signer).verify(token)["sub"] == "user-9"


@pytest.mark.parametrize(
    "key",
    [
        rsa.generate_private_key(public_exponent=65537, key_size=2048),
        ec.generate_private_key(ec.SECP384R1()),
    ],
)
def test_other_key_types_are_refused(tmp_path: Path, key: Any) -> None:
    with pytest.raises(ValueError, match="Ed25519 or EC P-256"):
        _signer(settings=ActorTokenSettings(key_file=_pem_file(tmp_path, key)))


def test_unreadable_key_file_error_names_the_path_not_the_contents(tmp_path: Path) -> None:
    path = tmp_path / "broken.key"
    path.write_text(
        "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LW1hdGVyaWFs\n-----END PRIVATE KEY-----\n"
    )
    with pytest.raises(ValueError) as info:
        _signer(settings=ActorTokenSettings(key_file=str(path)))
    assert "broken.key" in str(info.value)
    assert "c2VjcmV0" not in str(info.value)


def test_jwks_is_public_and_written_atomically(tmp_path: Path) -> None:
    signer = _signer()
    jwks = signer.jwks()
    assert jwks == {
        "keys": [
            {
                "kty": "OKP",
                "crv": "Ed25519",
                "x": jwks["keys"][0]["x"],
                "kid": signer.kid,
                "alg": "EdDSA",
                "use": "sig",
            }
        ]
    }
    target = tmp_path / "jwks.json"
    target.write_text("old")
    signer.write_jwks(target)
    assert json.loads(target.read_text()) == jwks
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["jwks.json"]  # no temp file left behind
    verifier = ActorTokenVerifier.from_file(str(target), issuer="capgate", audience="orders")
    assert verifier.verify(signer.sign(ACTOR, **CALL), now=NOW)["surface"] == "agent"


def test_an_independent_jose_library_verifies_the_token() -> None:
    signer = _signer()
    token = signer.sign(ACTOR, **CALL)
    key = pyjwt.PyJWK(signer.jwks()["keys"][0])
    claims = pyjwt.decode(
        token,
        key,
        algorithms=["EdDSA"],
        audience="orders",
        issuer="capgate",
        options={"verify_exp": False, "verify_iat": False},
    )
    assert claims["sub"] == "user-9"


def test_verifier_refuses_unusable_jwks() -> None:
    for jwks in (
        {},
        {"keys": []},
        {"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "AAAA", "alg": "EdDSA"}]},
        {"keys": [{**_signer().jwks()["keys"][0], "alg": "HS256"}]},
        {"keys": [{**_signer().jwks()["keys"][0], "alg": "ES256"}]},
    ):
        with pytest.raises(ValueError):
            ActorTokenVerifier(jwks, issuer="capgate", audience="orders")


def test_a_grant_token_carries_the_grant_and_is_reused_per_grant() -> None:
    """Calls a standing grant covers share a token per grant (ADR 0038); an approval's never."""
    signer = _signer()
    first = signer.sign(ACTOR, **CALL, approver="fiona", grant_id="g1")
    claims = _verifier(signer).verify(first)
    assert (claims["grant_id"], claims["approver"]) == ("g1", "fiona")
    assert "approval_id" not in claims
    assert signer.sign(ACTOR, **CALL, approver="fiona", grant_id="g1") == first
    assert signer.sign(ACTOR, **CALL, approver="fiona", grant_id="g2") != first
    assert signer.sign(ACTOR, **CALL) != first
    approved = signer.sign(ACTOR, **CALL, approval_id="apr_1", approver="alice")
    assert signer.sign(ACTOR, **CALL, approval_id="apr_1", approver="alice") != approved
