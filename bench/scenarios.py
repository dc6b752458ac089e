"""The scenarios: what each job sends where, and the order they run in.

Per level of concurrency the scenarios run back to back (direct, proxy, then the governed ones),
so the ratios compare figures taken seconds apart under the same machine load. Every job names
the server processes whose CPU time per call is recorded next to its latency.
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench import fixtures

INVOKE = "/capgate.v1.CapabilityGateway/Invoke"
PROCEDURE = "/capgate.v1.Procedure/Invoke"
DECISION_ALLOW = 1  # capgate.v1.Decision


@dataclass(frozen=True)
class Targets:
    """Where the running processes listen, and their pids."""

    upstream: str
    upstream_pid: int
    proxy: str
    proxy_pid: int
    gateways: dict[str, dict[str, Any]]  # name -> {"agents", "admin", "pids", "metrics"}
    local_socket: str
    opa_port: int | None
    opa_pid: int | None
    caller_md: list[tuple[str, str]]
    admin_md: list[tuple[str, str]]


Job = Callable[..., None]  # Harness.job(name, level, spec, *, server=..., metrics_url=...)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def invoke(
    target: str, capability: str, metadata: list[tuple[str, str]], **extra: Any
) -> dict[str, Any]:
    return {
        "kind": "unary",
        "target": target,
        "method": INVOKE,
        "request": _b64(fixtures.invoke_request(capability)),
        "metadata": metadata,
        "check": "invoke",
        "expect": "completed",
        **extra,
    }


def unary(
    target: str,
    method: str,
    request: bytes,
    check: str,
    expect: Any = None,
    metadata: list[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    return {
        "kind": "unary",
        "target": target,
        "method": method,
        "request": _b64(request),
        "metadata": metadata or [],
        "check": check,
        "expect": expect,
    }


def run_level(job: Job, t: Targets, level: int, *, last: bool) -> None:
    """Every scenario at one concurrency level."""
    print(f"{level} in flight", file=sys.stderr, flush=True)
    a = t.gateways["a"]
    agents = f"127.0.0.1:{a['agents']}"
    md = t.caller_md
    proc_req = fixtures.procedure_request()
    job(
        "direct",
        level,
        unary(t.upstream, PROCEDURE, proc_req, "procedure"),
        server=(t.upstream_pid,),
    )
    job("proxy", level, unary(t.proxy, PROCEDURE, proc_req, "procedure"), server=(t.proxy_pid,))
    for name, cap in (
        ("governed_p3", "bench.p3"),
        ("governed_p0", "bench.p0"),
        ("governed_p10", "bench.p10"),
    ):
        job(name, level, invoke(agents, cap, md), server=a["pids"], metrics_url=a["metrics"])
    # The result cache beside governed_p3 (same policies, validation, audit): hit and miss.
    for name, cap in (("cache_hit_p3", "bench.cached"), ("cache_miss_p3", "bench.cached_miss")):
        job(name, level, invoke(agents, cap, md), server=a["pids"], metrics_url=a["metrics"])
    # One pre-hook beside governed_p3 (same policies, validation, audit; docs/hooks.md).
    job(
        "hook_pre_p3",
        level,
        invoke(agents, "bench.hooked", md),
        server=a["pids"],
        metrics_url=a["metrics"],
    )
    # Two limits beside governed_p3 (same policies, validation, audit; docs/limits.md).
    job(
        "limited_p3",
        level,
        invoke(agents, "bench.limited", md),
        server=a["pids"],
        metrics_url=a["metrics"],
    )
    job(
        "governed_p3_local",
        level,
        invoke(f"unix:{t.local_socket}", "bench.p3", fixtures.local_actor()),
        server=a["pids"],
        metrics_url=a["metrics"],
    )
    for name, key in (("audit_off_p3", "off"), ("audit_strict_p3", "strict")):
        gw = t.gateways[key]
        job(
            name,
            level,
            invoke(f"127.0.0.1:{gw['agents']}", "bench.p3", md),
            server=gw["pids"],
            metrics_url=gw["metrics"],
        )
    check = unary(
        agents,
        "/capgate.v1.CapabilityGateway/Check",
        fixtures.check_request(),
        "check",
        DECISION_ALLOW,
        md,
    )
    opa = {
        "kind": "http",
        "host": "127.0.0.1",
        "port": t.opa_port,
        "path": "/v1/data/capgate/bench/decision",
        "body": json.dumps({"input": fixtures.opa_input()}),
        "expect": '"allow"',
    }
    has_opa = t.opa_port is not None and t.opa_pid is not None
    job("check", level, check, server=a["pids"])
    if has_opa:
        job("opa", level, opa, server=(t.opa_pid,))
    # The same figures from bench/goload (Go): one generator for both sides of Check vs OPA
    # (issue 8), and the hop ratios with a client that costs a fifth of grpc.aio's CPU.
    go = {"generator": "go"}
    job(
        "direct_go",
        level,
        {**unary(t.upstream, PROCEDURE, proc_req, "procedure"), **go},
        server=(t.upstream_pid,),
    )
    job(
        "proxy_go",
        level,
        {**unary(t.proxy, PROCEDURE, proc_req, "procedure"), **go},
        server=(t.proxy_pid,),
    )
    job("governed_p3_go", level, {**invoke(agents, "bench.p3", md), **go}, server=a["pids"])
    job("check_go", level, {**check, **go}, server=a["pids"])
    if has_opa:
        job("opa_go", level, {**opa, **go}, server=(t.opa_pid,))
    job(
        "describe",
        level,
        unary(
            agents,
            "/capgate.v1.CapabilityGateway/Describe",
            fixtures.describe_request(),
            "describe",
            fixtures.CATALOG_SIZE,
            md,
        ),
        server=a["pids"],
    )
    if not last:  # a flow is three calls; 64 concurrent flows add nothing to the figure
        job(
            "approval",
            level,
            {
                "kind": "approval",
                "target": agents,
                "admin_target": f"127.0.0.1:{a['admin']}",
                "request": _b64(fixtures.invoke_request("bench.approve")),
                "metadata": md,
                "admin_metadata": t.admin_md,
            },
            server=a["pids"],
        )


def run_workers(job: Job, t: Targets, level: int) -> None:
    """1 vs 2 workers on the same config, over 16 connections (SO_REUSEPORT balances those)."""
    print(f"workers, {level} in flight over 16 connections", file=sys.stderr, flush=True)
    for name, key in (("workers_1", "a"), ("workers_2", "w2")):
        gw = t.gateways[key]
        job(
            name,
            level,
            invoke(f"127.0.0.1:{gw['agents']}", "bench.p3", t.caller_md, channels=16),
            server=gw["pids"],
        )
