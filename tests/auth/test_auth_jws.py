"""JWS primitives against the RFCs' own examples, and strict parsing."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from gateway.values import jws

# RFC 7638 §3.1: the example RSA key and its thumbprint.
RFC7638_N = (
    "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKR"
    "XjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAt"
    "aSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPk"
    "sINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"
)
# RFC 8037 appendix A: the Ed25519 key, its thumbprint and the signed example.
RFC8037_D = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"
RFC8037_X = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
RFC8037_JWS = (
    "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc."
    "hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg"
)


def test_thumbprints_match_rfc7638_and_rfc8037() -> None:
    rsa_key, _ = jws.public_key_from_jwk({"kty": "RSA", "n": RFC7638_N, "e": "AQAB"})
    assert jws.thumbprint(rsa_key) == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
    ed_key, algs = jws.public_key_from_jwk({"kty": "OKP", "crv": "Ed25519", "x": RFC8037_X})
    assert algs == ("EdDSA",)
    assert jws.thumbprint(ed_key) == "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"


def test_ed25519_signature_matches_rfc8037() -> None:
    private = ed25519.Ed25519PrivateKey.from_private_bytes(jws.b64url_decode(RFC8037_D))
    head, payload, signature = RFC8037_JWS.split(".")
    assert jws.b64url_encode(jws.sign(private, f"{head}.{payload}".encode())) == signature
    key, _ = jws.public_key_from_jwk({"kty": "OKP", "crv": "Ed25519", "x": RFC8037_X})
    verify_key = jws.VerifyKey("k", "EdDSA", key)
    assert verify_key.verify(f"{head}.{payload}".encode(), jws.b64url_decode(signature))
    assert not verify_key.verify(f"{head}.{payload}x".encode(), jws.b64url_decode(signature))


@pytest.mark.parametrize("text", ["YQ==", "Y Q", "YQ+", "YQ/", "Y", "YQ\n"])
def test_base64url_decoding_is_strict(text: str) -> None:
    with pytest.raises(jws.MalformedToken):
        jws.b64url_decode(text)


@pytest.mark.parametrize(
    "segment", [b'{"alg":"EdDSA","alg":"none"}', b"[1]", b'"x"', b"{", b"\xff"]
)
def test_header_must_be_one_json_object_without_duplicate_members(segment: bytes) -> None:
    token = f"{jws.b64url_encode(segment)}.{jws.b64url_encode(b'{}')}.AA"
    with pytest.raises(jws.MalformedToken):
        jws.parse_compact(token)


def test_es256_signature_must_be_64_raw_bytes() -> None:
    private = ec.generate_private_key(ec.SECP256R1())
    key = jws.VerifyKey("k", "ES256", private.public_key())
    signature = jws.sign(private, b"data")
    assert len(signature) == 64
    assert key.verify(b"data", signature)
    assert not key.verify(b"data", signature[:63])
    # Same R and S with S zero-padded to 33 bytes: numerically equal, but not the JWS encoding.
    assert not key.verify(b"data", signature[:32] + b"\x00" + signature[32:])
    assert not key.verify(b"data", b"\x00" * 64)  # r = s = 0 is never valid
