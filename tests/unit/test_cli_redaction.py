"""A credential on a `capgate` command line is never printed back, whatever else is wrong with
the line: seeded random command lines (bounded) through the real entry point, in process.
tests/gateway/test_cli_ergonomics.py runs the same promise as subprocesses against a gateway."""

from __future__ import annotations

import base64
import contextlib
import io
import random
import string

from gateway.cli import main as cli
from gateway.cli.args import redact, secret_values

ROUNDS = 300


def _token(rng: random.Random) -> str:
    if rng.random() < 0.5:  # JWT-shaped
        part = lambda n: base64.urlsafe_b64encode(rng.randbytes(n)).rstrip(b"=").decode()  # noqa: E731
        return f"eyJ{part(12)}.{part(24)}.{part(32)}"
    alphabet = string.ascii_letters + string.digits + "-_~+/"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(12, 48)))


def _line(rng: random.Random, token: str) -> list[str]:
    group = rng.choice(["approvals", "audit", "config", "inbox", "policy"])
    command = {
        "approvals": ["list", "show", "approve", "watch", "frobnicate"],
        "audit": ["query", "tail", "hmac", "frobnicate"],
        "config": ["check", "frobnicate"],
        "inbox": [],
        "policy": ["check", "explain", "frobnicate"],
    }[group]
    words = [rng.choice(command)] if command else []
    given = ["--token", token] if rng.random() < 0.7 else [f"--token={token}"]
    noise = [
        ["--bogus", token],
        ["--status", token],
        ["--timeout", token],
        ["--tokn", token],
        [token],
        ["--format", "yaml"],
        ["--limit", "x"],
    ]
    parts = [given, *rng.sample(noise, rng.randint(1, 3))]
    rng.shuffle(parts)
    position = rng.randint(0, len(words))
    flat = [w for part in parts for w in part]
    return [group, *words[:position], *flat, *words[position:]]


def test_no_random_command_line_prints_its_token() -> None:
    rng = random.Random(1515)
    for _ in range(ROUNDS):
        token = _token(rng)
        argv = _line(rng, token)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main(argv)
            except SystemExit as exc:  # a group's parser exiting (e.g. inbox, audit)
                code = exc.code if isinstance(exc.code, int) else 2
        assert code != 0, argv
        shown = out.getvalue() + err.getvalue()
        assert token not in shown, (argv, shown)


def test_secret_values_and_redact() -> None:
    argv = ["list", "--token", "s3cret-value", "--token=other-secret", "--token"]
    assert set(secret_values(argv)) == {"other-secret", "s3cret-value"}
    assert redact("bad s3cret-value and other-secret", argv) == "bad <redacted> and <redacted>"
    assert redact("redis://user:pw@host:6379/0") == "redis://user:<redacted>@host:6379/0"
    assert redact("token eyJa.eyJb.c here") == "token <redacted> here"
