"""Caller JWT authentication: DESIGN §12's rules, each against real keys made in the test.

Tokens are minted with PyJWT (an independent implementation) unless the attack needs a token no
library would produce (alg confusion, `alg: none`), which is then built by hand.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import jwt as pyjwt
import pytest
from authkit import FakeClock
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from gateway.config.settings import JwtAuth, JwtKey
from gateway.transport.auth.base import AuthenticationFailed
from gateway.transport.auth.jwt import JwtAuthenticator
from gateway.values import jws

NOW = 1_800_000_000
ISSUER = "https://idp.example.com"
AUDIENCE = "capgate-agents"
HS_SECRET = "an-hs256-secret-that-is-32-bytes-long!"


def _public_pem(key: Any) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def ec_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


@pytest.fixture(scope="module")
def ed_key() -> ed25519.Ed25519PrivateKey:
    return ed25519.Ed25519PrivateKey.generate()


@pytest.fixture(scope="module")
def keys(rsa_key: Any, ec_key: Any, ed_key: Any) -> dict[str, Any]:
    """kid -> (alg, signing key, config entry)."""
    return {
        "hs": ("HS256", HS_SECRET.encode(), JwtKey(kid="hs", alg="HS256", secret=HS_SECRET)),
        "rsa": ("RS256", rsa_key, JwtKey("rsa", "RS256", public_key_pem=_public_pem(rsa_key))),
        "ec": ("ES256", ec_key, JwtKey("ec", "ES256", public_key_pem=_public_pem(ec_key))),
        "ed": ("EdDSA", ed_key, JwtKey("ed", "EdDSA", public_key_pem=_public_pem(ed_key))),
    }


def _settings(keys: dict[str, Any], **kw: Any) -> JwtAuth:
    base: dict[str, Any] = {
        "keys": tuple(entry for _, _, entry in keys.values()),
        "issuers": (ISSUER,),
        "audience": AUDIENCE,
        "max_lifetime_s": 3600,
        "leeway_s": 30,
        "attribute_claims": ("tenant", "email"),
    }
    base.update(kw)
    return JwtAuth(**base)


def _claims(**changes: Any) -> dict[str, Any]:
    claims: dict[str, Any] = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "user-1",
        "kind": "agent",
        "roles": ["support", "approver"],
        "tenant": "acme",
        "iat": NOW - 10,
        "exp": NOW + 600,
    }
    for name, value in changes.items():
        if value is None:
            claims.pop(name, None)
        else:
            claims[name] = value
    return claims


def _mint(keys: dict[str, Any], kid: str, claims: dict[str, Any] | None = None, **hdr: Any) -> str:
    alg, key, _ = keys[kid]
    headers = {"kid": kid, **hdr}
    return pyjwt.encode(claims or _claims(), key, algorithm=alg, headers=headers)


def _signing_input(header: dict[str, Any], claims: dict[str, Any]) -> str:
    encode = jws.b64url_encode
    return f"{encode(json.dumps(header).encode())}.{encode(json.dumps(claims).encode())}"


def _by_hand(header: dict[str, Any], claims: dict[str, Any], signature: bytes) -> str:
    return f"{_signing_input(header, claims)}.{jws.b64url_encode(signature)}"


def _md(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture
def auth(keys: dict[str, Any], clock: FakeClock) -> JwtAuthenticator:
    return JwtAuthenticator(_settings(keys), clock=clock)


def _refused(auth: JwtAuthenticator, token: str) -> str:
    with pytest.raises(AuthenticationFailed) as info:
        auth.authenticate(_md(token), {}, "ipv4:127.0.0.1:1")
    return info.value.reason


@pytest.mark.parametrize("kid", ["hs", "rsa", "ec", "ed"])
def test_valid_token_of_each_algorithm_maps_claims_to_the_actor(
    auth: JwtAuthenticator, keys: dict[str, Any], kid: str
) -> None:
    actor = auth.authenticate(_md(_mint(keys, kid)), {}, "ipv4:127.0.0.1:1")
    assert actor.id == "user-1"
    assert actor.kind == "agent"
    assert actor.issuer == ISSUER
    assert actor.roles == ("support", "approver")
    assert dict(actor.attributes) == {"tenant": "acme"}  # `email` absent => not present


def test_rs256_public_key_used_as_hs256_secret_is_refused(
    auth: JwtAuthenticator, keys: dict[str, Any], rsa_key: rsa.RSAPrivateKey
) -> None:
    header = {"alg": "HS256", "kid": "rsa", "typ": "JWT"}
    head = _signing_input(header, _claims())
    forged = hmac.new(_public_pem(rsa_key).encode(), head.encode(), hashlib.sha256).digest()
    assert _refused(auth, f"{head}.{jws.b64url_encode(forged)}") == "algorithm not allowed"


def test_alg_none_is_refused(auth: JwtAuthenticator) -> None:
    for kid in ("rsa", "hs"):
        token = _by_hand({"alg": "none", "kid": kid}, _claims(), b"")
        assert _refused(auth, token) == "algorithm not allowed"


def test_header_alg_that_differs_from_the_pinned_one_is_refused(
    auth: JwtAuthenticator, keys: dict[str, Any]
) -> None:
    # Signed correctly with the EC key, but claiming the RSA key's kid.
    token = pyjwt.encode(_claims(), keys["ec"][1], algorithm="ES256", headers={"kid": "rsa"})
    assert _refused(auth, token) == "algorithm not allowed"


def test_another_audience_is_refused(auth: JwtAuthenticator, keys: dict[str, Any]) -> None:
    assert _refused(auth, _mint(keys, "ed", _claims(aud="capgate-admin"))) == "wrong audience"
    assert _refused(auth, _mint(keys, "ed", _claims(aud=None))) == "wrong audience"


def test_audience_list_naming_this_listener_is_accepted(
    auth: JwtAuthenticator, keys: dict[str, Any]
) -> None:
    token = _mint(keys, "ed", _claims(aud=["other-api", AUDIENCE]))
    assert auth.authenticate(_md(token), {}, "").id == "user-1"


def test_path_in_kid_finds_no_key_even_when_the_file_exists(
    auth: JwtAuthenticator, keys: dict[str, Any], tmp_path: Path, rsa_key: rsa.RSAPrivateKey
) -> None:
    pem_file = tmp_path / "key.pem"
    pem_file.write_text(_public_pem(rsa_key))
    for kid in ("../../etc/passwd", str(pem_file), "file://" + str(pem_file)):
        token = pyjwt.encode(_claims(), rsa_key, algorithm="RS256", headers={"kid": kid})
        assert _refused(auth, token) == "unknown signing key"


def test_expired_token_is_refused_after_the_leeway(
    auth: JwtAuthenticator, keys: dict[str, Any], clock: FakeClock
) -> None:
    token = _mint(keys, "ed", _claims(iat=NOW - 100, exp=NOW - 29))
    assert auth.authenticate(_md(token), {}, "").id == "user-1"  # within 30 s leeway
    fresh = JwtAuthenticator(_settings(keys), clock=clock)
    clock.now = NOW + 1
    assert _refused(fresh, token) == "token expired"


def test_token_issued_in_the_future_is_refused(
    auth: JwtAuthenticator, keys: dict[str, Any]
) -> None:
    assert _refused(auth, _mint(keys, "ed", _claims(iat=NOW + 31))) == "token not yet valid"
    assert _refused(auth, _mint(keys, "ed", _claims(nbf=NOW + 31))) == "token not yet valid"


def test_lifetime_longer_than_the_maximum_is_refused(
    auth: JwtAuthenticator, keys: dict[str, Any]
) -> None:
    token = _mint(keys, "ed", _claims(iat=NOW - 10, exp=NOW - 10 + 3601))
    assert _refused(auth, token) == "token lifetime too long"


@pytest.mark.parametrize("claim", ["exp", "iat"])
def test_exp_and_iat_are_required(auth: JwtAuthenticator, keys: dict[str, Any], claim: str) -> None:
    assert _refused(auth, _mint(keys, "ed", _claims(**{claim: None}))) == (
        f"missing or invalid '{claim}' claim"
    )


def test_issuer_outside_the_allow_list_is_refused(
    auth: JwtAuthenticator, keys: dict[str, Any]
) -> None:
    assert _refused(auth, _mint(keys, "ed", _claims(iss="https://evil.example"))) == (
        "issuer not allowed"
    )


def test_token_signed_by_another_key_is_refused(auth: JwtAuthenticator) -> None:
    stranger = ed25519.Ed25519PrivateKey.generate()
    token = pyjwt.encode(_claims(), stranger, algorithm="EdDSA", headers={"kid": "ed"})
    assert _refused(auth, token) == "invalid signature"
    other_secret = "another-secret-that-is-32-bytes-long!!"
    token = pyjwt.encode(_claims(), other_secret, algorithm="HS256", headers={"kid": "hs"})
    assert _refused(auth, token) == "invalid signature"


def test_key_material_in_the_header_is_ignored(
    auth: JwtAuthenticator, keys: dict[str, Any]
) -> None:
    attacker = ec.generate_private_key(ec.SECP256R1())
    embedded = json.loads(pyjwt.algorithms.ECAlgorithm.to_jwk(attacker.public_key()))
    for field in ({"jwk": embedded}, {"jku": "https://evil.example/jwks"}, {"x5u": "x"}):
        token = pyjwt.encode(_claims(), attacker, algorithm="ES256", headers={"kid": "ec", **field})
        assert _refused(auth, token) == "invalid signature"
    # ...and they do not make a genuine token fail either: they are simply never read.
    genuine = _mint(keys, "ec", None, jku="https://evil.example/jwks", x5c=["AAAA"])
    assert auth.authenticate(_md(genuine), {}, "").id == "user-1"


def test_crit_header_is_refused(auth: JwtAuthenticator, keys: dict[str, Any]) -> None:
    token = _mint(keys, "ed", None, crit=["exp"])
    assert _refused(auth, token) == "unsupported critical header"


@pytest.mark.parametrize(
    "token", ["garbage", "a.b", "a.b.c.d", "eyJhbGciOiJIUzI1NiJ9=.e30.sig", "e30.e30.!!"]
)
def test_malformed_token_is_refused(auth: JwtAuthenticator, token: str) -> None:
    assert _refused(auth, token) == "malformed token"


@pytest.mark.parametrize(
    ("metadata", "reason"),
    [
        ([], "missing bearer token"),
        ([("authorization", "Basic dXNlcjpwYXNz")], "missing bearer token"),
        ([("authorization", "Bearer ")], "missing bearer token"),
        ([("authorization", "Bearer a"), ("authorization", "Bearer b")], "more than one"),
        ([("authorization", "Bearer " + "a" * 9000)], "token too large"),
    ],
)
def test_missing_or_ambiguous_authorization_header_is_refused(
    auth: JwtAuthenticator, metadata: list[tuple[str, str]], reason: str
) -> None:
    with pytest.raises(AuthenticationFailed, match=reason):
        auth.authenticate(metadata, {}, "")


def test_reasons_never_carry_token_contents(auth: JwtAuthenticator, keys: dict[str, Any]) -> None:
    token = _mint(keys, "ed", _claims(aud="secret-audience-value"))
    with pytest.raises(AuthenticationFailed) as info:
        auth.authenticate(_md(token), {}, "")
    assert "secret-audience-value" not in str(info.value)
    assert token not in str(info.value)


@pytest.mark.parametrize("kind", ["anonymous", "admin", 7])
def test_kind_outside_user_service_agent_is_refused(
    auth: JwtAuthenticator, keys: dict[str, Any], kind: Any
) -> None:
    assert _refused(auth, _mint(keys, "ed", _claims(kind=kind))) == "actor kind not allowed"


def test_default_kind_applies_when_the_claim_is_absent(keys: dict[str, Any]) -> None:
    auth = JwtAuthenticator(_settings(keys, default_kind="service"), clock=FakeClock(NOW))
    assert auth.authenticate(_md(_mint(keys, "ed", _claims(kind=None))), {}, "").kind == "service"
    with pytest.raises(ValueError, match="default_kind"):
        JwtAuthenticator(_settings(keys, default_kind="anonymous"))


def test_custom_claim_names_and_bad_roles(keys: dict[str, Any]) -> None:
    auth = JwtAuthenticator(
        _settings(keys, id_claim="email", roles_claim="groups", kind_claim="typ"),
        clock=FakeClock(NOW),
    )
    claims = _claims(email="a@example.com", groups=["ops"], typ="service")
    actor = auth.authenticate(_md(_mint(keys, "ed", claims)), {}, "")
    assert (actor.id, actor.kind, actor.roles) == ("a@example.com", "service", ("ops",))
    assert _refused(auth, _mint(keys, "ed", _claims(email="a@x", groups="ops"))) == (
        "invalid roles claim"
    )
    assert _refused(auth, _mint(keys, "ed", _claims())) == "missing actor id claim"


def test_short_hs256_secret_is_a_config_error() -> None:
    short = JwtKey(kid="hs", alg="HS256", secret="x" * 31)
    with pytest.raises(ValueError, match="at least 32 bytes"):
        JwtAuthenticator(JwtAuth(keys=(short,), issuers=(ISSUER,), audience=AUDIENCE))


def test_weak_or_mistyped_keys_are_config_errors(rsa_key: rsa.RSAPrivateKey) -> None:
    small = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    cases = [
        JwtKey("a", "RS256", public_key_pem=_public_pem(small)),  # < 2048 bits
        JwtKey("a", "ES256", public_key_pem=_public_pem(rsa_key)),  # RSA key pinned to ES256
        JwtKey("a", "RS256"),  # no key material and no JWKS
        JwtKey("a", "HS256", secret=HS_SECRET, public_key_pem=_public_pem(rsa_key)),
    ]
    for key in cases:
        with pytest.raises(ValueError):
            JwtAuthenticator(JwtAuth(keys=(key,), issuers=(ISSUER,), audience=AUDIENCE))
    with pytest.raises(ValueError, match="duplicate"):
        JwtAuthenticator(
            JwtAuth(
                keys=(
                    JwtKey("a", "HS256", secret=HS_SECRET),
                    JwtKey("a", "HS256", secret=HS_SECRET),
                ),
                issuers=(ISSUER,),
                audience=AUDIENCE,
            )
        )
    with pytest.raises(ValueError, match="issuer"):
        JwtAuthenticator(JwtAuth(keys=(JwtKey("a", "HS256", secret=HS_SECRET),), audience="x"))
    with pytest.raises(ValueError, match="audience"):
        JwtAuthenticator(JwtAuth(keys=(JwtKey("a", "HS256", secret=HS_SECRET),), issuers=("i",)))


def test_token_without_kid_needs_exactly_one_key(
    keys: dict[str, Any], ed_key: ed25519.Ed25519PrivateKey
) -> None:
    single = JwtAuthenticator(_settings({"ed": keys["ed"]}), clock=FakeClock(NOW))
    token = pyjwt.encode(_claims(), ed_key, algorithm="EdDSA")
    assert single.authenticate(_md(token), {}, "").id == "user-1"
    several = JwtAuthenticator(_settings(keys), clock=FakeClock(NOW))
    assert _refused(several, token) == "unknown signing key"


def test_verified_token_is_cached_until_exp(
    auth: JwtAuthenticator, keys: dict[str, Any], clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    original = jws.VerifyKey.verify

    def counting(self: jws.VerifyKey, signing_input: bytes, signature: bytes) -> bool:
        calls.append(self.kid)
        return original(self, signing_input, signature)

    monkeypatch.setattr(jws.VerifyKey, "verify", counting)
    token = _mint(keys, "ec", _claims(iat=NOW, exp=NOW + 60))
    first = auth.authenticate(_md(token), {}, "")
    second = auth.authenticate(_md(token), {}, "")
    assert second is first
    assert calls == ["ec"]  # the second call skipped signature verification
    with pytest.raises(TypeError):
        first.attributes["tenant"] = "other"  # type: ignore[index]  # shared: read-only
    clock.now = NOW + 60 + 30  # exp + leeway
    with pytest.raises(AuthenticationFailed, match="token expired"):
        auth.authenticate(_md(token), {}, "")
    assert calls == ["ec"]  # refused from the cache entry, not re-verified


def test_cache_is_bounded(keys: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    original = jws.VerifyKey.verify

    def counting(self: jws.VerifyKey, signing_input: bytes, signature: bytes) -> bool:
        calls.append(1)
        return original(self, signing_input, signature)

    monkeypatch.setattr(jws.VerifyKey, "verify", counting)
    auth = JwtAuthenticator(_settings(keys), clock=FakeClock(NOW), cache_entries=2)
    tokens = [_mint(keys, "ed", _claims(sub=f"user-{i}")) for i in range(3)]
    for token in tokens:
        auth.authenticate(_md(token), {}, "")
    auth.authenticate(_md(tokens[2]), {}, "")  # most recent: cached
    assert len(calls) == 3
    auth.authenticate(_md(tokens[0]), {}, "")  # evicted: verified again
    assert len(calls) == 4


def test_invalid_tokens_are_not_cached(auth: JwtAuthenticator, keys: dict[str, Any]) -> None:
    token = _mint(keys, "ed", _claims(iss="https://evil.example"))
    for _ in range(2):
        assert _refused(auth, token) == "issuer not allowed"


def test_capgate_metadata_is_never_trusted_on_a_jwt_listener(
    auth: JwtAuthenticator, keys: dict[str, Any]
) -> None:
    metadata = [
        ("x-capgate-actor-id", "root"),
        ("x-capgate-actor-kind", "service"),
        ("x-capgate-actor-roles", "admin"),
        *_md(_mint(keys, "ed")),
    ]
    actor = auth.authenticate(metadata, {}, "")
    assert (actor.id, actor.roles) == ("user-1", ("support", "approver"))
    with pytest.raises(AuthenticationFailed):
        auth.authenticate(metadata[:3], {}, "")  # without a token, the assertion alone fails


class TestJwks:
    def _write(self, tmp_path: Path, entries: list[dict[str, Any]]) -> str:
        path = tmp_path / "jwks.json"
        path.write_text(json.dumps({"keys": entries}))
        return str(path)

    def _jwk(self, key: Any, kid: str, **extra: Any) -> dict[str, Any]:
        jwk = dict(jws.public_jwk(key.public_key()))
        jwk.update(kid=kid, **extra)
        return jwk

    def test_keys_with_alg_are_used(self, tmp_path: Path, ec_key: Any, rsa_key: Any) -> None:
        path = self._write(
            tmp_path,
            [self._jwk(ec_key, "k-ec", alg="ES256"), self._jwk(rsa_key, "k-rsa", alg="RS256")],
        )
        auth = JwtAuthenticator(
            JwtAuth(jwks_file=path, issuers=(ISSUER,), audience=AUDIENCE), clock=FakeClock(NOW)
        )
        for kid, key, alg in (("k-ec", ec_key, "ES256"), ("k-rsa", rsa_key, "RS256")):
            token = pyjwt.encode(_claims(), key, algorithm=alg, headers={"kid": kid})
            assert auth.authenticate(_md(token), {}, "").id == "user-1"

    def test_key_without_alg_takes_the_pin_from_config(self, tmp_path: Path, ed_key: Any) -> None:
        path = self._write(tmp_path, [self._jwk(ed_key, "k-ed")])
        settings = JwtAuth(
            keys=(JwtKey("k-ed", "EdDSA"),), jwks_file=path, issuers=(ISSUER,), audience=AUDIENCE
        )
        auth = JwtAuthenticator(settings, clock=FakeClock(NOW))
        token = pyjwt.encode(_claims(), ed_key, algorithm="EdDSA", headers={"kid": "k-ed"})
        assert auth.authenticate(_md(token), {}, "").id == "user-1"
        with pytest.raises(ValueError, match="no 'alg'"):
            JwtAuthenticator(JwtAuth(jwks_file=path, issuers=(ISSUER,), audience=AUDIENCE))

    @pytest.mark.parametrize(
        ("extra", "message"),
        [({"alg": "RS256"}, "cannot serve"), ({"alg": "ES256", "use": "enc"}, "use")],
    )
    def test_inconsistent_keys_are_config_errors(
        self, tmp_path: Path, ec_key: Any, extra: dict[str, Any], message: str
    ) -> None:
        path = self._write(tmp_path, [self._jwk(ec_key, "k", **extra)])
        with pytest.raises(ValueError, match=message):
            JwtAuthenticator(JwtAuth(jwks_file=path, issuers=(ISSUER,), audience=AUDIENCE))

    def test_private_or_kidless_keys_are_config_errors(self, tmp_path: Path, ec_key: Any) -> None:
        private = self._jwk(ec_key, "k", alg="ES256", d="AAAA")
        kidless = {k: v for k, v in self._jwk(ec_key, "k", alg="ES256").items() if k != "kid"}
        for entry, message in ((private, "public keys only"), (kidless, "kid")):
            path = self._write(tmp_path, [entry])
            with pytest.raises(ValueError, match=message):
                JwtAuthenticator(JwtAuth(jwks_file=path, issuers=(ISSUER,), audience=AUDIENCE))
