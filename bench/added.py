"""`python -m bench.added`: the latency capgate adds to a call, at fixed rates (issue 29 item 6).

What a user compares: the same call made directly to the upstream and made through capgate,
p50 and p99, at a fixed arrival rate (open loop: call i is due at start + i/rate, and its
latency counts from when it was due, so a stall that delays later calls shows in them too).
Three columns, each at every rate:

- `direct`: the bench upstream's `capgate.v1.Procedure/Invoke` (gRPC), called directly;
- `grpc`: `CapabilityGateway/Invoke` of `bench.p3` (3 policies, validation, audit to Redis);
- `mcp`: `tools/call` of the same capability on the gateway's MCP listener (one session,
  JSON responses).

The gateway is `capgate serve --workers 1` with the production-shaped config of `bench.run`
(plus an MCP listener), one Redis (`appendfsync always`), the bench upstream; the client runs in
this process (one grpc.aio channel, one HTTP/1.1 client). Columns alternate in blocks, so each
is taken under the same machine load. Writes bench/out/added.json. Figures are reported, never
asserted.

    python -m bench.added [--rates 100,500] [--seconds 5] [--blocks 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import httpx2
import orjson

from bench import fixtures, procs
from bench.load import percentile
from capgate.v1 import gateway_pb2
from gateway.state.embedded import RedisProcess

OUT = Path(__file__).parent / "out" / "added.json"
TOOL = "bench_p3"
MCP_PROTOCOL = "2025-11-25"
ACCEPT = "application/json, text/event-stream"
Call = Callable[[], Awaitable[bool]]


def mcp_config(config: dict[str, Any], secret: str) -> dict[str, Any]:
    """`config` with an MCP listener and bench.p3 exposed on it."""
    config["listeners"].append(
        {
            "name": "mcp",
            "address": "127.0.0.1:0",
            "surface": "mcp",
            "protocol": "mcp",
            "auth": "jwt",
            "jwt": {
                "issuers": [fixtures.ISSUER],
                "audience": "capgate-mcp",
                "attribute_claims": ["mfa", "tenant"],
                "keys": [{"kid": "bench", "alg": "HS256", "secret": secret}],
            },
            "mcp": {"allowed_origins": ["https://bench.example"]},
        }
    )
    for capability in config["capabilities"]:
        if capability["id"] == "bench.p3":
            capability["expose"]["mcp"] = True
    return config


async def fixed_rate(call: Call, rate: float, seconds: float) -> dict[str, Any]:
    """Open loop at `rate` calls/s for `seconds`: latency from each call's due time."""
    loop = asyncio.get_running_loop()
    latencies: list[float] = []
    errors = 0

    async def one(due: float) -> None:
        nonlocal errors
        ok = await call()
        if ok:
            latencies.append((loop.time() - due) * 1000)
        else:
            errors += 1

    start = loop.time() + 0.05
    total = int(rate * seconds)
    tasks = []
    for i in range(total):
        due = start + i / rate
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(due)))
    await asyncio.gather(*tasks)
    latencies.sort()
    return {
        "rate": rate,
        "calls": len(latencies),
        "errors": errors,
        "p50_ms": round(percentile(latencies, 0.50), 3) if latencies else None,
        "p99_ms": round(percentile(latencies, 0.99), 3) if latencies else None,
    }


async def _mcp_session(http: httpx2.AsyncClient, auth: str) -> dict[str, str]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": MCP_PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    }
    opened = await http.post("/mcp", json=body, headers={"authorization": auth, "accept": ACCEPT})
    opened.raise_for_status()
    return {
        "authorization": auth,
        "accept": "application/json",
        "mcp-session-id": opened.headers["mcp-session-id"],
        "mcp-protocol-version": MCP_PROTOCOL,
    }


async def measure(rates: list[float], seconds: float, blocks: int) -> dict[str, Any]:
    run_dir = Path(tempfile.mkdtemp(prefix="cga-"))
    redis = RedisProcess(run_dir / "redis").start()
    started: list[procs.Proc] = []
    try:
        up = procs.upstream(run_dir)
        started.append(up)
        upstream = f"127.0.0.1:{up.ready['port']}"
        secret = fixtures.new_secret()
        config = fixtures.gateway_config(
            run_dir=run_dir,
            upstream=upstream,
            redis_url=redis.url,
            secret=secret,
            hmac_key=fixtures.new_secret(),
        )
        path = fixtures.write_config(run_dir / "gateway.yaml", mcp_config(config, secret))
        pending = procs.gateway(run_dir, "gw", path, env=procs.gateway_env(run_dir))
        started.append(pending.proc)
        gw = pending.wait()
        ports = gw.ready["ports"]
        md = tuple(fixtures.bearer(secret, fixtures.AGENT, "capgate"))
        auth = dict(fixtures.bearer(secret, fixtures.AGENT, "capgate-mcp"))["authorization"]
        direct_ch = grpc.aio.insecure_channel(upstream)
        gw_ch = grpc.aio.insecure_channel(f"127.0.0.1:{ports['agents']}")
        direct_rpc = direct_ch.unary_unary("/capgate.v1.Procedure/Invoke")
        invoke_rpc = gw_ch.unary_unary("/capgate.v1.CapabilityGateway/Invoke")
        proc_req = fixtures.procedure_request()
        inv_req = fixtures.invoke_request("bench.p3")
        http = httpx2.AsyncClient(base_url=f"http://127.0.0.1:{ports['mcp']}", timeout=10)
        headers = await _mcp_session(http, auth)
        tool_call = orjson.dumps(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": TOOL, "arguments": fixtures.INPUT},
            }
        )

        async def direct() -> bool:
            return bool(await direct_rpc(proc_req, timeout=10))

        async def governed() -> bool:
            answer = await invoke_rpc(inv_req, metadata=md, timeout=10)
            return gateway_pb2.ExecutionResult.FromString(answer).WhichOneof("outcome") == (
                "completed"
            )

        async def mcp() -> bool:
            response = await http.post(
                "/mcp", content=tool_call, headers={**headers, "content-type": "application/json"}
            )
            return response.status_code == 200 and b'"isError":false' in response.content

        sides: dict[str, Call] = {"direct": direct, "grpc": governed, "mcp": mcp}
        for side in sides.values():  # warm-up: channels, token cache, actor token
            for _ in range(50):
                if not await side():
                    raise SystemExit("a warm-up call failed")
        cells: dict[str, list[dict[str, Any]]] = {}
        for block in range(blocks):
            order = list(sides) if block % 2 == 0 else list(sides)[::-1]
            for rate in rates:
                for name in order:
                    result = await fixed_rate(sides[name], rate, seconds)
                    cells.setdefault(f"{name}@{rate:g}", []).append(result)
                    print(f"block {block} {name:<6} {rate:>5g}/s: {result}", flush=True)
        await http.aclose()
        await direct_ch.close()
        await gw_ch.close()
    finally:
        procs.stop_all(started, timeout_s=3.0)
        redis.stop()
    return summarize(cells, rates, seconds, blocks)


def summarize(
    cells: dict[str, list[dict[str, Any]]], rates: list[float], seconds: float, blocks: int
) -> dict[str, Any]:
    """Per column and rate: the median over blocks of p50 and p99, and the added latency
    (through capgate minus direct) per block, as its median and range."""
    out: dict[str, Any] = {
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds_per_cell": seconds,
        "blocks": blocks,
        "cells": cells,
        "added": {},
    }
    for rate in rates:
        direct = cells[f"direct@{rate:g}"]
        for name in ("grpc", "mcp"):
            through = cells[f"{name}@{rate:g}"]
            for q in ("p50_ms", "p99_ms"):
                added = [
                    t[q] - d[q]
                    for t, d in zip(through, direct, strict=True)
                    if t[q] is not None and d[q] is not None
                ]
                out["added"][f"{name}@{rate:g}_{q}"] = {
                    "median": round(statistics.median(added), 3) if added else None,
                    "min": round(min(added), 3) if added else None,
                    "max": round(max(added), 3) if added else None,
                    "direct": round(statistics.median(d[q] for d in direct), 3),
                    "through": round(statistics.median(t[q] for t in through), 3),
                }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="100,500")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--blocks", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    rates = [float(x) for x in args.rates.split(",") if x]
    result = asyncio.run(measure(rates, args.seconds, args.blocks))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for name, figure in result["added"].items():
        print(f"{name:<22} added {figure}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
