"""What governing an MCP tool costs (issue 22): `tools/call` on the support desk MCP server
(examples/mcp_upstream, the official MCP Python SDK, stateless era) directly, against the same
tool as a capgate capability (`kind: mcp`, Invoke over gRPC), one call at a time.

Both sides run in separate processes from this client: the desk server, and `capgate serve`
with a real Redis (audit to a Redis stream, as the other bench rows). Calls alternate in
blocks, so both columns are taken under the same machine load. CPU µs per call are the server
processes' own CPU time over the calls of a block (the gateway's, and Redis', and the desk's);
"added" is the governed column minus the direct one.

    python -m bench.mcp_upstream [--calls 2000] [--out bench/out/mcp_upstream.json]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
import httpx2
import orjson

from bench import fixtures, procs
from capgate.v1 import gateway_pb2, gateway_pb2_grpc
from gateway.state.embedded import RedisProcess, free_port

CONFIG = """version: 1
listeners:
  - name: agents
    address: 127.0.0.1:0
    surface: agent
    auth: jwt
    jwt:
      issuers: [{issuer}]
      audience: capgate
      keys:
        - {{kid: bench, alg: HS256, secret: "{secret}"}}
upstreams:
  desk:
    kind: mcp
    address: "{desk}"
    mcp: {{protocol: "2026-07-28"}}
capabilities:
  - id: desk.search
    description: Find support tickets.
    upstream: desk
    tool: search_tickets
    side_effect: read
    risk: low
    expose: {{agent: true}}
redis:
  url: "{redis}"
  key_prefix: capgate-bench-mcp
audit:
  sinks: [redis]
  hmac_key: "{hmac}"
"""
ARGUMENTS = {"query": "printer", "limit": 5}
BLOCK = 100


def _redis_pid(redis: RedisProcess) -> int:
    assert redis.process is not None
    return redis.process.pid


def _wait_port(address: str, timeout_s: float = 30.0) -> None:
    host, _, port = address.rpartition(":")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, int(port)), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise procs.StartError(f"nothing listens on {address}")


class Direct:
    """tools/call straight to the server, as an MCP client of the stateless era would."""

    def __init__(self, address: str) -> None:
        self.client = httpx2.Client(trust_env=False)
        self.url = f"http://{address}/mcp"
        self.ids = 0

    def __call__(self) -> None:
        self.ids += 1
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        body = {
            "jsonrpc": "2.0",
            "id": self.ids,
            "method": "tools/call",
            "params": {"name": "search_tickets", "arguments": ARGUMENTS, "_meta": meta},
        }
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "tools/call",
            "mcp-name": "search_tickets",
        }
        answer = self.client.post(self.url, content=orjson.dumps(body), headers=headers)
        text = answer.text
        if answer.status_code != 200 or '"structuredContent"' not in text:
            raise RuntimeError(f"direct call failed: {answer.status_code}")


class Governed:
    """The same tool through capgate: Invoke on the agents listener."""

    def __init__(self, port: int, metadata: list[tuple[str, str]]) -> None:
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = gateway_pb2_grpc.CapabilityGatewayStub(self.channel)
        self.metadata = metadata
        self.request = gateway_pb2.InvokeRequest(
            capability_id="desk.search", input_json=orjson.dumps(ARGUMENTS)
        )

    def __call__(self) -> None:
        result = self.stub.Invoke(self.request, metadata=self.metadata, timeout=10)
        if result.WhichOneof("outcome") != "completed":
            raise RuntimeError(f"governed call failed: {result}")


def _block(call: Any, groups: dict[str, list[int]]) -> tuple[list[float], dict[str, float]]:
    """BLOCK calls: their latencies (µs) and the CPU µs per call of each group of pids."""
    before = {k: sum(procs.cpu_seconds(p) for p in pids) for k, pids in groups.items()}
    latencies = []
    for _ in range(BLOCK):
        began = time.perf_counter()
        call()
        latencies.append((time.perf_counter() - began) * 1e6)
    after = {k: sum(procs.cpu_seconds(p) for p in pids) for k, pids in groups.items()}
    return latencies, {k: (after[k] - before[k]) * 1e6 / BLOCK for k in groups}


def run(calls: int, warmup: int = 200) -> dict[str, Any]:
    run_dir = Path(tempfile.mkdtemp(prefix="cgb-mcp-"))
    redis = RedisProcess(run_dir / "redis").start()
    started: list[procs.Proc] = []
    try:
        desk_address = f"127.0.0.1:{free_port()}"
        argv = procs.python("examples.mcp_upstream.server", desk_address)
        desk = procs.spawn("desk", argv, run_dir).proc
        started.append(desk)
        _wait_port(desk_address)
        secret, hmac = fixtures.new_secret(), fixtures.new_secret()
        config = run_dir / "gateway.yaml"
        config.write_text(
            CONFIG.format(
                issuer=fixtures.ISSUER, secret=secret, desk=desk_address, redis=redis.url, hmac=hmac
            )
        )
        gw = procs.gateway(run_dir, "gw", config, env=procs.gateway_env(run_dir)).wait()
        started.append(gw)
        direct = Direct(desk_address)
        governed = Governed(
            gw.ready["ports"]["agents"], fixtures.bearer(secret, fixtures.AGENT, "capgate")
        )
        for _ in range(warmup):
            direct()
            governed()
        groups = {"desk": [desk.popen.pid], "gateway": [gw.popen.pid, _redis_pid(redis)]}
        rows: dict[str, dict[str, list[float]]] = {
            side: {"lat": [], "desk": [], "gateway": []} for side in ("direct", "governed")
        }
        for _ in range(max(calls // BLOCK, 1)):
            for side, call in (("direct", direct), ("governed", governed)):
                lat, cpu = _block(call, groups)
                rows[side]["lat"] += lat
                rows[side]["desk"].append(cpu["desk"])
                rows[side]["gateway"].append(cpu["gateway"])
        direct.client.close()
        governed.channel.close()
    finally:
        procs.stop_all(started, timeout_s=3.0)
        redis.stop()

    def summary(name: str) -> dict[str, float]:
        lat = sorted(rows[name]["lat"])
        return {
            "calls": len(lat),
            "p50_us": statistics.median(lat),
            "p99_us": lat[int(len(lat) * 0.99) - 1],
            "desk_cpu_us_per_call": statistics.median(rows[name]["desk"]),
            "gateway_and_redis_cpu_us_per_call": statistics.median(rows[name]["gateway"]),
        }

    d, g = summary("direct"), summary("governed")
    return {
        "direct": d,
        "governed": g,
        "added_p50_us": g["p50_us"] - d["p50_us"],
        "added_cpu_us_per_call": g["gateway_and_redis_cpu_us_per_call"]
        + g["desk_cpu_us_per_call"]
        - d["desk_cpu_us_per_call"],
        "loadavg": Path("/proc/loadavg").read_text().split()[:3],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="per side, after a warm-up")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args(argv)
    result = run(args.calls)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    d, g = result["direct"], result["governed"]
    print(
        "| MCP tool, direct vs governed (c=1) | "
        f"{d['p50_us']:.0f} µs | {g['p50_us']:.0f} µs | +{result['added_p50_us']:.0f} µs | "
        f"+{result['added_cpu_us_per_call']:.0f} µs CPU/call |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
