"""`python -m bench.run` (`make bench`): every scenario side by side in one run.

Starts Redis, the upstream, the bare proxy, OPA and four gateways (3-policy production shape,
audit off, strict audit, and 2 workers) as real processes on loopback, drives each scenario
from one load-generator process at 1, 16 and 64 calls in flight, and writes
bench/out/report.json and bench/out/report.md. Figures are reported against the budgets of
DESIGN §11, never asserted.

    BENCH_QUICK=1 python -m bench.run      # under 2 minutes
    python -m bench.run --tiny --out DIR   # a few dozen calls per scenario (the smoke test)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from bench import fixtures, procs, report, scenarios
from gateway.state.embedded import RedisProcess, free_port, redis_binary

OUT = Path(__file__).parent / "out"
GENERATOR = "Python grpc.aio + uvloop, one channel (HTTP/2 connection) unless stated"
OPA_GENERATOR = (
    "bench/goload (Go) for both: capgate Check over grpc-go (one HTTP/2 connection), OPA over "
    "net/http (HTTP/1.1 keep-alive, one connection per call in flight); same concurrency, count "
    "and time bounds"
)
OPA_GENERATOR_PY = (
    "bench/load.py for both: capgate Check over grpc.aio, OPA over a minimal asyncio HTTP/1.1 "
    "keep-alive client (one connection per call in flight)"
)


@dataclass(frozen=True)
class Mode:
    name: str
    levels: tuple[int, ...]
    seconds: float
    count: int
    warmup: int
    policy_seconds: float
    opa: bool
    install_opa: bool


MODES = {
    "full": Mode("full", (1, 16, 64), 8.0, 60_000, 300, 3.0, True, True),
    "quick": Mode("quick", (1, 16, 64), 1.0, 6_000, 50, 0.5, True, False),
    "tiny": Mode("tiny", (1, 64), 0.5, 30, 3, 0.05, False, False),
}


class Harness:
    """Runs jobs and keeps the figures (and the gateway's own per-stage figures)."""

    def __init__(
        self,
        mode: Mode,
        generator: procs.Generator,
        only: frozenset[str] = frozenset(),
        go: procs.Generator | None = None,
    ) -> None:
        self.mode = mode
        self.gen = generator
        self.go = go  # bench/goload: jobs whose spec says "generator": "go"
        self.only = only  # scenario names to run (empty: all)
        self.scenarios: dict[str, dict[str, Any]] = {}
        self.stage_us: dict[str, dict[str, float]] = {}

    def job(
        self,
        name: str,
        level: int,
        spec: dict[str, Any],
        *,
        server: tuple[int, ...] = (),
        metrics_url: str | None = None,
    ) -> None:
        """Run one job; `server` are the pids whose CPU time per call is recorded."""
        if self.only and name not in self.only:
            return
        gen = self.gen
        if spec.get("generator") == "go":
            if self.go is None:
                return  # no Go toolchain: the report notes why these rows are missing
            gen = self.go
        spec = {k: v for k, v in spec.items() if k != "generator"}
        m = self.mode
        job = {
            "concurrency": level,
            "count": m.count,
            "seconds": m.seconds,
            "warmup": m.warmup,
            **spec,
        }
        before = scrape(metrics_url) if metrics_url else None
        started = time.monotonic()
        cpu = [sum(procs.cpu_seconds(pid) for pid in server), gen.cpu_s()]
        result = gen.run(job)
        if not result.get("failed"):
            # Per call, counting the warm-up calls the CPU times also include.
            n = max(result["calls"] + result["errors"] + result.get("warmup_calls", 0), 1)
            server_s = sum(procs.cpu_seconds(pid) for pid in server) - cpu[0]
            result["server_cpu_us"] = round(server_s / n * 1e6, 1) if server else None
            result["client_cpu_us"] = round((gen.cpu_s() - cpu[1]) / n * 1e6, 1)
        row = self.scenarios.setdefault(name, {"levels": {}})
        row["levels"][str(level)] = result
        if before is not None and metrics_url and level == m.levels[0]:
            self.stage_us[name] = per_call_us(before, scrape(metrics_url))
        status = result.get("failed") or (
            f"p50 {result['p50_ms']:.2f} ms  p99 {result['p99_ms']:.2f} ms  "
            f"{result['calls_per_s']:.0f}/s  errors {result['errors']} bad {result['bad']}"
        )
        print(
            f"  {name:<18} {level:>3} in flight  {status}  ({time.monotonic() - started:.1f} s)",
            file=sys.stderr,
            flush=True,
        )


_SAMPLE = re.compile(r"^capgate_(stage|invocation)_duration_seconds_(sum|count)\{([^}]*)\} (\S+)$")


def scrape(url: str) -> dict[tuple[str, str], float]:
    """Per stage (and the whole pipeline): summed seconds and call counts from /metrics."""
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    out: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if not match:
            continue
        kind, field, labels, value = match.groups()
        name = re.search(r'stage="([^"]*)"', labels) if kind == "stage" else None
        key = (name.group(1) if name else "pipeline (stages 2-15)", field)
        out[key] = out.get(key, 0.0) + float(value)
    return out


def per_call_us(
    before: dict[tuple[str, str], float], after: dict[tuple[str, str], float]
) -> dict[str, float]:
    out: dict[str, float] = {}
    for (stage, field), total in after.items():
        if field != "sum":
            continue
        calls = after.get((stage, "count"), 0.0) - before.get((stage, "count"), 0.0)
        if calls > 0:
            out[stage] = round((total - before.get((stage, "sum"), 0.0)) / calls * 1e6, 1)
    return out


def machine() -> dict[str, Any]:
    model = "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "loadavg_before": _loadavg(),
        "loadavg_after": None,
    }


def _loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def versions(opa_binary: str | None) -> dict[str, str]:
    out = {}
    for dist in (
        "grpcio",
        "protobuf",
        "orjson",
        "uvloop",
        "cel-expr-python",
        "fastjsonschema",
        "redis",
        "opentelemetry-sdk",
    ):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    server = subprocess.run(
        [redis_binary(), "--version"], check=False, capture_output=True, text=True, timeout=30
    ).stdout
    out["redis-server"] = next(
        (w.removeprefix("v=") for w in server.split() if w.startswith("v=")), "unknown"
    )
    out["opa"] = procs.opa_version(opa_binary) if opa_binary else "not run"
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        check=False,
        capture_output=True,
        text=True,
        cwd=procs.ROOT,
        timeout=30,
    ).stdout
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        check=False,
        capture_output=True,
        text=True,
        cwd=procs.ROOT,
        timeout=30,
    ).stdout
    out["capgate"] = (head.strip() or "unknown") + (" + uncommitted changes" if dirty else "")
    return out


def policy_in_process(seconds: float) -> dict[str, Any]:
    """bench/bench_policy.py's measurement: 10 policies per request, both backends."""
    from bench import bench_policy  # noqa: PLC0415 - loads the CEL engines only here

    return {
        "input_bytes": len(bench_policy.RAW),
        "policies": 10,
        "budget_us": bench_policy.BUDGET_US,
        "cel-expr-python": bench_policy.measure("cel-expr-python", seconds, 50_000),
        "cel-python": bench_policy.measure("cel-python", seconds, 2_000),
    }


def _opa_skipped(mode: Mode, binary: str | None) -> str:
    if not mode.opa:
        return "tiny mode"
    if binary is None:
        return "no opa binary (run `make bench` once: it builds the pinned OPA into .tools/bin)"
    return ""


def run(mode: Mode, out_dir: Path, only: frozenset[str] = frozenset()) -> dict[str, Any]:
    notes: list[str] = []
    run_dir = Path(tempfile.mkdtemp(prefix="cgb-"))  # short: unix socket paths are limited
    opa_binary = None
    if mode.opa:
        try:
            opa_binary = procs.opa_binary(install=mode.install_opa)
        except (subprocess.SubprocessError, OSError) as exc:
            notes.append(f"OPA could not be built: {type(exc).__name__}")
    info = machine()
    started: list[procs.Proc] = []
    redis = RedisProcess(run_dir / "redis").start()
    generator: procs.Generator | None = None
    go_generator: procs.Generator | None = None
    try:
        up = procs.upstream(run_dir)
        started.append(up)
        upstream = f"127.0.0.1:{up.ready['port']}"
        secret, hmac_key = fixtures.new_secret(), fixtures.new_secret()
        prom = {name: free_port() for name in ("a", "off", "strict")}

        def config(name: str, audit: str, *, workers: bool = False) -> Path:
            gw_dir = run_dir / name
            gw_dir.mkdir()
            cfg = fixtures.gateway_config(
                run_dir=gw_dir,
                upstream=upstream,
                redis_url=redis.url,
                secret=secret,
                hmac_key=hmac_key,
                audit=audit,
                prometheus=None if workers else f"127.0.0.1:{prom[name]}",
                # Fixed ports let every worker bind at once (port 0 makes them take turns).
                ports=(free_port(), free_port()) if workers else (0, 0),
            )
            return fixtures.write_config(gw_dir / "gateway.yaml", cfg)

        env = procs.gateway_env(run_dir)
        pending = {
            "a": procs.gateway(run_dir, "gw-a", config("a", "best_effort"), env=env),
            "off": procs.gateway(run_dir, "gw-off", config("off", "off"), env=env),
            "strict": procs.gateway(run_dir, "gw-strict", config("strict", "strict"), env=env),
            "w2": procs.gateway(
                run_dir, "gw-w2", config("w2", "best_effort", workers=True), workers=2, env=env
            ),
        }
        started += [p.proc for p in pending.values()]  # stopped even if one fails to start
        px = procs.proxy(run_dir, upstream)
        started.append(px)
        gws = {name: p.wait() for name, p in pending.items()}
        opa_proc, opa_port = None, None
        if opa_binary is not None:
            opa_proc, opa_port = procs.opa(run_dir, opa_binary, fixtures.HERE / "opa")
            started.append(opa_proc)
        generator = procs.Generator(run_dir)
        go_generator, why = procs.go_generator(run_dir)
        if go_generator is None:
            notes.append(f"Go generator rows skipped: {why}")
        h = Harness(mode, generator, only, go_generator)
        targets = scenarios.Targets(
            upstream=upstream,
            upstream_pid=up.popen.pid,
            proxy=f"127.0.0.1:{px.ready['port']}",
            proxy_pid=px.popen.pid,
            gateways={
                name: {
                    "agents": gw.ready["ports"]["agents"],
                    "admin": gw.ready["ports"]["admin"],
                    # With --workers the supervisor only waits: its workers do the work.
                    "pids": tuple(gw.ready.get("pids", [gw.popen.pid])),
                    "metrics": f"http://127.0.0.1:{prom[name]}/metrics" if name in prom else None,
                }
                for name, gw in gws.items()
            },
            local_socket=str(run_dir / "a" / "capgate.sock"),
            opa_port=opa_port,
            opa_pid=opa_proc.popen.pid if opa_proc else None,
            caller_md=fixtures.bearer(secret, fixtures.AGENT, "capgate"),
            admin_md=fixtures.bearer(secret, fixtures.APPROVER, "capgate-admin"),
        )
        for level in mode.levels:
            scenarios.run_level(h.job, targets, level, last=level == mode.levels[-1])
        scenarios.run_workers(h.job, targets, mode.levels[-1])
        print("policies in-process", file=sys.stderr, flush=True)
        policy = policy_in_process(mode.policy_seconds if not only else 0.05)
    finally:
        for gen in (generator, go_generator):
            if gen is not None:
                gen.stop()
        procs.stop_all(started, timeout_s=3.0)
        redis.stop()
    info["loadavg_after"] = _loadavg()
    notes += NOTES
    raw = {
        "mode": mode.name,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": info,
        "versions": versions(opa_binary),
        "settings": {
            "levels": list(mode.levels),
            "seconds": mode.seconds,
            "count": mode.count,
            "warmup": mode.warmup,
            "generator": GENERATOR,
            "opa_generator": OPA_GENERATOR,
            "opa_generator_python": OPA_GENERATOR_PY,
        },
        "scenarios": {
            k: {"description": report.DESCRIPTIONS.get(k, ""), **v} for k, v in h.scenarios.items()
        },
        "stage_us": h.stage_us,
        "policy": policy,
        "opa_skipped": _opa_skipped(mode, opa_binary),
        "notes": notes,
    }
    if only:
        raw["notes"].append(f"partial run: only {', '.join(sorted(only))}")
    result = report.build(raw)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "report.json").write_text(json.dumps(result, indent=2) + "\n")
    (out_dir / "report.md").write_text(report.markdown(result))
    return result


NOTES = [
    "Client, gateway, upstream and Redis share the same cores; the load average above is the "
    "machine's (other work on it shows there). CPU µs per call (server and client columns) "
    "are the processes' own CPU time divided by the calls, warm-up included: they depend far "
    "less on that load than latency does.",
    "Tracing is on but unsampled (OTEL_TRACES_SAMPLER=parentbased_always_off); audit events "
    "are batched to a Redis stream; Redis runs with appendonly yes, appendfsync always (the "
    "approval store's durability setting).",
    "Governed scenarios reuse one JWT per connection: the gateway verifies it once and then "
    "hits its verified-token cache (DESIGN §11).",
]


def main(argv: list[str] | None = None, *, write: Callable[[str], object] = print) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="as BENCH_QUICK=1")
    parser.add_argument("--tiny", action="store_true", help="a few dozen calls per scenario")
    parser.add_argument("--out", type=Path, default=OUT, help="where report.json/.md go")
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated scenario names (e.g. proxy,governed_p3): a partial run for "
        "experiments; its report says so",
    )
    parser.add_argument("--levels", default="", help="comma-separated concurrency levels")
    args = parser.parse_args(argv)
    name = (
        "tiny" if args.tiny else "quick" if args.quick or os.environ.get("BENCH_QUICK") else "full"
    )
    mode = MODES[name]
    if args.levels:
        mode = replace(mode, levels=tuple(int(x) for x in args.levels.split(",")))
    only = frozenset(x for x in args.only.split(",") if x)
    started = time.monotonic()
    result = run(mode, args.out, only)
    write(report.markdown(result))
    write(f"wrote {args.out / 'report.json'} and report.md in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
