"""`python -m bench.profile`: where a governed call spends its time, function by function.

Runs the production-shaped gateway in this process under cProfile (upstream, Redis and the load
generator are separate processes), drives `bench.p3` (3 policies, validation, audit to Redis)
for a fixed time, and writes bench/out/profile.txt (and the raw profile.pstats): functions
ranked by their own time and by cumulative time, each as µs per governed call. cProfile inflates
pure-Python call overhead and counts every resumption of a coroutine as a call; use the ranking,
and take absolute µs from bench.micro and report.json's per-stage figures (unprofiled).

    python -m bench.profile [--seconds 10] [--concurrency 16] [--summary] [--bare]
                            [--capability bench.limited] [--audit strict]

`--audit strict` runs the same gateway with `audit.strict: true` (`bench.rounds --feature
audit_strict`). `--bare` profiles the gateway's skeleton instead (`bench.rounds --bare`: one
capability with nothing to govern, no audit sink, no tracing) into bench/out/profile_bare.txt.

The first table is the per-stage breakdown `make bench` prints: own time summed by code area
(each pipeline stage module under gateway/pipeline/stages/, the gateway packages such as
gateway/audit and gateway/upstream, policy/, grpc, redis-py, OpenTelemetry, the event loop, the
standard library), so every µs is counted once and the areas add up to the profiled call.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import cProfile
import io
import os
import pstats
import tempfile
from pathlib import Path

import uvloop

from bench import fixtures, procs, rounds
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess

OUT = Path(__file__).parent / "out" / "profile.txt"
OUT_BARE = OUT.with_name("profile_bare.txt")  # --bare: the skeleton's, beside the governed one


_STDLIB = Path(os.__file__).resolve().parent
_ROOT = Path(__file__).resolve().parent.parent
_BUILTIN_AREAS = (  # C functions (path "~"), told apart by what they are a method of
    ("grpc", "grpc (C core, Cython)"),
    ("cel", "CEL native"),
    ("Ed25519", "signing (cryptography)"),
    ("EllipticCurve", "signing (cryptography)"),
    ("orjson", "orjson"),
    ("select", "event loop (uvloop, selectors)"),
    ("uvloop", "event loop (uvloop, selectors)"),
)


def area(path: str, func: str) -> str:
    """The code area a profiled function belongs to: a pipeline stage module, a gateway
    package, a third-party distribution, the event loop, or the standard library."""
    if path == "<string>":  # fastjsonschema compiles validators from source at load
        return "schema validation (fastjsonschema)"
    if path == "~":
        for needle, name in _BUILTIN_AREAS:
            if needle in func:
                return name
        return "C builtins (other)"
    where = Path(path).resolve()
    parts = where.parts
    if "site-packages" in parts:
        package = parts[parts.index("site-packages") + 1].split(".")[0]
        if package in ("grpc", "uvloop"):
            return {"grpc": "grpc (Python layer)", "uvloop": "event loop (uvloop, selectors)"}[
                package
            ]
        return package
    try:
        rel = where.relative_to(_ROOT)
    except ValueError:
        rel = None
    if rel is not None and rel.parts and rel.parts[0] in ("gateway", "policy", "capgate", "bench"):
        if rel.parts[:2] == ("gateway", "stages"):
            return f"stage: gateway/pipeline/stages/{rel.stem}"
        if len(rel.parts) > 2:
            return "/".join(rel.parts[:2])
        return rel.with_suffix("").as_posix()
    try:
        std = where.relative_to(_STDLIB)
        return "asyncio (stdlib)" if std.parts and std.parts[0] == "asyncio" else "stdlib (other)"
    except ValueError:
        return "other"


def breakdown(stats: pstats.Stats, calls: int) -> str:
    """Own CPU time per governed call, summed by code area (each µs counted once; a generic C
    builtin is charged to its callers' areas)."""
    totals: dict[str, float] = {}
    for (path, _line, func), (_cc, _n, tottime, _cum, callers) in stats.stats.items():  # type: ignore[attr-defined]
        key = area(path, func)
        if key == "C builtins (other)" and callers:
            # A generic builtin (isinstance, dict.get, hmac_digest, ...) is charged to the areas
            # that called it, in proportion to the own time each caller's calls took.
            for (c_path, _c_line, c_func), caller in callers.items():
                owner = area(c_path, c_func)
                totals[owner] = totals.get(owner, 0.0) + caller[2]
            continue
        totals[key] = totals.get(key, 0.0) + tottime
    whole = sum(totals.values()) or 1.0
    out = [f"{'own µs/call':>12} {'share':>6}  area"]
    for key, seconds in sorted(totals.items(), key=lambda kv: -kv[1]):
        out.append(f"{seconds / calls * 1e6:12.1f} {seconds / whole:6.1%}  {key}")
    out.append(f"{whole / calls * 1e6:12.1f} {1:6.0%}  total (cProfile inflates pure-Python calls)")
    return "\n".join(out)


def _table(stats: pstats.Stats, key: str, calls: int, limit: int) -> str:
    """Top `limit` functions by `key` ('tottime' or 'cumtime') in µs per governed call."""
    rows = []
    for (path, line, func), (_cc, ncalls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        value = tottime if key == "tottime" else cumtime
        rows.append((value, ncalls, tottime, cumtime, f"{Path(path).name}:{line}({func})"))
    rows.sort(reverse=True)
    out = [f"{'own µs/call':>12} {'cum µs/call':>12} {'calls/call':>10}  function"]
    for _value, ncalls, tottime, cumtime, where in rows[:limit]:
        out.append(
            f"{tottime / calls * 1e6:12.1f} {cumtime / calls * 1e6:12.1f} "
            f"{ncalls / calls:10.2f}  {where}"
        )
    return "\n".join(out)


async def profile(
    seconds: float,
    concurrency: int,
    bare: bool = False,
    capability: str = "bench.p3",
    audit: str = "best_effort",
) -> str:
    run_dir = Path(tempfile.mkdtemp(prefix="cgp-"))
    redis = RedisProcess(run_dir / "redis").start()
    up = procs.upstream(run_dir)
    generator = procs.Generator(run_dir)
    os.environ.update(procs.gateway_env(run_dir))
    secret = fixtures.new_secret()
    settings = fixtures.gateway_config(
        run_dir=run_dir,
        upstream=f"127.0.0.1:{up.ready['port']}",
        redis_url=redis.url,
        secret=secret,
        hmac_key=fixtures.new_secret(),
        audit=audit,
    )
    if bare:  # the gateway's skeleton (bench.rounds --bare): nothing to govern
        settings, capability = rounds.bare_config(settings), rounds.BARE_CAPABILITY
    config = fixtures.write_config(run_dir / "gateway.yaml", settings)
    gw = await start(load_settings(config))
    if capability == fixtures.GRANTED:  # a standing grant covers it (ADR 0038)
        await fixtures.create_grant_async(redis.url)
    try:
        job = {
            "kind": "unary",
            "target": f"127.0.0.1:{gw.ports()['agents']}",
            "method": "/capgate.v1.CapabilityGateway/Invoke",
            "request": base64.b64encode(fixtures.invoke_request(capability)).decode(),
            "metadata": fixtures.bearer(secret, fixtures.AGENT, "capgate"),
            "check": "invoke",
            "expect": "completed",
            "concurrency": concurrency,
        }
        await asyncio.to_thread(generator.run, {**job, "count": 2000, "seconds": 3})  # warm-up
        profiler = cProfile.Profile()
        profiler.enable()
        result = await asyncio.to_thread(generator.run, {**job, "count": 10**6, "seconds": seconds})
        profiler.disable()
    finally:
        generator.stop()
        await gw.stop(0.5)
        up.stop()
        redis.stop()
    calls = int(result["calls"])
    if calls == 0 or result.get("errors") or result.get("bad"):
        raise SystemExit(f"profile run failed: {result}")
    out = OUT_BARE if bare else OUT
    profiler.dump_stats(str(out.with_suffix(".pstats")))  # for pstats/snakeviz digging
    stats = pstats.Stats(profiler, stream=io.StringIO())
    return "\n".join(
        [
            f"{'the skeleton (--bare)' if bare else 'governed'} Invoke ({capability}, "
            f"audit {audit}), "
            f"{concurrency} in flight, {calls} calls in "
            f"{result['elapsed_s']} s under cProfile ({result['calls_per_s']} calls/s, "
            f"p50 {result['p50_ms']} ms); figures are per call",
            "",
            "== per-stage breakdown: own time by code area ==",
            breakdown(stats, calls),
            "",
            "== by own time ==",
            _table(stats, "tottime", calls, 45),
            "",
            "== by cumulative time ==",
            _table(stats, "cumtime", calls, 70),
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--summary", action="store_true", help="print only the per-stage breakdown (make bench)"
    )
    parser.add_argument(
        "--bare", action="store_true", help="profile the gateway's skeleton (bench.rounds --bare)"
    )
    parser.add_argument(
        "--capability", default="bench.p3", help="the capability driven (e.g. bench.limited)"
    )
    parser.add_argument(
        "--audit",
        default="best_effort",
        choices=("best_effort", "strict"),
        help="the audit mode (strict: the invocation waits for capability.started in Redis)",
    )
    args = parser.parse_args()
    out = OUT_BARE if args.bare else OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    text = uvloop.run(
        profile(args.seconds, args.concurrency, args.bare, args.capability, args.audit)
    )
    out.write_text(text)
    print(text.split("\n\n== by own time ==")[0] if args.summary else text)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
