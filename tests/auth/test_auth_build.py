"""Which authenticator each listener gets, and the combinations DESIGN §12 refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from authkit import issue, make_ca

from gateway.config.settings import JwtAuth, JwtKey, Listener, MtlsAuth, TlsSettings
from gateway.transport.auth import (
    Authenticator,
    build_authenticator,
    server_credentials,
    strip_capgate_metadata,
)
from gateway.transport.auth.jwt import JwtAuthenticator
from gateway.transport.auth.local import AnonymousAuthenticator, TrustedLocalAuthenticator
from gateway.transport.auth.mtls import MtlsAuthenticator

JWT = JwtAuth(
    keys=(JwtKey("k", "HS256", secret="s" * 32),), issuers=("https://idp",), audience="gw"
)
UNIX = "unix:///run/capgate/capgate.sock"


def _listener(**kw: Any) -> Listener:
    base: dict[str, Any] = {"name": "l", "address": "127.0.0.1:7443", "surface": "agent"}
    base.update(kw)
    return Listener(**base)


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    directory = tmp_path_factory.mktemp("tls")
    ca = make_ca()
    cert, key = issue(ca, "gw", dns=("localhost",)).write(directory, "server")
    ca_cert, _ = ca.write(directory, "ca")
    return {"cert": cert, "key": key, "ca": ca_cert}


@pytest.mark.parametrize(
    ("listener", "kind"),
    [
        (_listener(auth="jwt", jwt=JWT), JwtAuthenticator),
        (_listener(auth="trusted-local", address=UNIX), TrustedLocalAuthenticator),
        (_listener(auth="trusted-local", address="unix:relative.sock"), TrustedLocalAuthenticator),
        (_listener(auth="none"), AnonymousAuthenticator),
        (_listener(auth="jwt", jwt=JWT, role="admin"), JwtAuthenticator),
    ],
)
def test_each_mode_gets_its_authenticator(listener: Listener, kind: type) -> None:
    authenticator: Authenticator = build_authenticator(listener)
    assert isinstance(authenticator, kind)


def test_mtls_listener_needs_tls_and_a_client_ca(tls_files: dict[str, str]) -> None:
    tls = TlsSettings(cert_file=tls_files["cert"], key_file=tls_files["key"])
    for listener in (_listener(auth="mtls"), _listener(auth="mtls", tls=tls)):
        with pytest.raises(ValueError, match="client CA"):
            build_authenticator(listener)
    via_mtls_section = _listener(
        auth="mtls", tls=tls, mtls=MtlsAuth(client_ca_file=tls_files["ca"])
    )
    assert isinstance(build_authenticator(via_mtls_section), MtlsAuthenticator)
    assert server_credentials(via_mtls_section) is not None


@pytest.mark.parametrize(
    ("listener", "message"),
    [
        (_listener(auth="trusted-local"), "only on a unix socket"),
        (_listener(auth="trusted-local", address="unix-abstract:capgate"), "only on a unix"),
        (_listener(auth="trusted-local", address="dns:///localhost:1"), "only on a unix"),
        (_listener(auth="trusted-local", address=UNIX, role="admin"), "admin listeners"),
        (_listener(auth="trusted-local", address=UNIX, surface="mcp"), "MCP"),
        (_listener(auth="none", role="admin"), "admin listeners"),
        (_listener(auth="jwt"), "needs a 'jwt' section"),
    ],
)
def test_forbidden_combinations_are_config_errors(listener: Listener, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_authenticator(listener)


def test_server_credentials(tls_files: dict[str, str]) -> None:
    assert server_credentials(_listener(auth="jwt", jwt=JWT)) is None
    assert server_credentials(_listener(auth="trusted-local", address=UNIX)) is None
    tls = TlsSettings(cert_file=tls_files["cert"], key_file=tls_files["key"])
    assert server_credentials(_listener(auth="jwt", jwt=JWT, tls=tls)) is not None
    with pytest.raises(ValueError, match="needs a 'tls' section"):
        server_credentials(_listener(auth="mtls"))
    conflicting = _listener(
        auth="mtls",
        tls=TlsSettings(tls_files["cert"], tls_files["key"], client_ca_file=tls_files["ca"]),
        mtls=MtlsAuth(client_ca_file=tls_files["cert"]),
    )
    with pytest.raises(ValueError, match="differ"):
        server_credentials(conflicting)


def test_unreadable_tls_file_names_the_path(tmp_path: Path, tls_files: dict[str, str]) -> None:
    missing = str(tmp_path / "missing.key")
    listener = _listener(auth="jwt", jwt=JWT, tls=TlsSettings(tls_files["cert"], missing))
    with pytest.raises(ValueError, match=r"missing\.key"):
        server_credentials(listener)


def test_strip_capgate_metadata_removes_only_capgate_keys() -> None:
    metadata = [
        ("authorization", "Bearer t"),
        ("x-capgate-actor-id", "root"),
        ("X-Capgate-Surface", "admin"),
        ("x-capgate-approval-bin", b"\x00"),
        ("x-capgateway", "kept: not the prefix"),
        ("traceparent", "00-abc"),
    ]
    assert strip_capgate_metadata(metadata) == (
        ("authorization", "Bearer t"),
        ("x-capgateway", "kept: not the prefix"),
        ("traceparent", "00-abc"),
    )
