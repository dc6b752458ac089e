"""`capgate inbox`: its config file (env substitution, schema, identities) and the command."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.config.problems import ConfigError
from gateway.inbox.config import load_inbox_settings
from tests.gateway.harness import JWT_SECRET
from tests.inbox.inboxkit import Stack, get

ROOT = Path(__file__).resolve().parents[2]
CONFIG = """\
listen: 127.0.0.1:0
base_url: https://inbox.example.com
admin:
  address: 127.0.0.1:7444
  token:
    issuer: test-idp
    subject: capgate-inbox
    audience: capgate-admin
    kid: hs1
    secret: "{{ env.INBOX_TEST_SECRET }}"
    lifetime: 2m
approvers:
  jwt:
    issuers: [test-idp]
    audience: capgate-inbox
    keys:
      - {kid: hs1, alg: HS256, secret: "{{ env.INBOX_TEST_SECRET }}"}
  proxy:
    header: X-Auth-Assertion
    jwt:
      issuers: [auth-proxy]
      audience: capgate-inbox
      max_lifetime: 5m
      keys:
        - {kid: p1, alg: HS256, secret: "{{ env.INBOX_PROXY_SECRET }}"}
  auditor_roles: [auditor, compliance]
session:
  secret: "{{ env.INBOX_SESSION_SECRET }}"
  lifetime: 1h
"""
ENV = {
    "INBOX_TEST_SECRET": JWT_SECRET,
    "INBOX_PROXY_SECRET": "p" * 40,
    "INBOX_SESSION_SECRET": "q" * 40,
}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "inbox.yaml"
    path.write_text(text)
    return path


def test_the_config_file_loads_with_its_environment(tmp_path: Path) -> None:
    settings = load_inbox_settings(write(tmp_path, CONFIG), environ=ENV)
    assert settings.admin.address == "127.0.0.1:7444"
    assert not settings.admin.tls
    assert settings.admin.token is not None
    assert settings.admin.token.secret == JWT_SECRET
    assert settings.admin.token.lifetime_s == 120
    assert settings.jwt is not None
    assert settings.jwt.audience == "capgate-inbox"
    assert settings.proxy is not None
    assert settings.proxy.header == "x-auth-assertion"
    assert settings.proxy.jwt.max_lifetime_s == 300
    assert settings.auditor_roles == ("auditor", "compliance")
    assert settings.session_lifetime_s == 3600
    assert (settings.session_idle_s, settings.sessions_per_actor) == (1800, 5)
    # No redis.url: a private embedded server keeps the sessions (in a temporary directory).
    assert settings.redis.url is None
    assert settings.redis.data_dir == ""
    placed = load_inbox_settings(
        write(tmp_path, CONFIG + "redis: {data_dir: state, key_prefix: inbox}\n"), environ=ENV
    )
    assert placed.redis.data_dir == str(tmp_path / "state")
    assert placed.redis.key_prefix == "inbox"
    assert settings.base_url.startswith("https://")
    assert JWT_SECRET not in repr(settings)  # secrets stay out of reprs and so out of logs
    override = load_inbox_settings(
        write(tmp_path, CONFIG), environ=ENV, admin_address="127.0.0.2:9", listen="127.0.0.1:9999"
    )
    assert override.admin.address == "127.0.0.2:9"
    assert override.listen == "127.0.0.1:9999"


def test_every_problem_is_reported_without_echoing_values(tmp_path: Path) -> None:
    text = CONFIG.replace("lifetime: 1h", "lifetime: 1h\n  colour: blue").replace(
        "listen: 127.0.0.1:0", "listen: nowhere"
    )
    env = ENV | {"INBOX_SESSION_SECRET": "too-short-but-secret"}
    with pytest.raises(ConfigError) as info:
        load_inbox_settings(write(tmp_path, text), environ=env)
    messages = {(p.path_in_file, p.message) for p in info.value.problems}
    assert ("listen", "must be host:port") in messages
    assert ("session.colour", "unknown key") in messages
    assert any(path == "session.secret" for path, _ in messages)
    assert "too-short-but-secret" not in str(info.value) + repr(info.value.problems)
    with pytest.raises(ConfigError) as missing:
        load_inbox_settings(write(tmp_path, CONFIG), environ={})
    assert "environment variable INBOX_TEST_SECRET is not set" in {
        p.message for p in missing.value.problems
    }


def test_the_inbox_needs_its_own_identity_and_a_way_for_approvers_to_sign_in(
    tmp_path: Path,
) -> None:
    no_identity = (
        CONFIG.split("  token:", maxsplit=1)[0] + "approvers:" + CONFIG.split("approvers:")[1]
    )
    with pytest.raises(ConfigError, match="needs its own identity"):
        load_inbox_settings(write(tmp_path, no_identity), environ=ENV)
    no_approvers = (
        CONFIG.split("approvers:", maxsplit=1)[0] + "session:" + CONFIG.split("session:")[1]
    )
    with pytest.raises(ConfigError, match="approvers need a way to sign in"):
        load_inbox_settings(write(tmp_path, no_approvers), environ=ENV)
    weak = CONFIG.replace('secret: "{{ env.INBOX_PROXY_SECRET }}"', "secret: short-proxy-key")
    with pytest.raises(ConfigError):
        load_inbox_settings(write(tmp_path, weak), environ=ENV)


def test_capgate_inbox_refuses_an_invalid_config(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gateway.cli.main",
            "inbox",
            "--config",
            str(write(tmp_path, CONFIG)),
        ],
        env={**os.environ, **ENV, "INBOX_SESSION_SECRET": "leaky-but-short"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "invalid config" in done.stderr
    assert "session.secret" in done.stderr
    assert "leaky-but-short" not in done.stderr


PLAINTEXT = (
    "the inbox's credentials would travel in plaintext: without admin.tls it must be a loopback "
    "address or a unix socket, or set admin.allow_plaintext: true where the network itself is "
    "encrypted or trusted (a service mesh's mTLS)"
)


@pytest.mark.parametrize(
    "address",
    ["capgate-admin:7444", "10.0.0.1:7444", "0.0.0.0:7444", "[::ffff:127.0.0.1]:7444"],
)
def test_an_admin_address_off_this_machine_needs_tls_or_an_allowance(
    tmp_path: Path, address: str
) -> None:
    # The inbox's token decides on behalf of approvers (on_behalf_of): read off the wire, it
    # would approve anything for anyone within its lifetime (ADR 0033).
    text = CONFIG.replace("address: 127.0.0.1:7444", f'address: "{address}"')
    with pytest.raises(ConfigError) as info:
        load_inbox_settings(write(tmp_path, text), environ=ENV)
    assert f"admin address {address}: {PLAINTEXT}" in str(info.value)
    allowed = text.replace("  token:", "  allow_plaintext: true\n  token:", 1)
    assert load_inbox_settings(write(tmp_path, allowed), environ=ENV).admin.address == address
    secured = text.replace("  token:", "  tls: {}\n  token:", 1)
    assert load_inbox_settings(write(tmp_path, secured), environ=ENV).admin.tls
    both = secured.replace("  token:", "  allow_plaintext: true\n  token:", 1)
    with pytest.raises(
        ConfigError, match=r"admin\.allow_plaintext is only used without admin\.tls"
    ):
        load_inbox_settings(write(tmp_path, both), environ=ENV)


@pytest.mark.parametrize("address", ["127.0.0.1:7444", "localhost:7444", "unix:///tmp/a.sock"])
def test_an_admin_address_on_this_machine_loads_in_plaintext(tmp_path: Path, address: str) -> None:
    text = CONFIG.replace("address: 127.0.0.1:7444", f'address: "{address}"')
    assert load_inbox_settings(write(tmp_path, text), environ=ENV).admin.tls is False


def test_capgate_inbox_refuses_a_plaintext_admin_flag_off_this_machine(tmp_path: Path) -> None:
    argv = [
        "inbox",
        "--config",
        str(write(tmp_path, CONFIG)),
        "--admin",
        "capgate-admin.prod.svc:7444",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "gateway.cli.main", *argv],
        env={**os.environ, **ENV},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert f"admin address capgate-admin.prod.svc:7444: {PLAINTEXT}" in done.stderr


@pytest.mark.e2e
async def test_capgate_inbox_serves_until_terminated(tmp_path: Path, stack: Stack) -> None:
    ready = tmp_path / "ready.json"
    config = write(tmp_path, CONFIG)
    admin = f"127.0.0.1:{stack.gw.ports()['admin']}"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway.cli.main",
        "inbox",
        "--config",
        str(config),
        "--admin",
        admin,
        "--ready-file",
        str(ready),
        env={**os.environ, **ENV},
        cwd=ROOT,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with asyncio.timeout(30):
            while not ready.exists():
                assert process.returncode is None
                await asyncio.sleep(0.1)
        url = json.loads(ready.read_text())["url"]
        for _ in range(50):  # ready once the first listing went through as the inbox identity
            health = await get(url + "/healthz")
            if health.status == 200:
                break
            await asyncio.sleep(0.1)
        assert json.loads(health.body) == {"ready": True, "live": True}
    finally:
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 15) == 0
