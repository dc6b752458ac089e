"""`capgate serve --workers N` (gateway/process/workers.py, ADR 0012): N processes share the TCP
listener ports through SO_REUSEPORT; what cannot be shared is refused or kept on worker 0."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gateway.config.loader import load_settings
from gateway.process.workers import parse_ports, refusals, worker_settings
from gateway.state.embedded import RedisProcess, free_port

ROOT = Path(__file__).resolve().parents[2]


def _config(tmp: Path, *, redis_url: str | None, port: int = 0, extra: str = "") -> Path:
    redis = f"redis:\n  url: {redis_url}\n" if redis_url else f"redis:\n  data_dir: {tmp}/r\n"
    text = f"""
version: 1
listeners:
  - {{name: agents, address: "127.0.0.1:{port}", surface: agent, auth: none}}
  - {{name: local, address: "unix://{tmp}/cg.sock", surface: direct, auth: trusted-local}}
upstreams:
  proc: {{address: "127.0.0.1:9", kind: procedure}}
capabilities:
  - id: demo.echo
    description: Echo.
    upstream: proc
    side_effect: none
    risk: low
    expose: {{agent: true}}
    input_schema: {{type: object}}
{redis}{extra}"""
    path = tmp / "gateway.yaml"
    path.write_text(text)
    return path


def test_embedded_redis_is_refused_for_several_workers(tmp_path: Path) -> None:
    settings = load_settings(_config(tmp_path, redis_url=None))
    assert refusals(settings, 1) == []
    [problem] = refusals(settings, 2)
    assert "needs redis.url" in problem
    assert "approvals" in problem
    assert "idempotency" in problem


def test_several_workers_without_stateful_features_need_no_redis(tmp_path: Path) -> None:
    settings = load_settings(
        _config(
            tmp_path,
            redis_url=None,
            extra="approvals: {enabled: false}\nidempotency: {enabled: false}\n",
        )
    )
    assert refusals(settings, 3) == []


def test_cli_refuses_before_starting_anything(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gateway.cli.main",
            "serve",
            "--config",
            str(_config(tmp_path, redis_url=None)),
            "--workers",
            "2",
            "--no-watch",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "needs redis.url" in done.stderr
    assert not (tmp_path / "r").exists()  # no embedded Redis was started


def test_worker_settings_share_tcp_and_keep_the_rest_on_worker_zero(tmp_path: Path) -> None:
    settings = load_settings(_config(tmp_path, redis_url="redis://127.0.0.1:1/0"))
    settings = replace(
        settings,
        telemetry=replace(settings.telemetry, prometheus_address="127.0.0.1:9464"),
        actor_token=replace(settings.actor_token, jwks_out=str(tmp_path / "jwks.json")),
    )
    ports = parse_ports("agents=4321,local=0")
    first = worker_settings(settings, 0, ports, "/k.pem")
    other = worker_settings(settings, 1, ports, "/k.pem")
    assert [x.name for x in first.listeners] == ["agents", "local"]
    assert first.listeners[0].address == "127.0.0.1:0"  # worker 0 binds what was configured
    assert [(x.name, x.address) for x in other.listeners] == [("agents", "127.0.0.1:4321")]
    assert first.telemetry.prometheus_address == "127.0.0.1:9464"
    assert other.telemetry.prometheus_address == "127.0.0.1:9465"
    assert first.actor_token.key_file == other.actor_token.key_file == "/k.pem"
    assert first.actor_token.jwks_out == str(tmp_path / "jwks.json")
    assert other.actor_token.jwks_out is None


def _listening_pids(port: int, pids: list[int]) -> set[int]:
    """Which of `pids` hold a listening TCP socket on `port` (from /proc; gRPC may bind an
    IPv6 socket with a v4-mapped address, so both tables are read)."""
    inodes = set()
    lines = [
        line
        for table in ("tcp", "tcp6")
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]
    ]
    for line in lines:
        fields = line.split()
        local, state, inode = fields[1], fields[3], fields[9]
        if state == "0A" and int(local.split(":")[1], 16) == port:
            inodes.add(f"socket:[{inode}]")
    holders = set()
    for pid in pids:
        fd_dir = Path(f"/proc/{pid}/fd")
        for fd in fd_dir.iterdir():
            try:
                if os.readlink(fd) in inodes:
                    holders.add(pid)
            except OSError:
                continue
    return holders


def _wait_ready(proc: subprocess.Popen[bytes], ready: Path) -> dict:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:  # say why: its stderr (ports taken, a refused config)
            why = proc.stderr.read().decode(errors="replace")[-2000:] if proc.stderr else ""
            raise AssertionError(f"supervisor exited early ({proc.returncode}): {why}")
        if ready.exists():
            try:
                return json.loads(ready.read_text())
            except ValueError:
                pass
        time.sleep(0.1)
    raise AssertionError("workers not ready")


def _health(port: int) -> int:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=10
        )
    return int(reply.status)


@pytest.mark.integration
@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_two_workers_listen_on_one_port_and_stop_together(
    tmp_path: Path, redis_server: RedisProcess
) -> None:
    port = free_port()
    ready = tmp_path / "ready.json"
    config = _config(tmp_path, redis_url=redis_server.url, port=port)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gateway.cli.main",
            "serve",
            "--config",
            str(config),
            "--workers",
            "2",
            "--ready-file",
            str(ready),
            "--no-watch",
            "--grace",
            "1",
            "--log-level",
            "WARNING",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        info = _wait_ready(proc, ready)
        pids = info["pids"]
        assert info["workers"] == 2
        assert len(set(pids)) == 2
        assert info["ports"]["agents"] == port
        assert _listening_pids(port, pids) == set(pids)  # both workers accept on the port
        assert _health(port) == health_pb2.HealthCheckResponse.SERVING
        # The unix socket is worker 0's alone; both sign with the one supervisor-made key.
        with socket.socket(socket.AF_UNIX) as unix:
            unix.connect(str(tmp_path / "cg.sock"))
        key_files = set()
        for pid in pids:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            key_files.add(argv[argv.index(b"--actor-key-file") + 1].decode())
        [key_file] = key_files
        assert Path(key_file).stat().st_mode & 0o777 == 0o600
        # One worker dying takes the group down (restart as one unit), key removed.
        os.kill(pids[1], signal.SIGKILL)
        assert proc.wait(30) == 1
        assert not Path(key_file).exists()
        with pytest.raises(ProcessLookupError):
            os.kill(pids[0], 0)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie (exited, not yet reaped by its new parent) is gone for our purpose.
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state == "Z"


@pytest.mark.integration
@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_workers_drain_and_exit_when_the_supervisor_is_killed(
    tmp_path: Path, redis_server: RedisProcess
) -> None:
    """SIGKILL leaves the supervisor no chance to forward SIGTERM: the workers notice they
    were re-parented and drain on their own instead of serving as orphans."""
    ready = tmp_path / "ready.json"
    config = _config(tmp_path, redis_url=redis_server.url, port=free_port())
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gateway.cli.main",
            "serve",
            "--config",
            str(config),
            "--workers",
            "2",
            "--ready-file",
            str(ready),
            "--no-watch",
            "--grace",
            "1",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pids: list[int] = []
    try:
        pids = _wait_ready(proc, ready)["pids"]
        proc.kill()
        proc.wait(10)
        deadline = time.monotonic() + 30
        while not all(_gone(pid) for pid in pids):
            assert time.monotonic() < deadline, "orphaned workers kept running"
            time.sleep(0.2)
    finally:
        for pid in pids:
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)


EXIT_BOUND_S = 5.0  # the bound asserted; a worker drains within --grace (1 s here)


@pytest.mark.integration
@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_workers_exit_promptly_when_the_supervisor_is_killed(
    tmp_path: Path, redis_server: RedisProcess
) -> None:
    """A SIGKILLed supervisor's workers are gone within a few seconds: the kernel sends each
    SIGTERM (PR_SET_PDEATHSIG) instead of a 1 s parent-pid poll noticing, and the final OTLP
    metrics push to a collector that is down is cut at 2 s (the SDK's exporter retried for
    ≈ 6 s whatever timeout it was given). Before: 8.2-8.4 s here with --grace 1; after: ≈ 2.2 s.
    The wait is polled with a generous timeout and the bound asserted on the measured time;
    the OTLP endpoint is a closed loopback port, as in bench/."""
    ready = tmp_path / "ready.json"
    config = _config(
        tmp_path,
        redis_url=redis_server.url,
        port=free_port(),
        extra="telemetry: {tracing: true, otlp: true}\n"
        "audit: {sinks: [redis], redis_stream: 'w:audit'}\n",
    )
    env = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}",
        "OTEL_TRACES_SAMPLER": "parentbased_always_off",
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gateway.cli.main",
            "serve",
            "--config",
            str(config),
            "--workers",
            "2",
            "--ready-file",
            str(ready),
            "--no-watch",
            "--grace",
            "1",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pids: list[int] = []
    try:
        pids = _wait_ready(proc, ready)["pids"]
        proc.kill()
        proc.wait(10)
        killed = time.monotonic()
        while not all(_gone(pid) for pid in pids) and time.monotonic() - killed < 60:
            time.sleep(0.05)
        took = time.monotonic() - killed
        assert all(_gone(pid) for pid in pids), "orphaned workers kept running for 60 s"
        assert took < EXIT_BOUND_S, f"workers took {took:.1f} s to exit"
    finally:
        for pid in pids:
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)
