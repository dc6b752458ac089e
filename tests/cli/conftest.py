"""A real gateway for the CLI tests: examples/quickstart/'s refunds service and config, served
by the real `capgate serve` console script (embedded Redis) on free loopback ports, and the
`capgate` console script run as a user runs it."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest

ROOT = Path(__file__).resolve().parents[2]
CAPGATE = str(Path(sys.executable).parent / "capgate")
QUICKSTART = ROOT / "examples" / "quickstart"


@dataclass
class Served:
    """A running `capgate serve` of the quickstart config."""

    config: Path
    secret: str
    ports: dict[str, int]
    redis_url: str
    log: list[str] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("CAPGATE_")}
        return {
            **base,
            "QUICKSTART_JWT_SECRET": self.secret,
            "CAPGATE_ADDRESS": f"127.0.0.1:{self.ports['callers']}",
            "CAPGATE_ADMIN": f"127.0.0.1:{self.ports['admin']}",
        }

    def capgate(
        self, *args: str, stdin: str | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [CAPGATE, *args],
            input=stdin,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def token(self, sub: str, *more: str) -> str:
        done = self.capgate("token", "--dev", "--config", str(self.config), "--sub", sub, *more)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()


def _lines_until(stream: object, marker: str, into: list[str]) -> threading.Event:
    """Collect `stream`'s lines on a thread (a full pipe would stall the process); the event is
    set once a line contains `marker`, or at EOF."""
    seen = threading.Event()

    def read() -> None:
        for line in iter(stream.readline, ""):  # type: ignore[attr-defined]
            into.append(line)
            if marker in line:
                seen.set()
        seen.set()

    threading.Thread(target=read, daemon=True).start()
    return seen


@pytest.fixture(scope="package")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    where = tmp_path_factory.mktemp("quickstart")
    service = subprocess.Popen(
        [sys.executable, str(QUICKSTART / "service.py"), "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # its access log
        text=True,
    )
    assert service.stdout is not None
    upstream = service.stdout.readline().strip().rsplit("/", 1)[-1]
    (where / "policies").mkdir()
    for policy in (QUICKSTART / "policies").iterdir():
        (where / "policies" / policy.name).write_text(policy.read_text())
    config = where / "gateway.yaml"
    config.write_text(
        (QUICKSTART / "gateway.yaml")
        .read_text()
        .replace("127.0.0.1:7643", "127.0.0.1:0")
        .replace("127.0.0.1:7644", "127.0.0.1:0")
        .replace("127.0.0.1:7680", upstream)
        # The trail in the embedded Redis too, for `capgate audit`.
        + "\naudit:\n  sinks: [stdout, redis]\n"
    )
    secret = secrets.token_hex(32)
    ready = where / "ready.json"
    log: list[str] = []
    gateway = subprocess.Popen(
        [CAPGATE, "serve", "--config", str(config), "--ready-file", str(ready)],
        env={**os.environ, "QUICKSTART_JWT_SECRET": secret},
        stdout=subprocess.DEVNULL,  # the audit trail (JSON lines)
        stderr=subprocess.PIPE,
        text=True,
        cwd=where,
    )
    try:
        assert _lines_until(gateway.stderr, "capgate ready", log).wait(60), "".join(log)
        assert ready.is_file(), "".join(log)[-4000:]
        started = orjson.loads(ready.read_bytes())
        yield Served(config, secret, started["ports"], started["redis_url"], log)
    finally:
        gateway.terminate()
        gateway.wait(30)
        service.terminate()
        service.wait(10)
