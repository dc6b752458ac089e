"""One shared test stack for every client suite: a real Redis, the example upstream and the
gateway (tests/stack/: tests/gateway/gateway.yaml plus the approvals the clients meet), started
once. `start` writes `.run/stack.json` (addresses, tokens, JWKS path) and returns when all are
serving; `stop` ends them.

    python scripts/stack.py start      # background processes, pids in .run/stack.pids
    python scripts/stack.py stop
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / ".run"
sys.path.insert(0, str(ROOT))

from gateway.state.embedded import RedisProcess, free_port  # noqa: E402
from tests.gateway.harness import JWT_SECRET, token  # noqa: E402


def _wait_file(path: Path, proc: subprocess.Popen[bytes], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text().strip():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{what} did not start; see {RUN}")
        time.sleep(0.05)


def start() -> None:
    RUN.mkdir(exist_ok=True)
    stop(quiet=True)
    redis = RedisProcess(RUN / "redis").start()
    orders_port = free_port()
    orders_log = open(RUN / "orders.log", "wb")  # noqa: SIM115
    orders = subprocess.Popen(
        [sys.executable, "-m", "examples.orders.server", "--address", f"127.0.0.1:{orders_port}"],
        cwd=ROOT,
        stdout=orders_log,
        stderr=subprocess.STDOUT,
    )
    run_dir = Path(tempfile.gettempdir()) / f"cg-stack-{os.getpid()}"
    run_dir.mkdir(exist_ok=True)
    jwks = RUN / "actor-jwks.json"
    env = {
        **os.environ,
        "TEST_JWT_SECRET": JWT_SECRET,
        "TEST_RUN_DIR": str(run_dir),
        "TEST_ORDERS_ADDR": f"127.0.0.1:{orders_port}",
        "TEST_REDIS_URL": redis.url,
        "TEST_HMAC_KEY": "stack-hmac-key-0123456789-0123456789-abcdef",
        "CAPGATE_ACTOR_JWKS_OUT": str(jwks),
    }
    ready = RUN / "gateway.ready.json"
    ready.unlink(missing_ok=True)
    gw_log = open(RUN / "gateway.log", "wb")  # noqa: SIM115
    gateway = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gateway.cli.main",
            "serve",
            "--config",
            str(ROOT / "tests/stack"),
            "--ready-file",
            str(ready),
            "--no-watch",
            "--jwks-out",
            str(jwks),
        ],
        cwd=ROOT,
        env=env,
        stdout=gw_log,
        stderr=subprocess.STDOUT,
    )
    (RUN / "stack.pids").write_text(
        json.dumps(
            {
                "redis": redis.process.pid if redis.process else 0,
                "orders": orders.pid,
                "gateway": gateway.pid,
            }
        )
    )
    _wait_file(ready, gateway, "gateway")
    ports = json.loads(ready.read_text())["ports"]
    stack = {
        "agents": f"127.0.0.1:{ports['agents']}",
        "admin": f"127.0.0.1:{ports['admin']}",
        "local_socket": f"{run_dir}/capgate.sock",
        "orders": f"127.0.0.1:{orders_port}",
        "tokens": {
            "alice": token("alice", lifetime=3600),
            "bob": token("bob", audience="capgate-admin", lifetime=3600),
            "carol": token("carol", audience="capgate-admin", lifetime=3600),
            "bob_agent": token("bob", lifetime=3600),
            "root": token("root", lifetime=3600),
        },
        "jwks_file": str(jwks),
    }
    (RUN / "stack.json").write_text(json.dumps(stack, indent=2))
    print(f"stack up: {RUN / 'stack.json'}")


def stop(quiet: bool = False) -> None:
    pids_file = RUN / "stack.pids"
    if not pids_file.exists():
        return
    pids = json.loads(pids_file.read_text())
    for name in ("gateway", "orders", "redis"):
        pid = pids.get(name)
        if not pid:
            continue
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
    pids_file.unlink()
    (RUN / "stack.json").unlink(missing_ok=True)
    if not quiet:
        print("stack stopped")


if __name__ == "__main__":
    {"start": start, "stop": stop}[sys.argv[1]]()
