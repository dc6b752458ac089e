"""`capgate serve --workers N`: N gateway processes behind the same listener ports.

`--workers auto` (the default) is one per available core (`available_cores`: the CPUs the
process may run on, bounded by a cgroup CPU limit) where more than one is and the config can
run as several (`refusals` finds nothing); one process otherwise (`resolve`).

One Python process serves one core at best (grpc.aio runs every handler on one event loop
under the GIL), so throughput scales by running several. The supervisor started by `--workers`
spawns N ordinary `capgate serve` processes; each binds the TCP gRPC listeners with
SO_REUSEPORT (`grpc.so_reuseport` = 1) and the kernel spreads incoming connections over them.
Worker 0 binds first; when a listener asks for port 0 the others join the port it got.

What cannot be shared, and what is refused (ADR 0012):
- unix-socket listeners: SO_REUSEPORT balances only TCP/UDP sockets, and a second bind of the
  path would unlink the first worker's socket, so worker 0 alone serves them (logged at start);
- MCP (HTTP) listeners: bound by worker 0 only, for the same reason (no shared socket there);
- the embedded Redis is single-process only (DESIGN §12): without `redis.url` the supervisor
  refuses to start whenever approvals, idempotency or the Redis audit sink are on, because
  each worker would otherwise run its own private Redis and approvals made on one worker
  would not exist on the others;
- the actor-token signing key: without `actor_token.key_file` each process would generate its
  own key and upstreams could verify only the worker that published its JWKS; the supervisor
  generates one key into a private 0600 file (deleted on exit) that every worker uses, and only
  worker 0 writes `jwks_out`;
- the result cache's key: without `cache.key` each process would draw its own, and every
  worker would overwrite the others' entries and miss on them; the supervisor draws one secret
  and hands it to every worker in its environment (`CACHE_KEY_ENV`, removed at once by the
  worker), so the workers share their entries;
- a Prometheus endpoint on a fixed port: worker i serves it on port + i (scrape each).

A worker that exits stops the whole group (exit status 1) so that the orchestrator restarts it
as one unit; SIGTERM/SIGINT are forwarded and each worker drains within `--grace`. A supervisor
killed without that chance (SIGKILL, OOM) still stops its workers at once: on Linux each worker
is started with PR_SET_PDEATHSIG = SIGTERM (`_die_with_parent`), so the kernel sends it SIGTERM
the moment the supervisor is gone and it drains within `--grace` as on a forwarded signal.
Elsewhere, and as a second line on Linux, each worker polls its parent pid
(`gateway.process.serve._stop_when_orphaned`).
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from gateway.config.loader import ConfigError, load_settings
from gateway.config.settings import Listener, Settings

log = logging.getLogger("capgate.workers")

READY_TIMEOUT_S = 120.0
CACHE_KEY_ENV = "CAPGATE_WORKERS_CACHE_KEY"
POLL_S = 0.1
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _die_with_parent(parent: int) -> Callable[[], None] | None:
    """A `preexec_fn` that asks the kernel to send the worker SIGTERM when `parent` (the
    supervisor) exits; None where prctl(2) is not available. The setting survives the exec of
    the worker's interpreter. If the supervisor died between fork and prctl, the signal would
    never come: the child then exits at once (its parent is no longer `parent`)."""
    if not sys.platform.startswith("linux"):
        return None
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return None
    prctl = ctypes.CDLL(libc_name, use_errno=True).prctl

    def preexec() -> None:  # runs in the forked child, before exec: no locks, no logging
        prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


AUTO = "auto"


def workers_arg(text: str) -> int | str:
    """`--workers`: a count of processes, or `auto` (one per available core)."""
    if text == AUTO:
        return AUTO
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or {AUTO}, got {text!r}") from None


def available_cores(cgroup: Path = Path("/sys/fs/cgroup")) -> int:
    """The cores this process may use: the CPUs it may run on (affinity), bounded by a cgroup
    CPU limit (a container's `resources.limits.cpu`: cgroup v2 `cpu.max`, or v1's CFS quota),
    rounded down, at least 1."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cores = cores or 1
    quota = _cpu_quota(cgroup)
    if quota is not None:
        cores = min(cores, int(quota))
    return max(1, cores)


def _cpu_quota(cgroup: Path) -> float | None:
    """CPUs the cgroup allows (quota / period), None when unlimited or unknown."""
    try:
        quota, period = (cgroup / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        v1 = int((cgroup / "cpu" / "cpu.cfs_quota_us").read_text())
        v1_period = int((cgroup / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if v1 <= 0 or v1_period <= 0 else v1 / v1_period


def resolve(requested: int | str, config: str) -> int:
    """The worker count `--workers` asks for: `auto` is one per available core where more than
    one is available and the config can run that way, else 1 (logged): `auto` never refuses a
    config that one process serves (the embedded Redis, no shared TCP listener). A number is
    kept as given (and refused by `supervise` when the config cannot run so)."""
    if requested != AUTO:
        return int(requested)
    cores = available_cores()
    if cores <= 1:
        return 1
    try:
        settings = load_settings(config)
    except ConfigError:
        return 1  # the one process reports the config's problems
    problems = refusals(settings, cores)
    if problems:
        log.info("--workers auto: one process (%s)", "; ".join(problems))
        return 1
    return cores


def shared(listener: Listener) -> bool:
    """Whether every worker binds `listener` (TCP gRPC), or worker 0 alone (unix, MCP)."""
    return listener.protocol == "grpc" and not listener.address.startswith("unix://")


def refusals(settings: Settings, workers: int) -> list[str]:
    """Why `settings` cannot run as `workers` processes (empty: it can)."""
    problems: list[str] = []
    if workers < 1:
        problems.append("--workers must be at least 1")
    if workers > 1 and settings.redis.url is None:
        needs = [
            name
            for name, on in (
                ("approvals", settings.approvals.enabled),
                ("idempotency", settings.idempotency.enabled),
                ("the redis audit sink", "redis" in settings.audit.sinks),
            )
            if on
        ]
        if needs:
            problems.append(
                f"--workers {workers} needs redis.url: {', '.join(needs)} keep state in Redis, "
                "and the embedded Redis is single-process only (set redis.url to a shared "
                "Redis, or disable them)"
            )
    if workers > 1 and not any(shared(x) for x in settings.listeners):
        problems.append(
            f"--workers {workers}: no TCP gRPC listener to share (unix-socket and "
            "MCP listeners are served by the first worker only)"
        )
    return problems


def _with_port(address: str, port: int) -> str:
    host, _, _ = address.rpartition(":")
    return f"{host}:{port}"


def worker_settings(
    settings: Settings,
    index: int,
    ports: dict[str, int],
    key_file: str | None,
    *,
    cache_secret: str = "",
) -> Settings:
    """Worker `index`'s view of `settings`: listeners it binds, its metrics port, the shared
    signing key, the shared cache key (`cache_secret`, when the config sets no `cache.key`).
    `ports` are worker 0's bound ports (for listeners configured with port 0)."""
    listeners = settings.listeners
    if index > 0:
        listeners = tuple(
            replace(x, address=_with_port(x.address, ports[x.name]))
            if x.address.endswith(":0") and x.name in ports
            else x
            for x in listeners
            if shared(x)
        )
    telemetry = settings.telemetry
    address = telemetry.prometheus_address
    if index > 0 and address and not address.endswith(":0"):
        host, _, port = address.rpartition(":")
        telemetry = replace(telemetry, prometheus_address=f"{host}:{int(port) + index}")
    token = settings.actor_token
    if key_file is not None:
        token = replace(token, key_file=key_file)
    if index > 0:
        token = replace(token, jwks_out=None)  # worker 0 publishes the one shared key
    cache = settings.cache
    if cache_secret and not cache.key:
        cache = replace(cache, key=cache_secret)
    return replace(
        settings, listeners=listeners, telemetry=telemetry, actor_token=token, cache=cache
    )


def parse_ports(text: str) -> dict[str, int]:
    """`name=port,name=port` (the hidden `--worker-ports` flag) as a mapping."""
    out: dict[str, int] = {}
    for item in filter(None, text.split(",")):
        name, _, port = item.partition("=")
        out[name] = int(port)
    return out


def _write_key(directory: str) -> str:
    """A fresh Ed25519 key in a 0600 file inside the supervisor's private (0700) directory."""
    pem = ed25519.Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path = os.path.join(directory, "actor-token-key.pem")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(pem)
    return path


def _argv(
    args: argparse.Namespace, index: int, ready: Path, key_file: str | None, ports: dict[str, int]
) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "gateway.cli.main",
        "serve",
        "--config",
        str(args.config),
        "--ready-file",
        str(ready),
        "--grace",
        str(args.grace),
        "--watch-interval",
        str(args.watch_interval),
        "--watch-settle",
        str(args.watch_settle),
        "--log-level",
        args.log_level,
        "--worker-index",
        str(index),
        "--worker-ports",
        ",".join(f"{k}={v}" for k, v in ports.items()),
        "--supervisor-pid",
        str(os.getpid()),
    ]
    if not args.watch:
        argv.append("--no-watch")
    if args.jwks_out and index == 0:
        argv += ["--jwks-out", args.jwks_out]
    if key_file is not None:
        argv += ["--actor-key-file", key_file]
    return argv


class _Group:
    """The running workers and the stop flag set by signals."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.stopping = False

    def on_signal(self, _signum: int, _frame: FrameType | None) -> None:
        self.stopping = True

    def exited(self) -> subprocess.Popen[bytes] | None:
        return next((p for p in self.procs if p.poll() is not None), None)

    def wait_ready(self, proc: subprocess.Popen[bytes], ready: Path) -> dict[str, Any] | None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline and not self.stopping:
            if proc.poll() is not None:
                return None
            if ready.exists():
                try:
                    data: dict[str, Any] = json.loads(ready.read_text())
                except ValueError:  # written but not complete yet
                    pass
                else:
                    return data
            time.sleep(POLL_S)
        return None

    def stop(self, grace_s: float) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s + 5.0
        for proc in self.procs:
            try:
                proc.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def supervise(args: argparse.Namespace) -> int:
    """Run `args.workers` gateway processes until SIGTERM/SIGINT or until one of them exits."""
    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        print(f"capgate: invalid config, not starting:\n{exc}", file=sys.stderr)
        return 2
    problems = refusals(settings, args.workers)
    if problems:
        print("capgate: not starting:\n" + "\n".join(f"  {p}" for p in problems), file=sys.stderr)
        return 2
    for listener in settings.listeners:
        if not shared(listener):
            log.warning(
                "listener %s (%s) is served by worker 0 only: SO_REUSEPORT does not apply to it",
                listener.name,
                listener.address,
            )
    group = _Group()
    preexec = _die_with_parent(os.getpid())
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, group.on_signal)
    with tempfile.TemporaryDirectory(prefix="capgate-workers-") as private:
        key_file = None if settings.actor_token.key_file else _write_key(private)
        # One cache key for the group, in the workers' environment only (not on argv).
        environ = {**os.environ, CACHE_KEY_ENV: secrets.token_hex(32)}
        # Fixed ports: every worker binds at once. Port 0: worker 0 binds first and the
        # others join the port it got.
        ports: dict[str, int] = {}
        batches = [[0], list(range(1, args.workers))]
        if not any(x.address.endswith(":0") for x in settings.listeners if shared(x)):
            batches = [list(range(args.workers))]
        first: dict[str, Any] = {}
        for batch in batches:
            started = []
            for index in batch:
                ready = Path(private) / f"worker-{index}.json"
                # The supervisor runs no other thread, so preexec_fn is safe here.
                proc = subprocess.Popen(
                    _argv(args, index, ready, key_file, ports),
                    env=environ,
                    preexec_fn=preexec,  # noqa: PLW1509
                )
                group.procs.append(proc)
                started.append((index, proc, ready))
            for index, proc, ready in started:
                data = group.wait_ready(proc, ready)
                if data is None:
                    if group.stopping:
                        group.stop(args.grace)
                        return 0
                    log.error("worker %d did not become ready; stopping", index)
                    group.stop(args.grace)
                    # A worker that refused to start (exit 2: a config it cannot serve) makes
                    # the group refuse the same way, as one process would.
                    return 2 if proc.returncode == 2 else 1
                if index == 0:
                    first = data
                    ports = {k: int(v) for k, v in data.get("ports", {}).items()}
        if args.ready_file:
            pids = [p.pid for p in group.procs]
            Path(args.ready_file).write_text(
                json.dumps({**first, "workers": args.workers, "pids": pids})
            )
        log.info("capgate ready: %d workers on %s", args.workers, ports)
        failed = None
        while not group.stopping:
            failed = group.exited()
            if failed is not None:
                log.error(
                    "worker pid %d exited with %s; stopping all workers",
                    failed.pid,
                    failed.returncode,
                )
                break
            time.sleep(POLL_S)
        group.stop(args.grace)
        return 1 if failed is not None else 0
