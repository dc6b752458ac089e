"""Turn measured scenarios into the report: ratios, budgets (reported, never asserted) and the
Markdown table. `build()` is pure: it takes the raw figures and returns report.json's dict."""

from __future__ import annotations

from typing import Any

BUDGETS = {
    "governed_vs_proxy_p50": ("<=", 1.25),
    "governed_vs_proxy_throughput": (">=", 0.8),
    # Gateway CPU per governed call / the bare proxy's, at the throughput level (issue 21).
    "governed_vs_proxy_cpu": ("<=", 1.6),
    "policy_eval_us_10": ("<=", 150.0),
    "check_vs_opa_p50": ("<=", 1.0),
}
REQUIRED = (
    "governed_vs_proxy_p50",
    "governed_vs_proxy_throughput",
    "audit_cost",
    "approval_path_ms",
    "workers_scaling",
    "check_vs_opa",
    "policy_eval_us_10",
)
# Row order of the table, with what each scenario is.
DESCRIPTIONS = {
    "direct": "upstream called directly (JSON-native Procedure/Invoke)",
    "proxy": "bare grpc.aio passthrough proxy (bench/proxy.py): the Python floor",
    "governed_p0": "Invoke, 0 policies, JWT (cached), validation, audit → Redis (batched)",
    "governed_p3": "Invoke, 3 policies, JWT (cached), validation, audit → Redis (batched)",
    "governed_p10": "Invoke, 10 policies, JWT (cached), validation, audit → Redis (batched)",
    "governed_p3_local": "Invoke, 3 policies, trusted-local over a unix socket",
    "cache_hit_p3": "Invoke, 3 policies, a read answered from the result cache",
    "cache_miss_p3": "Invoke, 3 policies, a read the cache misses (1ms TTL), then stores",
    "hook_pre_p3": "Invoke, 3 policies and one pre-hook (a gRPC round trip to the hook)",
    "limited_p3": "Invoke, 3 policies, a rate and a budget (one Redis script per call)",
    "audit_off_p3": "Invoke, 3 policies, no audit sink",
    "audit_strict_p3": "Invoke, 3 policies, strict audit (awaits capability.started in Redis)",
    "check": "Check alone (stages 3-7, 3 policies)",
    "opa": "OPA decision API, the same 3 decisions (HTTP/1.1 keep-alive)",
    "direct_go": "the upstream (an almost empty grpc.aio handler), driven by bench/goload",
    "proxy_go": "the bare proxy, driven by bench/goload (Go, grpc-go)",
    "governed_p3_go": "governed_p3, driven by bench/goload (Go, grpc-go)",
    "check_go": "Check alone, driven by bench/goload (Go, grpc-go)",
    "opa_go": "OPA decision API, driven by bench/goload (Go, net/http keep-alive)",
    "describe": "Describe over 100 capabilities (1 discovery policy each)",
    "approval": "approval path: Invoke → DecideApproval → Resume (one flow = one call)",
    "workers_1": "Invoke p3, 1 worker, 16 connections",
    "workers_2": "Invoke p3, 2 workers (SO_REUSEPORT), 16 connections",
}


def _ratio(a: float | None, b: float | None) -> float | None:
    if not a or not b:
        return None
    return round(a / b, 3)


def _fig(scenarios: dict[str, Any], name: str, level: int, key: str) -> float | None:
    row = scenarios.get(name, {}).get("levels", {}).get(str(level))
    if not row or row.get("failed") or not row.get("calls"):
        return None
    value = row.get(key)
    return float(value) if value is not None else None


def _cache_lines(cache: dict[str, Any]) -> list[str]:
    """The result cache's hit and miss beside each other (docs/cache.md), per concurrency."""
    return [
        f"- result cache, {level} in flight: hit p50 {_cell(c['hit_p50_ms'])} ms / "
        f"{_cell(c['hit_calls_per_s'], 0)} calls/s, miss p50 {_cell(c['miss_p50_ms'])} ms / "
        f"{_cell(c['miss_calls_per_s'], 0)} calls/s (hit/miss p50 x{_cell(c['hit_vs_miss_p50'])}, "
        f"calls/s x{_cell(c['hit_vs_miss_calls_per_s'])}; hit/uncached p50 "
        f"x{_cell(c['hit_vs_uncached_p50'])}, "
        f"miss/uncached p50 x{_cell(c['miss_vs_uncached_p50'])})"
        for level, c in cache.items()
    ]


def _hook_lines(hook: dict[str, Any]) -> list[str]:
    """One pre-hook's added cost beside governed_p3 (docs/hooks.md), per concurrency."""
    return [
        f"- one pre-hook, {level} in flight: p50 {_cell(h['p50_ms'])} ms / "
        f"{_cell(h['calls_per_s'], 0)} calls/s (vs governed_p3 p50 x{_cell(h['p50_vs_governed'])}, "
        f"calls/s x{_cell(h['calls_per_s_vs_governed'])})"
        for level, h in hook.items()
    ]


def _limits_lines(limits: dict[str, Any]) -> list[str]:
    """Two limits' added cost beside governed_p3 (docs/limits.md), per concurrency."""
    return [
        f"- a rate and a budget, {level} in flight: p50 {_cell(x['p50_ms'])} ms / "
        f"{_cell(x['calls_per_s'], 0)} calls/s (vs governed_p3 p50 x{_cell(x['p50_vs_governed'])}, "
        f"calls/s x{_cell(x['calls_per_s_vs_governed'])})"
        for level, x in limits.items()
    ]


def build(raw: dict[str, Any]) -> dict[str, Any]:
    """raw: mode, machine, versions, settings, scenarios, stage_us, policy, notes."""
    sc = raw["scenarios"]
    levels: list[int] = raw["settings"]["levels"]
    lat_level, thr_level = levels[0], levels[-1]
    p50 = {
        lvl: _ratio(_fig(sc, "governed_p3", lvl, "p50_ms"), _fig(sc, "proxy", lvl, "p50_ms"))
        for lvl in levels
    }
    thr = {
        lvl: _ratio(
            _fig(sc, "governed_p3", lvl, "calls_per_s"), _fig(sc, "proxy", lvl, "calls_per_s")
        )
        for lvl in levels
    }

    def audit_row(name: str) -> dict[str, Any]:
        return {
            "scenario": name,
            "p50_ms": _fig(sc, name, lat_level, "p50_ms"),
            "calls_per_s": _fig(sc, name, thr_level, "calls_per_s"),
        }

    audit = {
        "off": audit_row("audit_off_p3"),
        "best_effort": audit_row("governed_p3"),
        "strict": audit_row("audit_strict_p3"),
    }
    off = audit["off"]
    for mode in ("best_effort", "strict"):
        audit[mode]["p50_vs_off"] = _ratio(audit[mode]["p50_ms"], off["p50_ms"])
        audit[mode]["throughput_vs_off"] = _ratio(audit[mode]["calls_per_s"], off["calls_per_s"])
    cache = {
        str(lvl): {
            "hit_p50_ms": _fig(sc, "cache_hit_p3", lvl, "p50_ms"),
            "miss_p50_ms": _fig(sc, "cache_miss_p3", lvl, "p50_ms"),
            "hit_calls_per_s": _fig(sc, "cache_hit_p3", lvl, "calls_per_s"),
            "miss_calls_per_s": _fig(sc, "cache_miss_p3", lvl, "calls_per_s"),
            "hit_vs_miss_p50": _ratio(
                _fig(sc, "cache_hit_p3", lvl, "p50_ms"), _fig(sc, "cache_miss_p3", lvl, "p50_ms")
            ),
            "hit_vs_uncached_p50": _ratio(
                _fig(sc, "cache_hit_p3", lvl, "p50_ms"), _fig(sc, "governed_p3", lvl, "p50_ms")
            ),
            "hit_vs_miss_calls_per_s": _ratio(
                _fig(sc, "cache_hit_p3", lvl, "calls_per_s"),
                _fig(sc, "cache_miss_p3", lvl, "calls_per_s"),
            ),
            "miss_vs_uncached_p50": _ratio(
                _fig(sc, "cache_miss_p3", lvl, "p50_ms"), _fig(sc, "governed_p3", lvl, "p50_ms")
            ),
        }
        for lvl in levels
        if "cache_hit_p3" in sc
    }
    hook = {
        str(lvl): {
            "p50_ms": _fig(sc, "hook_pre_p3", lvl, "p50_ms"),
            "calls_per_s": _fig(sc, "hook_pre_p3", lvl, "calls_per_s"),
            "p50_vs_governed": _ratio(
                _fig(sc, "hook_pre_p3", lvl, "p50_ms"), _fig(sc, "governed_p3", lvl, "p50_ms")
            ),
            "calls_per_s_vs_governed": _ratio(
                _fig(sc, "hook_pre_p3", lvl, "calls_per_s"),
                _fig(sc, "governed_p3", lvl, "calls_per_s"),
            ),
        }
        for lvl in levels
        if "hook_pre_p3" in sc
    }
    limits = {
        str(lvl): {
            "p50_ms": _fig(sc, "limited_p3", lvl, "p50_ms"),
            "calls_per_s": _fig(sc, "limited_p3", lvl, "calls_per_s"),
            "p50_vs_governed": _ratio(
                _fig(sc, "limited_p3", lvl, "p50_ms"), _fig(sc, "governed_p3", lvl, "p50_ms")
            ),
            "calls_per_s_vs_governed": _ratio(
                _fig(sc, "limited_p3", lvl, "calls_per_s"),
                _fig(sc, "governed_p3", lvl, "calls_per_s"),
            ),
        }
        for lvl in levels
        if "limited_p3" in sc
    }
    workers = {
        "workers_1_calls_per_s": _fig(sc, "workers_1", thr_level, "calls_per_s"),
        "workers_2_calls_per_s": _fig(sc, "workers_2", thr_level, "calls_per_s"),
        "concurrency": thr_level,
    }
    workers["ratio"] = _ratio(workers["workers_2_calls_per_s"], workers["workers_1_calls_per_s"])
    settings = raw["settings"]
    if "opa_go" in sc:  # one generator (Go) for both sides: the figure the budget takes
        check_vs_opa = _check_vs_opa(sc, levels, "_go", settings["opa_generator"])
        if "opa" in sc:
            check_vs_opa["python_generator"] = _check_vs_opa(
                sc, levels, "", settings.get("opa_generator_python", "")
            )
    elif "opa" in sc:
        check_vs_opa = _check_vs_opa(sc, levels, "", settings.get("opa_generator_python", ""))
    else:
        check_vs_opa = {"skipped": raw.get("opa_skipped", "OPA not run")}
    policy = raw.get("policy") or {}
    policy_us = (policy.get("cel-expr-python") or {}).get("median_us")
    report: dict[str, Any] = {
        "mode": raw["mode"],
        "generated_at": raw["generated_at"],
        "machine": raw["machine"],
        "versions": raw["versions"],
        "settings": raw["settings"],
        "governed_vs_proxy_p50": p50[lat_level],
        "governed_vs_proxy_p50_concurrency": lat_level,
        "governed_vs_proxy_p50_by_concurrency": {str(k): v for k, v in p50.items()},
        "governed_vs_proxy_throughput": thr[thr_level],
        "governed_vs_proxy_throughput_concurrency": thr_level,
        "governed_vs_proxy_throughput_by_concurrency": {str(k): v for k, v in thr.items()},
        "governed_vs_proxy_cpu": _ratio(
            _fig(sc, "governed_p3", thr_level, "server_cpu_us"),
            _fig(sc, "proxy", thr_level, "server_cpu_us"),
        ),
        "governed_vs_proxy_cpu_by_concurrency": {
            str(lvl): _ratio(
                _fig(sc, "governed_p3", lvl, "server_cpu_us"),
                _fig(sc, "proxy", lvl, "server_cpu_us"),
            )
            for lvl in levels
        },
        "go_generator": {
            "governed_vs_proxy_p50_by_concurrency": {
                str(lvl): _ratio(
                    _fig(sc, "governed_p3_go", lvl, "p50_ms"), _fig(sc, "proxy_go", lvl, "p50_ms")
                )
                for lvl in levels
            },
            "governed_vs_proxy_throughput_by_concurrency": {
                str(lvl): _ratio(
                    _fig(sc, "governed_p3_go", lvl, "calls_per_s"),
                    _fig(sc, "proxy_go", lvl, "calls_per_s"),
                )
                for lvl in levels
            },
        },
        "proxy_vs_direct_throughput": _ratio(
            _fig(sc, "proxy", thr_level, "calls_per_s"),
            _fig(sc, "direct", thr_level, "calls_per_s"),
        ),
        "proxy_added_p50_ms": _diff(
            _fig(sc, "proxy", lat_level, "p50_ms"), _fig(sc, "direct", lat_level, "p50_ms")
        ),
        "governed_added_p50_ms": _diff(
            _fig(sc, "governed_p3", lat_level, "p50_ms"), _fig(sc, "proxy", lat_level, "p50_ms")
        ),
        "audit_cost": audit,
        "result_cache": cache,
        "one_pre_hook": hook,
        "two_limits": limits,
        "approval_path_ms": _fig(sc, "approval", lat_level, "p50_ms"),
        "workers_scaling": workers,
        "check_vs_opa": check_vs_opa,
        "policy_eval_us_10": policy_us,
        "policy_in_process": policy,
        "stage_us": raw.get("stage_us", {}),
        "scenarios": sc,
        "notes": raw.get("notes", []),
    }
    report["budgets"] = _budgets(report)
    return report


def _check_vs_opa(
    sc: dict[str, Any], levels: list[int], suffix: str, generator: str
) -> dict[str, Any]:
    """Check vs OPA per level, from the `check{suffix}` and `opa{suffix}` rows."""
    check, opa = f"check{suffix}", f"opa{suffix}"
    out: dict[str, Any] = {"generator": generator, "rows": [check, opa]}
    for lvl in levels:
        row = {
            "check_p50_ms": _fig(sc, check, lvl, "p50_ms"),
            "opa_p50_ms": _fig(sc, opa, lvl, "p50_ms"),
            "check_calls_per_s": _fig(sc, check, lvl, "calls_per_s"),
            "opa_calls_per_s": _fig(sc, opa, lvl, "calls_per_s"),
            "check_server_cpu_us": _fig(sc, check, lvl, "server_cpu_us"),
            "opa_server_cpu_us": _fig(sc, opa, lvl, "server_cpu_us"),
            "check_client_cpu_us": _fig(sc, check, lvl, "client_cpu_us"),
            "opa_client_cpu_us": _fig(sc, opa, lvl, "client_cpu_us"),
        }
        row["p50_ratio"] = _ratio(row["check_p50_ms"], row["opa_p50_ms"])
        row["throughput_ratio"] = _ratio(row["check_calls_per_s"], row["opa_calls_per_s"])
        row["server_cpu_ratio"] = _ratio(row["check_server_cpu_us"], row["opa_server_cpu_us"])
        # The floor: the upstream, an almost empty grpc.aio handler, under the same generator.
        row["grpc_aio_floor_p50_ms"] = _fig(sc, f"direct{suffix}", lvl, "p50_ms")
        row["grpc_aio_floor_server_cpu_us"] = _fig(sc, f"direct{suffix}", lvl, "server_cpu_us")
        row["floor_vs_opa_p50"] = _ratio(row["grpc_aio_floor_p50_ms"], row["opa_p50_ms"])
        out[str(lvl)] = row
    out["p50_ratio"] = out[str(levels[0])]["p50_ratio"]
    out["throughput_ratio"] = out[str(levels[-1])]["throughput_ratio"]
    return out


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(a - b, 3)


def _budgets(report: dict[str, Any]) -> list[dict[str, Any]]:
    values = {
        "governed_vs_proxy_p50": report["governed_vs_proxy_p50"],
        "governed_vs_proxy_throughput": report["governed_vs_proxy_throughput"],
        "governed_vs_proxy_cpu": report["governed_vs_proxy_cpu"],
        "policy_eval_us_10": report["policy_eval_us_10"],
        "check_vs_opa_p50": report["check_vs_opa"].get("p50_ratio"),
    }
    out = []
    for name, (op, limit) in BUDGETS.items():
        value = values[name]
        within = None if value is None else (value <= limit if op == "<=" else value >= limit)
        out.append({"name": name, "budget": f"{op} {limit:g}", "value": value, "within": within})
    return out


def _cell(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def markdown(report: dict[str, Any]) -> str:
    m, s, sc = report["machine"], report["settings"], report["scenarios"]
    lines = [
        f"# capgate benchmark ({report['mode']})",
        "",
        f"{report['generated_at']} · {m['cpu_model']} · {m['nproc']} cores · load average "
        f"{m['loadavg_before']} before, {m['loadavg_after']} after · Python {m['python']}",
        "",
        f"Each cell: {s['seconds']:g} s or {s['count']} calls (whichever first) after "
        f"{s['warmup']} warm-up calls, one load-generator process ({s['generator']}).",
        "",
        "| scenario | in flight | p50 ms | p99 ms | calls/s | p50 vs proxy | calls/s vs proxy "
        "| server CPU µs/call | client CPU µs/call |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in DESCRIPTIONS:
        if name not in sc:
            continue
        for level, row in sc[name]["levels"].items():
            if row.get("failed"):
                lines.append(f"| {name} | {level} | failed: {row['failed'][:60]} | | | | | | |")
                continue
            base = "proxy_go" if name.endswith("_go") else "proxy"  # same generator
            vs_p50 = _ratio(row.get("p50_ms"), _fig(sc, base, int(level), "p50_ms"))
            vs_thr = _ratio(row.get("calls_per_s"), _fig(sc, base, int(level), "calls_per_s"))
            bad = (
                f" ({row['errors']} errors, {row['bad']} bad)"
                if row["errors"] or row["bad"]
                else ""
            )
            lines.append(
                f"| {name}{bad} | {level} | {_cell(row['p50_ms'])} | {_cell(row['p99_ms'])} | "
                f"{row['calls_per_s']:.0f} | {_cell(vs_p50)} | {_cell(vs_thr)} | "
                f"{_cell(row.get('server_cpu_us'), 0)} | {_cell(row.get('client_cpu_us'), 0)} |"
            )
    lines += ["", "Scenarios:", ""]
    lines += [f"- `{k}`: {v}" for k, v in DESCRIPTIONS.items() if k in sc]
    lines += [
        "",
        "## Budgets (reported, never asserted)",
        "",
        "| figure | budget | value | within |",
        "|---|---|---:|---|",
    ]
    for b in report["budgets"]:
        within = "-" if b["within"] is None else ("yes" if b["within"] else "**no**")
        lines.append(f"| {b['name']} | {b['budget']} | {_cell(b['value'], 3)} | {within} |")
    a = report["audit_cost"]
    w = report["workers_scaling"]
    lines += [
        "",
        "## Ratios",
        "",
        f"- governed (3 policies) / proxy p50 at {report['governed_vs_proxy_p50_concurrency']} "
        f"in flight: {_cell(report['governed_vs_proxy_p50'], 3)} (by concurrency: "
        f"{report['governed_vs_proxy_p50_by_concurrency']})",
        f"- governed / proxy calls/s at {report['governed_vs_proxy_throughput_concurrency']} in "
        f"flight: {_cell(report['governed_vs_proxy_throughput'], 3)} (by concurrency: "
        f"{report['governed_vs_proxy_throughput_by_concurrency']})",
        f"- gateway / proxy CPU per call (server processes' own CPU time): "
        f"{report['governed_vs_proxy_cpu_by_concurrency']}",
        f"- proxy / direct calls/s: {_cell(report['proxy_vs_direct_throughput'], 3)}; the proxy "
        f"hop adds {_cell(report['proxy_added_p50_ms'], 3)} ms p50; governance adds "
        f"{_cell(report['governed_added_p50_ms'], 3)} ms p50 on top",
        f"- audit: off p50 {_cell(a['off']['p50_ms'])} ms / {_cell(a['off']['calls_per_s'], 0)} "
        f"calls/s; best-effort x{_cell(a['best_effort']['p50_vs_off'])} p50, "
        f"x{_cell(a['best_effort']['throughput_vs_off'])} calls/s; strict "
        f"x{_cell(a['strict']['p50_vs_off'])} p50, "
        f"x{_cell(a['strict']['throughput_vs_off'])} calls/s",
        f"- approval path (invoke → approve → resume) p50: {_cell(report['approval_path_ms'])} ms",
        *_cache_lines(report.get("result_cache") or {}),
        *_hook_lines(report.get("one_pre_hook") or {}),
        *_limits_lines(report.get("two_limits") or {}),
        f"- workers: 1 → {_cell(w['workers_1_calls_per_s'], 0)} calls/s, 2 → "
        f"{_cell(w['workers_2_calls_per_s'], 0)} calls/s (x{_cell(w['ratio'])})",
        f"- 10 policies in-process: {_cell(report['policy_eval_us_10'], 1)} µs per request "
        "(cel-expr-python, median, bench/bench_policy.py)",
    ]
    cvo = report["check_vs_opa"]
    if "skipped" in cvo:
        lines.append(f"- Check vs OPA: skipped ({cvo['skipped']})")
    else:
        lines.append(
            f"- Check / OPA p50: {_cell(cvo['p50_ratio'])}; calls/s: "
            f"{_cell(cvo['throughput_ratio'])} ({cvo['generator']})"
        )
        first = cvo[str(report["governed_vs_proxy_p50_concurrency"])]
        if first.get("floor_vs_opa_p50") is not None:
            lines.append(
                f"- the floor: an almost empty grpc.aio handler (the upstream) answers at p50 "
                f"{_cell(first['grpc_aio_floor_p50_ms'])} ms, x{_cell(first['floor_vs_opa_p50'])} "
                "OPA's, under the same generator"
            )
        py = cvo.get("python_generator")
        if py:
            lines.append(
                f"- Check / OPA with the Python generator: p50 {_cell(py['p50_ratio'])}; "
                f"calls/s {_cell(py['throughput_ratio'])} ({py['generator']})"
            )
    go = report["go_generator"]
    if any(go["governed_vs_proxy_throughput_by_concurrency"].values()):
        lines.append(
            "- driven by bench/goload: governed / proxy p50 "
            f"{go['governed_vs_proxy_p50_by_concurrency']}, calls/s "
            f"{go['governed_vs_proxy_throughput_by_concurrency']}"
        )
    stage = report["stage_us"]
    if stage:
        names = list(stage)
        stages = list(dict.fromkeys(k for n in names for k in stage[n]))
        lines += [
            "",
            "## Time per stage inside the gateway (µs per call, from its own "
            f"stage histograms, {report['governed_vs_proxy_p50_concurrency']} in flight)",
            "",
            "| stage | " + " | ".join(names) + " |",
            "|---|" + "---:|" * len(names),
        ]
        for st in stages:
            lines.append(
                f"| {st} | " + " | ".join(_cell(stage[n].get(st), 1) for n in names) + " |"
            )
    lines += ["", "## Versions", ""]
    lines += [f"- {k}: {v}" for k, v in report["versions"].items()]
    if report["notes"]:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in report["notes"]]
    return "\n".join(lines) + "\n"
