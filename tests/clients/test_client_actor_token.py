"""capgate_client.server's own verifier against every golden actor-token vector (never skips),
and the client package standing alone: it must not import the gateway."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from capgate_client.server import ActorTokenInvalid, ActorTokenVerifier
from clientkit import VECTORS


def _never() -> float:
    raise AssertionError("the vectors inject `now`; the real clock must not be read")


@pytest.mark.parametrize("case", VECTORS["cases"], ids=[c["name"] for c in VECTORS["cases"]])
def test_verifier_agrees_with_the_golden_vector(case: dict[str, Any]) -> None:
    verifier = ActorTokenVerifier(
        VECTORS["jwks"],
        issuer=case["issuer"],
        audience=case["audience"],
        leeway_s=VECTORS["verifier"]["leeway_s"],
        max_lifetime_s=VECTORS["verifier"]["max_lifetime_s"],
        clock=_never,
    )
    if case["expect"] == "valid":
        assert verifier.verify(case["token"], now=case["now"]) == case["claims"]
    else:
        with pytest.raises(ActorTokenInvalid) as refused:
            verifier.verify(case["token"], now=case["now"])
        assert refused.value.reason == case["reason"]


def test_vectors_cover_both_outcomes_and_the_format_is_known() -> None:
    assert VECTORS["format"] == "capgate-actor-token-vectors/1"
    assert {c["expect"] for c in VECTORS["cases"]} == {"valid", "invalid"}


def test_a_duplicate_claim_name_is_malformed() -> None:
    verifier = ActorTokenVerifier(VECTORS["jwks"], issuer="capgate", audience="orders")
    valid = next(c for c in VECTORS["cases"] if c["name"] == "valid_eddsa_without_approval")
    header, _, signature = valid["token"].split(".")
    duplicate = "eyJzdWIiOiJhIiwic3ViIjoiYiJ9"  # {"sub":"a","sub":"b"}
    with pytest.raises(ActorTokenInvalid) as refused:
        verifier.verify(f"{header}.{duplicate}.{signature}")
    assert refused.value.reason == "malformed"


def test_a_jwks_with_a_private_key_or_a_mismatched_alg_is_refused_at_load() -> None:
    ed = dict(VECTORS["jwks"]["keys"][0])
    with pytest.raises(ValueError, match="public keys only"):
        ActorTokenVerifier({"keys": [{**ed, "d": "AAAA"}]}, issuer="capgate", audience="orders")
    with pytest.raises(ValueError, match="alg"):
        ActorTokenVerifier({"keys": [{**ed, "alg": "ES256"}]}, issuer="capgate", audience="orders")


def test_the_client_package_does_not_import_the_gateway() -> None:
    code = (
        "import sys, capgate_client, capgate_client.server, capgate_client.sync;"
        "bad = sorted(m for m in sys.modules if m == 'gateway' or m.startswith('gateway.'));"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
