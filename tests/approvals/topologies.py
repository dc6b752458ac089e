"""Real Redis Cluster and Sentinel deployments of local redis-server processes, for tests."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import redis

from gateway.redis_server import free_port, redis_binary

SLOTS = 16384


def _wait(check: object, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if check():  # type: ignore[operator]
                return
        except redis.RedisError:
            pass
        time.sleep(0.05)
    raise RuntimeError("redis topology did not become ready")


def _ports(n: int) -> list[int]:
    """n distinct free ports: all sockets stay bound until every port is chosen."""
    with ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]


def _spawn(argv: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [redis_binary(), *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@contextmanager
def cluster(base: Path, nodes: int = 3) -> Iterator[list[int]]:
    """`nodes` primaries sharing the 16384 slots; yields their ports."""
    chosen = _ports(2 * nodes)
    ports, bus_ports = chosen[:nodes], chosen[nodes:]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for port, bus_port in zip(ports, bus_ports, strict=True):
            home = base / str(port)
            home.mkdir(parents=True)
            argv = f"--port {port} --bind 127.0.0.1 --dir {home} --cluster-enabled yes"
            # The bus port defaults to port + 10000, past 65535 for high ephemeral ports.
            argv += f" --cluster-port {bus_port} --cluster-config-file {home / 'nodes.conf'}"
            argv += " --cluster-node-timeout 2000 --appendonly no"
            procs.append(_spawn([*argv.split(), "--save", ""]))
        clients = [redis.Redis(host="127.0.0.1", port=p, socket_timeout=2) for p in ports]
        for client in clients:
            _wait(client.ping)
        share = SLOTS // nodes
        for i, client in enumerate(clients):
            last = SLOTS - 1 if i == nodes - 1 else (i + 1) * share - 1
            client.execute_command("CLUSTER", "ADDSLOTSRANGE", i * share, last)
            client.execute_command("CLUSTER", "SET-CONFIG-EPOCH", i + 1)
        for port, bus_port in zip(ports[1:], bus_ports[1:], strict=True):
            clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", port, bus_port)

        def ready() -> bool:
            for client in clients:
                info = client.execute_command("CLUSTER", "INFO").decode()
                if "cluster_state:ok" not in info or f"cluster_known_nodes:{nodes}" not in info:
                    return False
            return True

        _wait(ready)
        for client in clients:
            client.close()
        yield ports
    finally:
        _stop(procs)


@contextmanager
def sentinel(base: Path, master_port: int, service: str) -> Iterator[int]:
    """One Sentinel watching the master on `master_port`; yields the Sentinel's port."""
    port = free_port()
    base.mkdir(parents=True, exist_ok=True)
    conf = base / "sentinel.conf"
    conf.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {base}\n"
        f"sentinel monitor {service} 127.0.0.1 {master_port} 1\n"
        f"sentinel down-after-milliseconds {service} 5000\n"
    )
    proc = _spawn([str(conf), "--sentinel"])
    try:
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=2)
        _wait(lambda: client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", service))
        client.close()
        yield port
    finally:
        _stop([proc])
