"""Real Redis Cluster and Sentinel deployments of local redis-server processes, for tests."""

from __future__ import annotations

import random
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import redis

from gateway.state.embedded import ServerBinary, free_port, select, spawn

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


def _bindable(port: int, stack: ExitStack) -> bool:
    sock = stack.enter_context(socket.socket())
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        return False
    return True


def _ports_with_default_bus(n: int, rng: random.Random) -> list[int]:
    """n free ports whose port + 10000 (the cluster bus before `--cluster-port`) is free too."""
    chosen: list[int] = []
    with ExitStack() as stack:
        for _ in range(2000):
            port = rng.randrange(20000, 55536)
            if port in chosen or port + 10000 in chosen:
                continue
            if _bindable(port, stack) and _bindable(port + 10000, stack):
                chosen.append(port)
                if len(chosen) == n:
                    return chosen
    raise RuntimeError("no free port pairs for a cluster bus")


def has_cluster_port(binary: ServerBinary) -> bool:
    """`--cluster-port` and `CLUSTER ADDSLOTSRANGE` came with Redis 7.0 (and every Valkey)."""
    return binary.product == "Valkey" or binary.version >= (7, 0, 0)


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
    binary = select()
    modern = has_cluster_port(binary)
    if modern:
        chosen = _ports(2 * nodes)
        ports, bus_ports = chosen[:nodes], chosen[nodes:]
    else:  # the bus is port + 10000: both must be free and below 65536
        ports = _ports_with_default_bus(nodes, random.Random())
        bus_ports = [port + 10000 for port in ports]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for port, bus_port in zip(ports, bus_ports, strict=True):
            home = base / str(port)
            home.mkdir(parents=True)
            argv = f"--port {port} --bind 127.0.0.1 --dir {home} --cluster-enabled yes"
            argv += f" --cluster-config-file {home / 'nodes.conf'}"
            argv += " --cluster-node-timeout 2000 --appendonly no"
            if modern:
                argv += f" --cluster-port {bus_port}"
            procs.append(spawn(binary, [*argv.split(), "--save", ""], home))
        clients = [redis.Redis(host="127.0.0.1", port=p, socket_timeout=2) for p in ports]
        for client in clients:
            _wait(client.ping)
        share = SLOTS // nodes
        for i, client in enumerate(clients):
            last = SLOTS - 1 if i == nodes - 1 else (i + 1) * share - 1
            if modern:
                client.execute_command("CLUSTER", "ADDSLOTSRANGE", i * share, last)
            else:
                client.execute_command("CLUSTER", "ADDSLOTS", *range(i * share, last + 1))
            client.execute_command("CLUSTER", "SET-CONFIG-EPOCH", i + 1)
        for port, bus_port in zip(ports[1:], bus_ports[1:], strict=True):
            meet = ["CLUSTER", "MEET", "127.0.0.1", port] + ([bus_port] if modern else [])
            clients[0].execute_command(*meet)

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
    proc = spawn(select(), [str(conf), "--sentinel"], base)
    try:
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=2)
        _wait(lambda: client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", service))
        client.close()
        yield port
    finally:
        _stop([proc])
