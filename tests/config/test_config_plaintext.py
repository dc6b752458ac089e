"""gRPC upstreams without TLS only on this machine (ADR 0033): every call carries the
gateway-signed actor token, so a plaintext address elsewhere is refused at load unless
`allow_plaintext: true` says the network itself is encrypted or trusted. The refusals of
`capgate serve` and `capgate config check` are in the broken corpus (case 19)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.config.loader import load_settings
from gateway.config.problems import ConfigError

REFUSED = (
    "the actor token would travel in plaintext: tls: false needs a loopback address or a unix "
    "socket, or allow_plaintext: true where the network itself is encrypted or trusted (a "
    "service mesh's mTLS)"
)


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1:50052",
        "127.9.8.7:50052",
        "localhost:50052",
        "LOCALHOST:50052",
        "[::1]:50052",
        "unix:///tmp/capgate-test.sock",
    ],
)
def test_a_plaintext_procedure_upstream_on_this_machine_loads(
    write: Any, base: dict[str, Any], env: dict[str, str], address: str
) -> None:
    base["upstreams"]["proc"]["address"] = address
    settings = load_settings(write(base), environ=env)
    assert settings.upstreams["proc"].address == address
    assert settings.upstreams["proc"].allow_plaintext is False


@pytest.mark.parametrize(
    "address",
    [
        "orders.default.svc:50052",
        "localhost.example.com:50052",
        "10.0.0.7:50052",
        "0.0.0.0:50052",
        "[::]:50052",
        "[::ffff:127.0.0.1]:50052",
        "[2001:db8::1]:50052",
    ],
)
@pytest.mark.parametrize("kind", ["grpc", "procedure"])
def test_a_plaintext_grpc_upstream_off_this_machine_is_refused_at_its_address(
    write: Any, base: dict[str, Any], env: dict[str, str], address: str, kind: str
) -> None:
    base["upstreams"]["proc"] = {"address": address, "kind": kind}
    if kind == "grpc":
        base["capabilities"][1]["method"] = "/t.v1.Things/Get"
    with pytest.raises(ConfigError) as info:
        load_settings(write(base), environ=env)
    problems = [(p.path_in_file, p.message) for p in info.value.problems]
    assert ("upstreams.proc.address", REFUSED) in problems, problems


def test_allow_plaintext_accepts_an_address_off_this_machine_and_says_so(
    write: Any, base: dict[str, Any], env: dict[str, str]
) -> None:
    base["upstreams"]["proc"] = {
        "address": "orders.default.svc:50052",
        "kind": "procedure",
        "allow_plaintext": True,
    }
    settings = load_settings(write(base), environ=env)
    assert settings.upstreams["proc"].allow_plaintext is True
    assert settings.upstreams["proc"].tls is False


def test_tls_needs_no_allowance_and_refuses_one(
    write: Any, base: dict[str, Any], env: dict[str, str]
) -> None:
    base["upstreams"]["proc"] = {"address": "orders.default.svc:443", "kind": "procedure"}
    base["upstreams"]["proc"]["tls"] = True
    assert load_settings(write(base), environ=env).upstreams["proc"].tls is True
    base["upstreams"]["proc"]["allow_plaintext"] = True
    with pytest.raises(ConfigError) as info:
        load_settings(write(base), environ=env)
    assert [(p.path_in_file, p.message) for p in info.value.problems] == [
        ("upstreams.proc.allow_plaintext", "only used with tls: false")
    ]


def test_an_explicit_allow_plaintext_false_is_the_default_everywhere(
    write: Any, base: dict[str, Any], env: dict[str, str]
) -> None:
    base["upstreams"]["proc"] = {
        "address": "orders.default.svc:443",
        "kind": "procedure",
        "tls": True,
        "allow_plaintext": False,
    }
    assert load_settings(write(base), environ=env).upstreams["proc"].allow_plaintext is False
    base["upstreams"]["proc"] = {
        "address": "orders.default.svc:50052",
        "kind": "procedure",
        "allow_plaintext": False,
    }
    with pytest.raises(ConfigError) as info:
        load_settings(write(base), environ=env)
    assert [(p.path_in_file, p.message) for p in info.value.problems] == [
        ("upstreams.proc.address", REFUSED)
    ]
