"""Listener refusals (§12 "Listeners and identity") and verification-key checks."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from gateway.config import ConfigError, load_settings
from gateway.values import jws

UNIX = "unix:///tmp/capgate-test/capgate.sock"


def listener(**fields: Any) -> dict[str, Any]:
    return {"name": "extra", "address": "127.0.0.1:9000", "surface": "direct", **fields}


def admin_jwt() -> dict[str, Any]:
    key = {"kid": "a", "alg": "HS256", "secret": "{{ env.JWT_SECRET }}"}
    return {"issuers": ["idp"], "audience": "capgate-admin", "keys": [key]}


def problems(write, base, env, extra: dict[str, Any]) -> set[tuple[str, str]]:
    base["listeners"].append(extra)
    with pytest.raises(ConfigError) as info:
        load_settings(write(base), environ=env)
    return {(p.path_in_file, p.message) for p in info.value.problems}


REFUSALS: list[tuple[str, dict[str, Any], tuple[str, str]]] = [
    (
        "trusted-local on TCP",
        listener(auth="trusted-local"),
        ("listeners[1].auth", "trusted-local is only allowed on a unix socket address"),
    ),
    (
        "trusted-local on an admin listener",
        listener(address=UNIX, role="admin", auth="trusted-local"),
        ("listeners[1].auth", "trusted-local is refused on admin listeners"),
    ),
    (
        "trusted-local on an mcp listener",
        listener(address=UNIX, surface="mcp", auth="trusted-local"),
        ("listeners[1].auth", "trusted-local is refused on mcp listeners"),
    ),
    (
        "auth none on an admin listener",
        listener(role="admin", auth="none"),
        ("listeners[1].auth", "auth: none is refused on admin listeners"),
    ),
    (
        "on_behalf_of on a caller listener",
        listener(auth="none", on_behalf_of=[{"issuer": "idp", "id": "inbox"}]),
        ("listeners[1].on_behalf_of", "only allowed on admin listeners"),
    ),
    (
        "auditor_roles on a caller listener",
        listener(auth="none", auditor_roles=["auditor"]),
        ("listeners[1].auditor_roles", "only allowed on admin listeners"),
    ),
    (
        "duplicate name",
        listener(name="agents", auth="none"),
        ("listeners[1].name", "duplicate listener name (also listeners[0])"),
    ),
    (
        "duplicate address",
        listener(address="127.0.0.1:7443", auth="none"),
        ("listeners[1].address", "address already used by listeners[0]"),
    ),
    (
        "jwt without its block",
        listener(auth="jwt"),
        ("listeners[1].auth", "auth: jwt needs a jwt block"),
    ),
    (
        "a jwt block on a listener with auth none",
        listener(auth="none", jwt=admin_jwt()),
        ("listeners[1].jwt", "only used with auth: jwt"),
    ),
    (
        "mtls without a client CA",
        listener(auth="mtls"),
        ("listeners[1].auth", "auth: mtls needs tls.client_ca_file"),
    ),
    (
        "socket_mode on TCP",
        listener(auth="none", socket_mode="0600"),
        ("listeners[1].socket_mode", "only used with a unix socket address"),
    ),
    (
        "port out of range",
        listener(address="127.0.0.1:70000", auth="none"),
        ("listeners[1].address", "port must be at most 65535"),
    ),
    (
        "a PEM key as an HS256 secret",
        listener(
            auth="jwt",
            jwt={
                "issuers": ["idp"],
                "audience": "x",
                "keys": [{"kid": "a", "alg": "HS256", "secret": "-----BEGIN PUBLIC KEY-----" * 2}],
            },
        ),
        ("listeners[1].jwt.keys[0].secret", "an HS256 secret must not be a PEM key"),
    ),
    (
        "an RS256 key without key material",
        listener(
            auth="jwt",
            jwt={"issuers": ["i"], "audience": "x", "keys": [{"kid": "a", "alg": "RS256"}]},
        ),
        (
            "listeners[1].jwt.keys[0]",
            "an RS256 key needs exactly one of public_key_pem or public_key_file",
        ),
    ),
    (
        "jwt with no keys at all",
        listener(auth="jwt", jwt={"issuers": ["i"], "audience": "x"}),
        ("listeners[1].jwt", "needs keys or jwks_file"),
    ),
]


@pytest.mark.parametrize(("case", "extra", "expected"), REFUSALS, ids=[c[0] for c in REFUSALS])
def test_listener_refusals(write, base, env, case, extra, expected):
    assert expected in problems(write, base, env, extra)


def test_hs256_secret_shorter_than_32_bytes_is_refused(write, base, env):
    env["JWT_SECRET"] = "x" * 31
    with pytest.raises(ConfigError) as info:
        load_settings(write(base), environ=env)
    assert [p.message for p in info.value.problems] == ["HS256 secret must be at least 32 bytes"]
    env["JWT_SECRET"] = "x" * 32
    load_settings(write(base), environ=env)


def test_a_trusted_local_unix_listener_and_an_admin_listener_are_accepted(write, base, env):
    base["listeners"].append(listener(address=UNIX, auth="trusted-local", socket_mode="0600"))
    base["listeners"].append(
        listener(
            name="admin",
            address="127.0.0.1:7444",
            surface="admin",
            role="admin",
            auth="jwt",
            jwt=admin_jwt(),
            on_behalf_of=[{"issuer": "idp", "id": "inbox"}],
        )
    )
    settings = load_settings(write(base), environ=env)
    local, admin = settings.listeners[1], settings.listeners[2]
    assert local.socket_mode == 0o600
    assert local.trusted_local is not None
    assert local.trusted_local.issuer == "local"
    assert admin.role == "admin"
    assert admin.on_behalf_of == (("idp", "inbox"),)


def _pem(key: Any) -> str:
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return public.decode()


def _rs256_with(material: Callable[[], dict[str, str]]) -> dict[str, Any]:
    key = {"kid": "r", "alg": "RS256", **material()}
    return listener(auth="jwt", jwt={"issuers": ["i"], "audience": "x", "keys": [key]})


def test_a_public_key_must_match_its_pinned_algorithm(write, base, env, config_dir):
    ec_key = ec.generate_private_key(ec.SECP256R1())
    found = problems(write, base, env, _rs256_with(lambda: {"public_key_pem": _pem(ec_key)}))
    assert (
        "listeners[1].jwt.keys[0].public_key_pem",
        "the key type does not match its pinned algorithm RS256",
    ) in found


def test_a_public_key_file_is_read_at_load(write, base, env, config_dir):
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (config_dir / "rs.pem").write_text(_pem(rsa_key))
    base["listeners"].append(_rs256_with(lambda: {"public_key_file": "rs.pem"}))
    settings = load_settings(write(base), environ=env)
    jwt = settings.listeners[1].jwt
    assert jwt is not None
    assert jwt.keys[0].public_key_pem == _pem(rsa_key)

    (config_dir / "rs.pem").write_text("not a key")
    with pytest.raises(ConfigError) as info:
        load_settings(write(base), environ=env)
    assert [p.message for p in info.value.problems] == [
        "not a readable PEM public key or certificate"
    ]


def test_jwks_keys_need_an_alg_or_a_config_pin(write, base, env, config_dir):
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = {**jws.public_jwk(rsa_key.public_key()), "kid": "idp-1"}
    (config_dir / "jwks.json").write_text(json.dumps({"keys": [jwk]}))
    jwt = {"issuers": ["i"], "audience": "x", "jwks_file": "jwks.json"}
    found = problems(write, base, env, listener(auth="jwt", jwt=jwt))
    assert found == {
        ("listeners[1].jwt", "JWKS key 'idp-1' carries no 'alg' and no config key pins one")
    }

    jwt["keys"] = [{"kid": "idp-1", "alg": "RS256"}]  # a material-less pin (ADR 0003)
    settings = load_settings(write(base), environ=env)
    pinned = settings.listeners[1].jwt
    assert pinned is not None
    assert pinned.jwks_file == str(config_dir / "jwks.json")


def test_a_jwks_that_the_listener_would_refuse_is_refused_at_load(write, base, env, config_dir):
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = {**jws.public_jwk(rsa_key.public_key()), "kid": "idp-1", "alg": "RS256", "use": "enc"}
    (config_dir / "jwks.json").write_text(json.dumps({"keys": [jwk]}))
    jwt = {"issuers": ["i"], "audience": "x", "jwks_file": "jwks.json"}
    found = problems(write, base, env, listener(auth="jwt", jwt=jwt))
    assert found == {("listeners[1].jwt", "JWKS key 'idp-1': 'use' must be 'sig'")}
