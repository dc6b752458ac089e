"""The golden actor-token vectors: the Python verifier must give every case its expected outcome.

The same file is the acceptance test of the Go, TypeScript and Java verifiers (README.md beside it).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import jwt as pyjwt
import pytest
from capgate_client.actor_token import REASONS, ActorTokenInvalid, ActorTokenVerifier

from gateway.values import jws

VECTORS_DIR = Path(__file__).resolve().parents[1] / "vectors" / "actor_token"
DOC: dict[str, Any] = json.loads((VECTORS_DIR / "vectors.json").read_text())
CASES = DOC["cases"]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "actor_token_vectors", VECTORS_DIR / "generate.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _verifier(case: dict[str, Any]) -> ActorTokenVerifier:
    return ActorTokenVerifier(
        DOC["jwks"],
        issuer=case["issuer"],
        audience=case["audience"],
        leeway_s=DOC["verifier"]["leeway_s"],
        max_lifetime_s=DOC["verifier"]["max_lifetime_s"],
    )


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_vector(case: dict[str, Any]) -> None:
    verifier = _verifier(case)
    if case["expect"] == "valid":
        assert verifier.verify(case["token"], now=case["now"]) == case["claims"]
    else:
        with pytest.raises(ActorTokenInvalid) as info:
            verifier.verify(case["token"], now=case["now"])
        assert info.value.reason == case["reason"]


def test_vectors_file_is_what_the_generator_produces() -> None:
    assert (VECTORS_DIR / "vectors.json").read_text() == _generator().render()


def test_every_reason_class_has_a_vector_and_the_order_matches_the_verifier() -> None:
    reasons = {c["reason"] for c in CASES if c["expect"] == "invalid"}
    assert reasons == REASONS
    documented = [step["reason"] for step in DOC["check_order"]]
    assert set(documented) == REASONS
    assert {c["expect"] for c in CASES} == {"valid", "invalid"}


def test_jwks_kids_are_rfc7638_thumbprints() -> None:
    for jwk in DOC["jwks"]["keys"]:
        key, _ = jws.public_key_from_jwk(jwk)
        assert jwk["kid"] == jws.thumbprint(key)


@pytest.mark.parametrize(
    "case", [c for c in CASES if c["expect"] == "valid"], ids=lambda c: c["name"]
)
def test_valid_vectors_verify_with_an_independent_library(case: dict[str, Any]) -> None:
    header = jws.parse_compact(case["token"]).header
    jwk = next(k for k in DOC["jwks"]["keys"] if k["kid"] == header["kid"])
    claims = pyjwt.decode(
        case["token"],
        pyjwt.PyJWK(jwk),
        algorithms=[jwk["alg"]],
        audience=case["audience"],
        issuer=case["issuer"],
        options={"verify_exp": False, "verify_iat": False},
    )
    assert claims == case["claims"]
