"""`capgate token --dev` (issue 27 build 2): mints only for a listener of the config that
trusts a key this command holds, for a local issuer; the token it mints is accepted by the real
gateway serving that config; everything else is refused, and the help says what 'own' means."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import Served

pytestmark = pytest.mark.integration


def _config(served: Served, tmp_path: Path, old: str, new: str) -> str:
    edited = tmp_path / "gateway.yaml"
    text = served.config.read_text()
    assert old in text
    edited.write_text(text.replace(old, new))
    (tmp_path / "policies").symlink_to(served.config.parent / "policies")
    return str(edited)


def test_a_minted_token_is_accepted_and_an_approver_token_decides(served: Served) -> None:
    caller = served.token("carol")
    described = served.capgate("describe", "--insecure", "--token", caller)
    assert described.returncode == 0, described.stderr
    approver = served.token("dave", "--listener", "admin", "--role", "approver")
    listed = served.capgate("approvals", "list", "--insecure", "--token", approver)
    assert listed.returncode == 0, listed.stderr
    # A caller token is not an approver's: the audiences differ.
    refused = served.capgate("approvals", "list", "--insecure", "--token", caller)
    assert refused.returncode == 3, refused.stdout


def test_without_dev_nothing_is_minted(served: Served) -> None:
    done = served.capgate("token", "--config", str(served.config), "--sub", "alice")
    assert done.returncode == 2
    assert done.stdout == ""
    assert "--dev" in done.stderr


def test_an_issuer_named_by_url_is_refused(served: Served, tmp_path: Path) -> None:
    config = _config(
        served, tmp_path, "issuers: [quickstart]", "issuers: [https://login.example.com]"
    )
    done = served.capgate("token", "--dev", "--config", config, "--sub", "alice")
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert "is a URL: a real identity provider's" in done.stderr


def test_an_issuer_the_listener_does_not_trust_is_refused(served: Served) -> None:
    done = served.capgate(
        "token", "--dev", "--config", str(served.config), "--sub", "a", "--issuer", "other"
    )
    assert done.returncode == 1
    assert "does not trust issuer 'other'" in done.stderr


def test_a_listener_with_public_keys_only_is_refused(served: Served, tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415

    theirs = ec.generate_private_key(ec.SECP256R1())
    public = theirs.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    (tmp_path / "idp.pem").write_bytes(public)
    config = _config(
        served,
        tmp_path,
        '- {kid: dev, alg: HS256, secret: "{{ env.QUICKSTART_JWT_SECRET }}"}\n\n  # Approvers',
        "- {kid: idp, alg: ES256, public_key_file: idp.pem}\n\n  # Approvers",
    )
    done = served.capgate("token", "--dev", "--config", config, "--sub", "alice")
    assert done.returncode == 1, done.stderr
    assert "trusts no HS256 secret" in done.stderr
    # Its private key, held here, is the one way to mint for it; another key is refused.
    mine = ec.generate_private_key(ec.SECP256R1())
    for name, key in (("mine.pem", mine), ("theirs.pem", theirs)):
        (tmp_path / name).write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    other = served.capgate(
        "token", "--dev", "--config", config, "--sub", "a", "--key", str(tmp_path / "mine.pem")
    )
    assert other.returncode == 1
    assert "is not the private half of a key" in other.stderr
    owned = served.capgate(
        "token", "--dev", "--config", config, "--sub", "a", "--key", str(tmp_path / "theirs.pem")
    )
    assert owned.returncode == 0, owned.stderr
    assert owned.stdout.count(".") == 2


def test_the_help_says_what_owning_an_issuer_means(served: Served) -> None:
    done = served.capgate("help", "token")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    assert "only mints for an issuer this machine owns" in text
    assert "not a URL" in text and "private key in `--key FILE`" in text
