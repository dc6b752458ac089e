"""`python -m bench.tails`: p50 and p99 at 16 calls in flight, Invoke and MCP `tools/call`
(issue 29 item 4: p99 at most twice p50).

A closed loop (bench/load.py, the project's generator, in its own process): `--inflight` calls
kept in flight for `--seconds`, after 100 unrecorded warm-up calls, per cell. Two columns:

- `grpc`: `CapabilityGateway/Invoke` of `bench.p3` (3 policies, validation, audit to Redis);
- `mcp`: `tools/call` of the same capability on the gateway's MCP listener (one MCP session,
  JSON responses, one keep-alive HTTP/1.1 connection per call in flight).

The gateway is `capgate serve --workers 1` with the config of `bench.added` (production-shaped,
plus an MCP listener), one Redis, the bench upstream. `--b-env NAME=VALUE` also runs a second,
otherwise identical gateway with that environment (columns `grpc_b`, `mcp_b`): an A/B.
`--gc-ab` is the A/B of the serving GC policy (ADR 0041): gateway a with it made a no-op
(`bench/gcprobe`), gateway b as shipped; both record their collections' pause times, reported
per gateway (count, median, max and total per generation). Columns
alternate within each block (reversed every other block), so each is taken under the same
machine load; per column the report is the median and range over blocks of p50, p99 and
p99/p50. Writes bench/out/tails.json. Figures are reported, never asserted.

    python -m bench.tails [--blocks 5] [--seconds 4] [--inflight 16] [--b-env NAME=VALUE] [--gc-ab]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2
import orjson

from bench import fixtures, procs, scenarios
from bench.added import TOOL, _mcp_session, mcp_config
from gateway.state.embedded import RedisProcess

OUT = Path(__file__).parent / "out" / "tails.json"
GCPROBE = Path(__file__).parent / "gcprobe"
COLUMN_FIGURES = ("p50_ms", "p99_ms", "ratio", "p999_ms", "max_ms", "calls_per_s", "server_cpu_us")
MCP_EXPECT = '"isError":false'


def _mcp_headers(port: int, auth: str) -> dict[str, str]:
    async def opened() -> dict[str, str]:
        async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            return await _mcp_session(http, auth)

    headers = asyncio.run(opened())
    headers["accept"] = "application/json"
    return headers


def _mcp_job(port: int, headers: dict[str, str]) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": TOOL, "arguments": fixtures.INPUT},
    }
    return {
        "kind": "http",
        "host": "127.0.0.1",
        "port": port,
        "path": "/mcp",
        "body": orjson.dumps(body).decode(),
        "headers": headers,
        "expect": MCP_EXPECT,
    }


def _gc_envs(run_dir: Path) -> dict[str, dict[str, str]]:
    probe = {"PYTHONPATH": str(GCPROBE)}
    return {
        "": {**probe, "BENCH_GC_POLICY": "off", "BENCH_GC_TRACE": str(run_dir / "gc_a")},
        "_b": {**probe, "BENCH_GC_TRACE": str(run_dir / "gc_b")},
    }


def gc_pauses(run_dir: Path) -> dict[str, Any]:
    """Per gateway: objects frozen when it exited, and per generation its collections and
    their median, max and total pause (ms)."""
    out: dict[str, Any] = {}
    for side in ("a", "b"):
        for dump in run_dir.glob(f"gc_{side}.*"):
            trace = json.loads(dump.read_text())
            pauses = trace["pauses"]
            out[side] = {"frozen_at_exit": trace["frozen"]} | {
                f"gen{g}": {
                    "n": len(ms),
                    "median_ms": round(statistics.median(ms), 3),
                    "max_ms": round(max(ms), 2),
                    "total_ms": round(sum(ms), 1),
                }
                for g in (0, 1, 2)
                if (ms := [p for gen, p in pauses if gen == g])
            }
    return out


def measure(
    blocks: int, seconds: float, inflight: int, b_env: dict[str, str] | None, gc_ab: bool
) -> Any:
    run_dir = Path(tempfile.mkdtemp(prefix="cgt-"))
    redis = RedisProcess(run_dir / "redis").start()
    started: list[procs.Proc] = []
    gen: procs.Generator | None = None
    cells: dict[str, list[dict[str, Any]]] = {}
    try:
        up = procs.upstream(run_dir)
        started.append(up)
        secret = fixtures.new_secret()
        config = fixtures.gateway_config(
            run_dir=run_dir,
            upstream=f"127.0.0.1:{up.ready['port']}",
            redis_url=redis.url,
            secret=secret,
            hmac_key=fixtures.new_secret(),
        )
        path = fixtures.write_config(run_dir / "gateway.yaml", mcp_config(config, secret))
        envs = {"": {}} if b_env is None else {"": {}, "_b": b_env}
        if gc_ab:
            envs = _gc_envs(run_dir)
        pending = {
            suffix: procs.gateway(
                run_dir, f"gw{suffix}", path, env={**procs.gateway_env(run_dir), **env}
            )
            for suffix, env in envs.items()
        }
        started += [waiting.proc for waiting in pending.values()]
        md = fixtures.bearer(secret, fixtures.AGENT, "capgate")
        auth = dict(fixtures.bearer(secret, fixtures.AGENT, "capgate-mcp"))["authorization"]
        sides: dict[str, tuple[dict[str, Any], int]] = {}
        for suffix, waiting in pending.items():
            gw = waiting.wait()
            ports = gw.ready["ports"]
            target = f"127.0.0.1:{ports['agents']}"
            sides[f"grpc{suffix}"] = (scenarios.invoke(target, "bench.p3", md), gw.popen.pid)
            headers = _mcp_headers(ports["mcp"], auth)
            sides[f"mcp{suffix}"] = (_mcp_job(ports["mcp"], headers), gw.popen.pid)
        gen = procs.Generator(run_dir)
        names = list(sides)
        for block in range(blocks):
            order = names if block % 2 == 0 else names[::-1]
            for name in order:
                spec, pid = sides[name]
                job = {
                    "concurrency": inflight,
                    "count": 1_000_000,
                    "seconds": seconds,
                    "warmup": 100,
                    **spec,
                }
                cpu0 = procs.cpu_seconds(pid)
                result = gen.run(job)
                cpu = procs.cpu_seconds(pid) - cpu0
                if result.get("calls"):
                    result["server_cpu_us"] = round(cpu / result["calls"] * 1e6)
                    result["ratio"] = round(result["p99_ms"] / result["p50_ms"], 2)
                cells.setdefault(name, []).append(result)
                print(
                    f"block {block} {name:<7} p50 {result.get('p50_ms')} p99 {result.get('p99_ms')}"
                    f" p99.9 {result.get('p999_ms')} max {result.get('max_ms')}"
                    f" ratio {result.get('ratio')} {result.get('calls_per_s')}/s"
                    f" cpu {result.get('server_cpu_us')} µs err {result.get('errors')}"
                    f" bad {result.get('bad')} {result.get('failed', '')}",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        if gen is not None:
            gen.stop()
        procs.stop_all(started, timeout_s=3.0)
        redis.stop()
    result = summarize(cells, blocks, seconds, inflight, b_env)
    if gc_ab:
        result["gc_ab"] = {"a": "policy off", "b": "policy on", "pauses": gc_pauses(run_dir)}
    return result


def _spread(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


def summarize(
    cells: dict[str, list[dict[str, Any]]],
    blocks: int,
    seconds: float,
    inflight: int,
    b_env: dict[str, str] | None,
) -> dict[str, Any]:
    """Per column: median and range over blocks of p50, p99, p99/p50 and CPU per call."""
    columns: dict[str, Any] = {}
    for name, results in cells.items():
        good = [r for r in results if r.get("calls")]
        if not good:
            columns[name] = {"failed": results[0].get("failed", "no calls")}
            continue
        columns[name] = {key: _spread([r[key] for r in good]) for key in COLUMN_FIGURES}
    return {
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "inflight": inflight,
        "seconds_per_cell": seconds,
        "blocks": blocks,
        "b_env": b_env,
        "columns": columns,
        "cells": cells,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--inflight", type=int, default=16)
    parser.add_argument(
        "--b-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="also run a second gateway with this environment (columns grpc_b, mcp_b)",
    )
    parser.add_argument(
        "--gc-ab", action="store_true", help="gateway a without the GC policy, b with it"
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    b_env = dict(item.split("=", 1) for item in args.b_env) if args.b_env else None
    result = measure(args.blocks, args.seconds, args.inflight, b_env, args.gc_ab)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for name, figures in result["columns"].items():
        print(f"{name:<7} {figures}")
    for side, pauses in result.get("gc_ab", {}).get("pauses", {}).items():
        print(f"gc {side}: {pauses}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
