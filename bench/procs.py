"""The processes a benchmark run starts: upstream, bare proxy, gateways, Redis, OPA and the
load generator. Each is a real child process on loopback; each is stopped by its own handle."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from gateway.state.embedded import free_port

ROOT = Path(__file__).resolve().parent.parent
OPA_VERSION = "v1.22.4"  # pinned; what `go install` builds into .tools/bin when it is missing
OPA_LOCAL = ROOT / ".tools" / "bin" / "opa"


class StartError(RuntimeError):
    """A process did not become ready; the message holds the tail of its log."""


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    ready: dict[str, Any] = field(default_factory=dict)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def cpu_s(self) -> float:
        return cpu_seconds(self.popen.pid)

    def stop(self, timeout_s: float = 10.0) -> None:
        stop_all([self], timeout_s)


def stop_all(processes: list[Proc], timeout_s: float = 5.0) -> None:
    """SIGTERM every process at once, then SIGKILL whatever is still running after the grace
    (a gateway's last OTLP flush to the closed bench endpoint would otherwise add seconds)."""
    for proc in processes:
        if proc.popen.poll() is None:
            proc.popen.terminate()
    deadline = time.monotonic() + timeout_s
    for proc in processes:
        try:
            proc.popen.wait(max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            proc.popen.kill()
            proc.popen.wait(5)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` (all its threads) from /proc, in seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _tail(path: Path) -> str:
    with contextlib.suppress(OSError):
        return path.read_text(errors="replace")[-3000:]
    return ""


def spawn(
    name: str,
    argv: list[str],
    run_dir: Path,
    *,
    ready_file: Path | None = None,
    ready_url: str | None = None,
    env: dict[str, str] | None = None,
    timeout_s: float = 60.0,
) -> Pending:
    """Start `argv` without waiting; `Pending.wait()` returns it once ready."""
    log = run_dir / f"{name}.log"
    with open(log, "wb") as out:
        popen = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env={**os.environ, **(env or {})}
        )
    return Pending(Proc(name, popen, log), ready_file, ready_url, time.monotonic() + timeout_s)


@dataclass
class Pending:
    """A started process that is not known to be ready yet."""

    proc: Proc
    ready_file: Path | None
    ready_url: str | None
    deadline: float

    def wait(self) -> Proc:
        """Ready when `ready_file` holds JSON (or `ready_url` answers 200)."""
        proc = self.proc
        while time.monotonic() < self.deadline:
            if proc.popen.poll() is not None:
                raise StartError(
                    f"{proc.name} exited with {proc.popen.returncode}:\n{_tail(proc.log)}"
                )
            if self.ready_file is not None and self.ready_file.exists():
                with contextlib.suppress(ValueError):
                    proc.ready = json.loads(self.ready_file.read_text())
                    return proc
            if self.ready_url is not None:
                with (
                    contextlib.suppress(OSError),
                    urllib.request.urlopen(self.ready_url, timeout=1) as r,
                ):
                    if r.status == 200:
                        return proc
            time.sleep(0.05)
        proc.stop()
        raise StartError(f"{proc.name} not ready in time:\n{_tail(proc.log)}")


def start(name: str, argv: list[str], run_dir: Path, **kw: Any) -> Proc:
    return spawn(name, argv, run_dir, **kw).wait()


def python(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def upstream(run_dir: Path) -> Proc:
    ready = run_dir / "upstream.json"
    return start(
        "upstream", python("bench.upstream", "--ready-file", str(ready)), run_dir, ready_file=ready
    )


def proxy(run_dir: Path, upstream_address: str) -> Proc:
    ready = run_dir / "proxy.json"
    argv = python("bench.proxy", "--upstream", upstream_address, "--ready-file", str(ready))
    return start("proxy", argv, run_dir, ready_file=ready)


def gateway(
    run_dir: Path, name: str, config: Path, *, workers: int = 1, env: dict[str, str] | None = None
) -> Pending:
    ready = run_dir / f"{name}.ready.json"
    argv = python(
        "gateway.cli.main",
        "serve",
        "--config",
        str(config),
        "--ready-file",
        str(ready),
        "--no-watch",
        "--log-level",
        "WARNING",
        "--grace",
        "1",
    )
    # Always explicit: `capgate serve` alone runs one worker per core (`--workers auto`).
    argv += ["--workers", str(workers)]
    return spawn(name, argv, run_dir, ready_file=ready, env=env, timeout_s=180.0)


def gateway_env(run_dir: Path) -> dict[str, str]:
    """Tracing on but unsampled; the OTLP endpoints point at a closed loopback port and the
    metric push interval exceeds any run, so nothing is exported during measurement."""
    return {
        "OTEL_TRACES_SAMPLER": "parentbased_always_off",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}",
        "OTEL_METRIC_EXPORT_INTERVAL": "3600000",
        "PYTHONUNBUFFERED": "1",
    }


def opa_binary(*, install: bool) -> str | None:
    """The pinned OPA from .tools/bin, else one on PATH; built with `go install` when allowed."""
    if OPA_LOCAL.exists():
        return str(OPA_LOCAL)
    found = shutil.which("opa")
    if found:
        return found
    go = shutil.which("go")
    if not install or go is None:
        return None
    OPA_LOCAL.parent.mkdir(parents=True, exist_ok=True)
    print(
        f"building OPA {OPA_VERSION} into {OPA_LOCAL.parent} (once; takes a few minutes)",
        file=sys.stderr,
    )
    subprocess.run(
        [go, "install", f"github.com/open-policy-agent/opa@{OPA_VERSION}"],
        env={**os.environ, "GOBIN": str(OPA_LOCAL.parent)},
        check=True,
        timeout=1200,
    )
    return str(OPA_LOCAL)


def opa(run_dir: Path, binary: str, policy_dir: Path) -> tuple[Proc, int]:
    port = free_port()
    argv = [
        binary,
        "run",
        "--server",
        "--addr",
        f"127.0.0.1:{port}",
        "--log-level",
        "error",
        str(policy_dir),
    ]
    proc = start("opa", argv, run_dir, ready_url=f"http://127.0.0.1:{port}/health")
    return proc, port


def opa_version(binary: str) -> str:
    out = subprocess.run(
        [binary, "version"], check=False, capture_output=True, text=True, timeout=30
    ).stdout
    return out.splitlines()[0].removeprefix("Version:").strip() if out else "unknown"


class Generator:
    """A load generator process: one job in, one result line out. `argv` defaults to the
    Python generator (bench/load.py); go_generator() starts bench/goload's binary."""

    def __init__(
        self,
        run_dir: Path,
        argv: list[str] | None = None,
        name: str = "load",
        env: dict[str, str] | None = None,
    ) -> None:
        self.log = run_dir / f"{name}.log"
        self._err: IO[bytes] = open(self.log, "wb")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            argv or python("bench.load"),
            env={**os.environ, **(env or {})},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            cwd=ROOT,
        )

    def cpu_s(self) -> float:
        return cpu_seconds(self.popen.pid)

    def run(self, job: dict[str, Any]) -> dict[str, Any]:
        assert self.popen.stdin is not None
        assert self.popen.stdout is not None
        self.popen.stdin.write((json.dumps(job) + "\n").encode())
        self.popen.stdin.flush()
        line = self.popen.stdout.readline()
        if not line:
            raise StartError(f"load generator exited:\n{_tail(self.log)}")
        result: dict[str, Any] = json.loads(line)
        return result

    def stop(self) -> None:
        if self.popen.stdin is not None:
            self.popen.stdin.close()
        try:
            self.popen.wait(10)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(5)
        self._err.close()


GOLOAD_SRC = ROOT / "bench" / "goload"


def go_generator(run_dir: Path) -> tuple[Generator | None, str]:
    """bench/goload built with the machine's Go toolchain (seconds with a warm build cache),
    started as a second generator; (None, why) when Go is missing or the build fails."""
    go = shutil.which("go")
    if go is None:
        return None, "no go toolchain on PATH"
    binary = run_dir / "goload"
    try:
        subprocess.run(
            [go, "build", "-o", str(binary), "."],
            cwd=GOLOAD_SRC,
            check=True,
            capture_output=True,
            timeout=600,
        )
    except subprocess.CalledProcessError as exc:
        return (
            None,
            f"go build of bench/goload failed: {exc.stderr.decode(errors='replace')[-300:]}",
        )
    except (subprocess.SubprocessError, OSError) as exc:
        return None, f"go build of bench/goload failed: {type(exc).__name__}"
    return Generator(run_dir, [str(binary)], name="goload", env={"GOMAXPROCS": "1"}), ""
