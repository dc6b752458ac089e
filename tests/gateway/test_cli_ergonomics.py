"""`capgate` as an operator types it: real subprocesses against the real gateway (grpc.aio on
loopback, real Redis): options after the sub-command, credentials never echoed, TLS mix-ups that
say which flag to pass, the hash prefix `list` shows, `--version`, help for every option, and a
reader that stops early (`| head -1`)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from importlib.metadata import version
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from capgate.v1 import types_pb2
from gateway.audit.sinks import RedisStreamSink
from gateway.cli import approvals as approvals_cli
from gateway.cli import audit as audit_cli
from gateway.cli import config as config_cli
from gateway.cli import inbox as inbox_cli
from gateway.cli.main import _GROUPS
from gateway.cli.serve import _parser as serve_parser
from gateway.config.loader import load_settings
from gateway.config.settings import TlsSettings
from gateway.process.serve import Gateway, start
from gateway.state.embedded import RedisProcess
from policy import cli as policy_cli
from tests.clients.clientkit import make_tls
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import Env, token

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
BOB = token("bob", audience="capgate-admin", lifetime=3600)


def capgate(*argv: str, stdout: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    """`capgate ARGV` in a child process, as the console script runs it; no $CAPGATE_TOKEN."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CAPGATE_")}
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli.main", *argv],
        cwd=ROOT,
        env=environ,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        check=False,
    )


async def acapgate(*argv: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(capgate, *argv)


async def pending(env: Env) -> types_pb2.Approval:
    result = await env.invoke("orders.refund", {"order_id": "o-1001", "amount": 800})
    assert result.WhichOneof("outcome") == "approval_required", result
    return result.approval_required.approval


def admin(env: Env) -> str:
    return f"127.0.0.1:{env.port('admin')}"


# -- options after the sub-command -----------------------------------------------------------


async def test_connection_options_work_before_and_after_the_command(env: Env) -> None:
    approval = await pending(env)
    orders = [
        ["approvals", "list", "--admin", admin(env), "--insecure", "--token", BOB],
        ["approvals", "--admin", admin(env), "--insecure", "--token", BOB, "list"],
        ["approvals", "--admin", admin(env), "list", "--token", BOB, "--insecure"],
        ["approvals", "--format", "table", "list", "--admin", admin(env), "--insecure",
         f"--token={BOB}", "--format", "json"],
    ]  # fmt: skip
    for argv in orders:
        done = await acapgate(*argv)
        assert done.returncode == 0, (argv[:4], done.stderr)
        assert approval.id in done.stdout
    # The last one: after the command wins, as in git.
    assert done.stdout.lstrip().startswith("{")


async def test_approve_takes_the_hash_prefix_that_list_shows(env: Env) -> None:
    approval = await pending(env)
    conn = ("--admin", admin(env), "--insecure", "--token", BOB)
    listed = await acapgate("approvals", "list", *conn)
    row = next(line for line in listed.stdout.splitlines() if line.startswith(approval.id))
    shown = row.split()[-1]
    assert len(shown) < len(approval.input_hash)
    assert approval.input_hash.startswith(shown)
    wrong = "0" * len(shown) if not shown.startswith("0") else "1" * len(shown)
    refused = await acapgate("approvals", "approve", approval.id, "--hash", wrong, *conn)
    assert refused.returncode == 1
    assert "APPROVAL_INPUT_MISMATCH" in refused.stderr
    short = await acapgate("approvals", "approve", approval.id, "--hash", shown[:4], *conn)
    assert short.returncode == 2
    assert "at least 8" in short.stderr
    done = await acapgate("approvals", "approve", approval.id, "--hash", shown, *conn)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{approval.id}: approved\n"


# -- credentials are never printed -----------------------------------------------------------


async def test_a_token_never_appears_in_any_output_or_error(env: Env, tmp_path: Path) -> None:
    secret = token("bob", audience="capgate-admin", lifetime=3600)
    wrong = token("bob", audience="someone-else", lifetime=3600)
    policies = str(ROOT / "examples" / "policies")
    conn = ("--admin", admin(env), "--insecure")
    attempts: list[tuple[str, ...]] = [
        ("approvals", "list", "--token", secret, "--bogus", secret),
        ("approvals", "list", "--tokn", secret, *conn),
        ("approvals", "--token", secret, "frobnicate"),
        ("approvals", "list", *conn, "--token", secret, "--status", secret),
        ("approvals", "list", *conn, "--token", secret, "--timeout", secret),
        ("approvals", "list", "--token", secret, "--admin", "127.0.0.1:1", "--insecure"),
        ("approvals", "list", "--token", secret, "--admin", admin(env)),  # TLS to plaintext
        ("approvals", "list", *conn, "--token", wrong),  # the gateway refuses the token
        ("approvals", "list", *conn, f"--token={secret}", secret),
        ("audit", "query", "--redis-url", "redis://127.0.0.1:1/0", "--token", secret),
        ("audit", "query", "--redis-url", f"redis://user:{secret}@127.0.0.1:1/0"),
        ("policy", "check", policies, "--token", secret),
        ("config", "check", str(tmp_path / "missing.yaml"), "--token", secret),
        ("inbox", "--config", str(tmp_path / "missing.yaml"), "--token", secret),
        ("serve", "--config", str(tmp_path / "missing.yaml"), "--token", secret),
        ("frobnicate", "--token", secret),
        (secret,),
    ]
    for argv in attempts:
        done = await acapgate(*argv)
        assert done.returncode != 0, argv[:2]
        for text in (secret, wrong):
            for part in text.split(".")[1:]:  # the claims and the signature
                assert part not in done.stdout + done.stderr, (argv[:3], done.stderr)


# -- TLS and plaintext mixed up --------------------------------------------------------------


@pytest.fixture(scope="module")
async def tls_gateway(orders_upstream: str, redis_server: RedisProcess) -> AsyncIterator[str]:
    """A second real gateway whose admin listener speaks TLS (certificate for capgate.test)."""
    run_dir = tempfile.mkdtemp(prefix="cg-")
    ca, cert, key = make_tls()
    for name, pem in (("ca.pem", ca), ("cert.pem", cert), ("key.pem", key)):
        Path(run_dir, name).write_bytes(pem)  # noqa: ASYNC240 - fixture set-up
    settings = load_settings(
        HERE / "gateway.yaml", environ=gateway_environ(orders_upstream, redis_server.url, run_dir)
    )
    tls = TlsSettings(cert_file=f"{run_dir}/cert.pem", key_file=f"{run_dir}/key.pem")
    listeners = tuple(
        dataclasses.replace(item, tls=tls) if item.name == "admin" else item
        for item in settings.listeners
        if item.name in {"admin", "agents"}
    )
    gw: Gateway = await start(dataclasses.replace(settings, listeners=listeners))
    yield f"127.0.0.1:{gw.ports()['admin']}|{run_dir}/ca.pem"
    await gw.stop(0.5)


async def test_plaintext_to_a_tls_listener_says_to_drop_insecure(tls_gateway: str) -> None:
    address, _ = tls_gateway.split("|")
    done = await acapgate("approvals", "list", "--admin", address, "--insecure", "--token", BOB)
    assert done.returncode == 3
    assert f"the server at {address} speaks TLS: drop --insecure" in done.stderr
    assert "Handshake failed" not in done.stderr.split("hint:")[-1]


async def test_tls_to_a_plaintext_listener_says_to_pass_insecure(env: Env) -> None:
    done = await acapgate("approvals", "list", "--admin", admin(env), "--token", BOB)
    assert done.returncode == 3
    assert f"the server at {admin(env)} speaks plaintext, not TLS: pass --insecure" in done.stderr
    assert "ssl_transport_security" not in done.stderr  # gRPC core's own log line


async def test_an_untrusted_certificate_says_to_pass_ca_and_then_it_works(tls_gateway: str) -> None:
    address, ca = tls_gateway.split("|")
    untrusted = await acapgate("approvals", "list", "--admin", address, "--token", BOB)
    assert untrusted.returncode == 3
    assert "speaks TLS, but its certificate" in untrusted.stderr
    assert "pass --ca FILE" in untrusted.stderr
    wrong_name = await acapgate("approvals", "list", "--admin", address, "--ca", ca)
    assert wrong_name.returncode == 3
    assert "--server-name" in wrong_name.stderr
    done = await acapgate(
        "approvals", "list", "--admin", address, "--ca", ca, "--server-name", "capgate.test",
        "--token", BOB,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ID")


async def test_no_token_is_said_as_such(env: Env) -> None:
    done = await acapgate("approvals", "list", "--admin", admin(env), "--insecure")
    assert done.returncode == 3
    assert "UNAUTHENTICATED" in done.stderr
    assert "pass --token JWT or set $CAPGATE_TOKEN" in done.stderr


async def test_nothing_listening_is_said_as_such() -> None:
    done = await acapgate("approvals", "list", "--admin", "127.0.0.1:1", "--insecure")
    assert done.returncode == 3
    assert "nothing accepts connections at 127.0.0.1:1" in done.stderr


def test_audit_with_rediss_to_a_plaintext_redis_says_to_use_redis(
    redis_server: RedisProcess,
) -> None:
    url = redis_server.url.replace("redis://", "rediss://user:pw-" + "z" * 20 + "@")
    done = capgate("audit", "query", "--redis-url", url)
    assert done.returncode == 1
    assert "speaks plaintext, not TLS: use a redis:// URL" in done.stderr
    assert "pw-" + "z" * 20 not in done.stderr  # the URL's password is not printed


# -- --version, help, closed pipes -----------------------------------------------------------


def test_version_is_the_installed_distributions() -> None:
    done = capgate("--version")
    assert done.returncode == 0
    assert done.stdout == f"capgate {version('capgate')}\n"
    assert "--version" in capgate("--help").stdout


def _actions(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _actions(sub)
        else:
            yield parser.prog, action


def test_every_option_of_every_command_has_help() -> None:
    parsers = [
        approvals_cli._parser(),
        audit_cli._parser(),
        config_cli._parser(),
        inbox_cli._parser(),
        policy_cli._parser(),
        serve_parser(),
    ]
    hidden = {"--worker-index", "--supervisor-pid", "--worker-ports", "--actor-key-file"}
    missing = [
        f"{prog} {action.option_strings or action.dest}"
        for parser in parsers
        for prog, action in _actions(parser)
        if not action.help and not set(action.option_strings) & hidden
    ]
    assert missing == []
    for group in _GROUPS:  # and every group answers --help
        assert capgate(group, "--help").returncode == 0, group


async def test_a_reader_that_stops_early_gets_no_traceback(env: Env, tmp_path: Path) -> None:
    await pending(env)
    conn = ("--admin", admin(env), "--insecure", "--token", BOB)
    commands: list[tuple[str, ...]] = [
        ("approvals", "list", *conn),
        ("approvals", "list", *conn, "--format", "json", "--status", "pending"),
        ("config", "schema"),
        ("policy", "check", str(ROOT / "examples" / "policies")),
        ("--help",),
        ("--version",),
    ]
    for argv in commands:
        # The reader is gone before the first write: every write fails with EPIPE.
        read, write = os.pipe()
        os.close(read)
        try:
            done = await asyncio.to_thread(capgate, *argv, stdout=write)
        finally:
            os.close(write)
        assert "Traceback" not in done.stderr, argv[:2]
        assert "Broken pipe" not in done.stderr and "BrokenPipe" not in done.stderr, argv[:2]
        assert done.returncode == 141, (argv[:2], done.returncode, done.stderr)


async def test_audit_query_piped_into_head_prints_one_line_and_no_traceback(
    redis_server: RedisProcess,
) -> None:
    # A real `| head -1`, on more output than a pipe holds: writes go on after head exits.
    stream = f"capgate:audit:head-{uuid.uuid4().hex[:8]}"
    redis = aioredis.Redis.from_url(redis_server.url)
    try:
        sink = RedisStreamSink(redis, stream, 10_000)
        await sink.write(
            [
                {"event": "capability.requested", "execution_id": f"{i:032x}", "pad": "x" * 200}
                for i in range(1500)
            ]
        )
        where = ("--redis-url", redis_server.url, "--stream", stream)
        before = await acapgate("audit", *where, "query", "--limit", "2")
        after = await acapgate("audit", "query", "--limit", "2", *where)
        assert before.returncode == after.returncode == 0, before.stderr + after.stderr
        assert before.stdout == after.stdout
        assert before.stdout.count("\n") == 2
        command = (
            f"{sys.executable} -m gateway.cli.main audit query --redis-url {redis_server.url} "
            f"--stream {stream} | head -1"
        )
        done = await asyncio.to_thread(
            subprocess.run,
            ["bash", "-o", "pipefail", "-c", command],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        await redis.delete(stream)
        await redis.aclose()
    assert done.stdout.count("\n") == 1
    assert '"execution_id":"' + "0" * 32 + '"' in done.stdout
    assert done.stderr == ""
    assert done.returncode == 141  # as a command killed by SIGPIPE reports it
