"""`python -m bench.rounds`: the three governed/proxy ratios from interleaved rounds.

On a shared machine one side-by-side pair can land on either side of someone else's burst, so
this runs R rounds of (governed, proxy) pairs — governed first in even rounds, proxy first in
odd ones — at 1 and at 64 calls in flight, with bench/load.py (the project's generator) and,
when scripts/ghz.sh can provide it, with ghz (an independent Go generator). Each round gives one
ratio per figure; the report is the median and the range over the rounds:

- `governed_vs_proxy_cpu`: gateway CPU per governed call / the bare proxy's, at 64 in flight;
- `governed_vs_proxy_throughput`: calls/s at 64 in flight, governed / proxy;
- `governed_vs_proxy_p50`: p50 at 1 in flight, governed / proxy.

One Redis, one upstream, the bare proxy and one production-shaped gateway (3 policies, audit
batched to Redis, tracing on but unsampled), as in `bench.run`. The generators run at the same
nice level as the servers. Writes bench/out/rounds.json. Figures are reported, never asserted.

    python -m bench.rounds --rounds 7 --seconds 3
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from copy import deepcopy
from pathlib import Path
from typing import Any

from bench import fixtures, procs, scenarios
from gateway.state.embedded import RedisProcess

OUT = Path(__file__).parent / "out"
PROTO = procs.ROOT / "proto"
GHZ_SCRIPT = procs.ROOT / "scripts" / "ghz.sh"
GATEWAY_PROTO = "capgate/v1/gateway.proto"
PROCEDURE_PROTO = "capgate/v1/procedure.proto"
BARE_CAPABILITY = "bench.bare"
# Feature rows `--feature` can interleave with the governed call (bench/fixtures.py): the
# capability each invokes on gateway a, or "describe" for Describe.
FEATURES = {
    "limited": "bench.limited",
    "cache_miss": "bench.cached_miss",
    "hook_pre": "bench.hooked",
    "describe": "describe",
    # A require-approval call a standing grant covers (ADR 0038): the grant is created first.
    "grant": fixtures.GRANTED,
    # bench.p3 on a second gateway that differs from a only in `audit.strict: true` (the
    # invocation waits for capability.started in Redis); its own processes' CPU per call.
    "audit_strict": "audit_strict",
}


def ghz_binary() -> str | None:
    try:
        done = subprocess.run(
            ["bash", str(GHZ_SCRIPT)], check=True, capture_output=True, text=True, timeout=900
        )
    except (subprocess.SubprocessError, OSError):
        return None
    return done.stdout.strip().splitlines()[-1] or None


class Ghz:
    """One ghz run per job; CPU of the server pids is read around it like Harness.job does."""

    def __init__(self, binary: str, run_dir: Path) -> None:
        self.binary = binary
        self.run_dir = run_dir

    def run(
        self,
        *,
        target: str,
        call: str,
        proto: str,
        request: bytes,
        metadata: dict[str, str],
        concurrency: int,
        seconds: float,
        count: int,
    ) -> dict[str, Any]:
        data = self.run_dir / f"ghz-{call}.bin"
        data.write_bytes(request)
        argv = [
            self.binary,
            "--insecure",
            "--proto",
            str(PROTO / proto),
            "--import-paths",
            str(PROTO),
            "--call",
            call,
            "--binary-file",
            str(data),
            "--concurrency",
            str(concurrency),
            "--connections",
            "1",
            "--cpus",
            "1",
            "--total",
            str(count),
            "--duration",
            f"{seconds}s",
            "--format",
            "json",
        ]
        if metadata:
            argv += ["--metadata", json.dumps(metadata)]
        done = subprocess.run([*argv, target], check=False, capture_output=True, timeout=600)
        if done.returncode != 0 and not done.stdout:
            return {"failed": done.stderr.decode(errors="replace")[-300:]}
        out = json.loads(done.stdout)
        dist = {round(d["percentage"]): d["latency"] for d in out.get("latencyDistribution") or []}
        codes = out.get("statusCodeDistribution") or {}
        ok = int(codes.get("OK", 0))
        return {
            "calls": ok,
            "errors": int(out.get("count", 0)) - ok,
            "calls_per_s": float(out.get("rps", 0.0)),
            "p50_ms": dist.get(50, 0) / 1e6,
            "p99_ms": dist.get(99, 0) / 1e6,
        }


def _cpu(pids: tuple[int, ...]) -> float:
    return sum(procs.cpu_seconds(pid) for pid in pids)


def context_switches(pids: tuple[int, ...]) -> int:
    """Voluntary and involuntary context switches so far, over every thread of `pids`."""
    total = 0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                status = (task / "status").read_text()
            except OSError:  # the thread ended between the listing and the read
                continue
            for line in status.splitlines():
                if "ctxt_switches:" in line:  # voluntary_ and nonvoluntary_
                    total += int(line.split(":", 1)[1])
    return total


def measure(run: Callable[[], dict[str, Any]], pids: tuple[int, ...]) -> dict[str, Any]:
    before, switches = _cpu(pids), context_switches(pids)
    result: dict[str, Any] = run()
    if result.get("failed"):
        return result
    n = max(result["calls"] + result["errors"] + result.get("warmup_calls", 0), 1)
    result["server_cpu_us"] = round((_cpu(pids) - before) / n * 1e6, 1)
    result["context_switches_per_call"] = round((context_switches(pids) - switches) / n, 2)
    return result


def _summary(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
        "n": len(values),
    }


def bare_config(config: dict[str, Any]) -> dict[str, Any]:
    """The gateway's skeleton: the same listeners, upstream and auth, with nothing to govern.
    One capability, `bench.bare`, with no policy, no output schema, no redaction and the
    loosest input schema a procedure upstream allows; no audit sink (the events are still
    built: nothing receives them); no tracing. What it costs over the bare proxy is what the
    request path costs before any governance."""
    out = deepcopy(config)
    out["audit"]["sinks"] = []
    out["telemetry"] = {"tracing": False, "otlp": False}
    out["capabilities"].append(
        {
            "id": BARE_CAPABILITY,
            "description": "The skeleton's capability: nothing to govern.",
            "upstream": "bench",
            "side_effect": "read",
            "risk": "low",
            "expose": {"agent": True, "direct": True},
            "input_schema": {"type": "object"},
            "policies": [],
        }
    )
    return out


def rounds(
    n_rounds: int,
    seconds: float,
    use_ghz: bool,
    gateway_env: dict[str, str] | None = None,
    b_env: dict[str, str] | None = None,
    bare: bool = False,
    features: tuple[str, ...] = (),
    levels: tuple[int, ...] = (1, 64),
    limits_redis: bool = False,
) -> dict[str, Any]:
    """`features`: also run these feature rows (FEATURES) on gateway a, interleaved with the
    governed call on the same gateway, so each gets `<feature>_vs_governed` ratios.
    `limits_redis`: give limit state its own Redis with `appendfsync everysec` (ADR 0037).
    `b_env`: also run a second, otherwise identical gateway with this extra environment
    (side `governed_b`), interleaved with the others: an A/B of a runtime setting.
    `bare`: also run the gateway's skeleton (`bare_config`, side `bare`), so the report splits
    what the gateway costs over the proxy into the request path and the governance."""
    run_dir = Path(tempfile.mkdtemp(prefix="cgr-"))
    started: list[procs.Proc] = []
    redis = RedisProcess(run_dir / "redis").start()
    own = RedisProcess(run_dir / "redis-limits", appendfsync="everysec") if limits_redis else None
    if own is not None:
        own.start()
    gen: procs.Generator | None = None
    pairs: dict[str, list[dict[str, Any]]] = {"load": [], "ghz": []}
    try:
        up = procs.upstream(run_dir)
        started.append(up)
        upstream = f"127.0.0.1:{up.ready['port']}"
        secret, hmac_key = fixtures.new_secret(), fixtures.new_secret()

        def config(gw_dir: Path, audit: str = "best_effort") -> dict[str, Any]:
            return fixtures.gateway_config(
                run_dir=gw_dir,  # each gateway's own unix socket
                upstream=upstream,
                redis_url=redis.url,
                secret=secret,
                hmac_key=hmac_key,
                audit=audit,
                prometheus=None,
                ports=(0, 0),
                limits_redis_url=own.url if own is not None else None,
            )

        def spawn(
            name: str, make: Callable[[Path], dict[str, Any]], env: dict[str, str]
        ) -> procs.Pending:
            gw_dir = run_dir / name
            gw_dir.mkdir()
            pending = procs.gateway(
                run_dir,
                f"gw-{name}",
                fixtures.write_config(gw_dir / "gateway.yaml", make(gw_dir)),
                env={**procs.gateway_env(run_dir), **(gateway_env or {}), **env},
            )
            started.append(pending.proc)
            return pending

        pending = spawn("a", config, {})
        pending_b = spawn("b", config, b_env) if b_env is not None else None
        pending_bare = (
            spawn("bare", lambda gw_dir: bare_config(config(gw_dir)), {}) if bare else None
        )
        pending_strict = (
            spawn("strict", lambda gw_dir: config(gw_dir, "strict"), {})
            if "audit_strict" in features
            else None
        )
        px = procs.proxy(run_dir, upstream)
        started.append(px)
        gw = pending.wait()
        if "grant" in features:
            fixtures.create_grant(redis.url)
        gen = procs.Generator(run_dir)
        ghz = None
        if use_ghz:
            binary = ghz_binary()
            ghz = Ghz(binary, run_dir) if binary else None
        gw_pids = tuple(gw.ready.get("pids", [gw.popen.pid]))
        agents = f"127.0.0.1:{gw.ready['ports']['agents']}"
        md = fixtures.bearer(secret, fixtures.AGENT, "capgate")
        proxy_addr = f"127.0.0.1:{px.ready['port']}"
        proc_req = fixtures.procedure_request()
        inv_req = fixtures.invoke_request("bench.p3")
        sides = {
            "governed": (
                scenarios.invoke(agents, "bench.p3", md),
                gw_pids,
                (agents, "capgate.v1.CapabilityGateway.Invoke", GATEWAY_PROTO, inv_req, md),
            ),
            "proxy": (
                scenarios.unary(proxy_addr, scenarios.PROCEDURE, proc_req, "procedure"),
                (px.popen.pid,),
                (proxy_addr, "capgate.v1.Procedure.Invoke", PROCEDURE_PROTO, proc_req, []),
            ),
        }
        if pending_b is not None:
            gw_b = pending_b.wait()
            agents_b = f"127.0.0.1:{gw_b.ready['ports']['agents']}"
            sides["governed_b"] = (
                scenarios.invoke(agents_b, "bench.p3", md),
                tuple(gw_b.ready.get("pids", [gw_b.popen.pid])),
                (agents_b, "capgate.v1.CapabilityGateway.Invoke", GATEWAY_PROTO, inv_req, md),
            )
        if pending_bare is not None:
            gw_bare = pending_bare.wait()
            agents_bare = f"127.0.0.1:{gw_bare.ready['ports']['agents']}"
            bare_req = fixtures.invoke_request(BARE_CAPABILITY)
            sides["bare"] = (
                scenarios.invoke(agents_bare, BARE_CAPABILITY, md),
                tuple(gw_bare.ready.get("pids", [gw_bare.popen.pid])),
                (agents_bare, "capgate.v1.CapabilityGateway.Invoke", GATEWAY_PROTO, bare_req, md),
            )
        for feature in features:
            cap = FEATURES[feature]
            if cap == "audit_strict":
                assert pending_strict is not None
                gw_strict = pending_strict.wait()
                agents_strict = f"127.0.0.1:{gw_strict.ready['ports']['agents']}"
                sides[feature] = (
                    scenarios.invoke(agents_strict, "bench.p3", md),
                    tuple(gw_strict.ready.get("pids", [gw_strict.popen.pid])),
                    (
                        agents_strict,
                        "capgate.v1.CapabilityGateway.Invoke",
                        GATEWAY_PROTO,
                        inv_req,
                        md,
                    ),
                )
                continue
            if cap == "describe":
                spec = scenarios.unary(
                    agents,
                    "/capgate.v1.CapabilityGateway/Describe",
                    fixtures.describe_request(),
                    "describe",
                    fixtures.CATALOG_SIZE,
                    md,
                )
                ghz_call = "capgate.v1.CapabilityGateway.Describe"
                ghz_req = fixtures.describe_request()
            else:
                spec = scenarios.invoke(agents, cap, md)
                ghz_call = "capgate.v1.CapabilityGateway.Invoke"
                ghz_req = fixtures.invoke_request(cap)
            sides[feature] = (spec, gw_pids, (agents, ghz_call, GATEWAY_PROTO, ghz_req, md))
        names = list(sides)
        for r in range(n_rounds):
            order = names if r % 2 == 0 else names[::-1]
            for tool in ("load", "ghz"):
                if tool == "ghz" and ghz is None:
                    continue
                pair: dict[str, Any] = {}
                for level in levels:
                    for side in order:
                        spec, pids, g = sides[side]
                        if tool == "load":
                            job = {
                                "concurrency": level,
                                "count": 200_000,
                                "seconds": seconds,
                                "warmup": 100,
                                **spec,
                            }
                            res = measure(functools.partial(gen.run, job), pids)
                        else:
                            assert ghz is not None
                            target, call, proto, req, meta = g
                            res = measure(
                                functools.partial(
                                    ghz.run,
                                    target=target,
                                    call=call,
                                    proto=proto,
                                    request=req,
                                    metadata=dict(meta),
                                    concurrency=level,
                                    seconds=seconds,
                                    count=200_000,
                                ),
                                pids,
                            )
                        pair[f"{side}_{level}"] = res
                        print(
                            f"round {r} {tool:<4} {side:<8} {level:>2}: "
                            f"p50 {res.get('p50_ms', 0):.3f} ms {res.get('calls_per_s', 0):.0f}/s "
                            f"cpu {res.get('server_cpu_us')} µs err {res.get('errors')} "
                            f"{res.get('failed', '')}",
                            file=sys.stderr,
                            flush=True,
                        )
                pairs[tool].append(pair)
    finally:
        if gen is not None:
            gen.stop()
        procs.stop_all(started, timeout_s=3.0)
        redis.stop()
        if own is not None:
            own.stop()

    def ratio(
        p: dict[str, Any], key: str, level: int, a: str = "governed", b: str = "proxy"
    ) -> float | None:
        g, x = p.get(f"{a}_{level}", {}), p.get(f"{b}_{level}", {})
        if g.get("failed") or x.get("failed") or not g.get(key) or not x.get(key):
            return None
        return float(g[key]) / float(x[key])

    out: dict[str, Any] = {
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rounds": n_rounds,
        "seconds_per_cell": seconds,
        "gateway_env": gateway_env or {},
        "b_env": b_env,
        "bare": bare,
        "limits_redis": limits_redis,
    }
    for tool, ps in pairs.items():
        if not ps:
            continue
        figures: dict[str, Any] = {}
        for feature in features:
            for key, level in (("server_cpu_us", 1), ("p50_ms", 1), ("server_cpu_us", 64)):
                if level not in levels:
                    continue
                vals = [
                    v for p in ps if (v := ratio(p, key, level, feature, "governed")) is not None
                ]
                figures[f"{feature}_vs_governed_{key}_{level}"] = _summary(vals)
        for name, key, level in (
            ("governed_vs_proxy_cpu", "server_cpu_us", 64),
            ("governed_vs_proxy_throughput", "calls_per_s", 64),
            ("governed_vs_proxy_p50", "p50_ms", 1),
            ("governed_vs_proxy_cpu_1", "server_cpu_us", 1),
        ):
            if level not in levels:
                continue
            vals = [v for p in ps if (v := ratio(p, key, level)) is not None]
            figures[name] = _summary(vals)
            if b_env is not None:
                b_name = name.replace("governed_vs_proxy", "b_vs_governed")
                vals = [
                    v
                    for p in ps
                    if (v := ratio(p, key, level, "governed_b", "governed")) is not None
                ]
                figures[b_name] = _summary(vals)
            if bare:
                vals = [v for p in ps if (v := ratio(p, key, level, "bare", "proxy")) is not None]
                figures[name.replace("governed_vs_proxy", "bare_vs_proxy")] = _summary(vals)
                vals = [
                    v for p in ps if (v := ratio(p, key, level, "governed", "bare")) is not None
                ]
                figures[name.replace("governed_vs_proxy", "governed_vs_bare")] = _summary(vals)
        for side in names:
            for level in levels:
                for key in ("server_cpu_us", "calls_per_s", "p50_ms", "context_switches_per_call"):
                    vals = [
                        float(p[f"{side}_{level}"][key])
                        for p in ps
                        if not p.get(f"{side}_{level}", {}).get("failed")
                        and p.get(f"{side}_{level}", {}).get(key) is not None
                    ]
                    figures[f"{side}_{level}_{key}"] = _summary(vals)
        out[tool] = {"ratios": figures, "raw": ps}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--no-ghz", action="store_true")
    parser.add_argument("--out", type=Path, default=OUT / "rounds.json")
    parser.add_argument(
        "--gateway-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra environment for the gateway (e.g. GRPC_EXPERIMENTS=-event_engine_listener)",
    )
    parser.add_argument(
        "--b-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="also run a second gateway with this environment (side governed_b): an A/B",
    )
    parser.add_argument(
        "--bare",
        action="store_true",
        help="also run the gateway's skeleton (side bare): nothing to govern, no audit, no tracing",
    )
    parser.add_argument(
        "--feature",
        action="append",
        default=[],
        choices=sorted(FEATURES),
        help="also run this feature row on gateway a, interleaved with governed (repeatable)",
    )
    parser.add_argument(
        "--levels", default="1,64", help="comma-separated calls in flight (default 1,64)"
    )
    parser.add_argument(
        "--limits-redis",
        action="store_true",
        help="limit state in its own Redis with appendfsync everysec (redis.limits_url)",
    )
    args = parser.parse_args(argv)
    env = dict(item.split("=", 1) for item in args.gateway_env)
    b_env = dict(item.split("=", 1) for item in args.b_env) if args.b_env else None
    levels = tuple(int(x) for x in args.levels.split(",") if x)
    result = rounds(
        args.rounds,
        args.seconds,
        not args.no_ghz,
        env,
        b_env,
        args.bare,
        tuple(args.feature),
        levels,
        args.limits_redis,
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for tool in ("load", "ghz"):
        if tool in result:
            for name, s in result[tool]["ratios"].items():
                if name.startswith(("governed_vs", "b_vs", "bare_vs")) or "_vs_governed_" in name:
                    print(f"{tool:<4} {name:<30} {s['median']} ({s['min']}-{s['max']}, n={s['n']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
