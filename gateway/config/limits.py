"""The `limits:` section of the gateway config: its semantic checks (run with the others, after
the schema) and the frozen `LimitSpec`s built from it. The CEL texts are compiled later, with
the snapshot (`gateway.pipeline.limits`), where the capabilities' input types are known."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from gateway.config.context import Ctx, items, seconds_of
from gateway.config.durations import parse_duration
from gateway.config.limitspec import BudgetSpec, ExprSite, LimitSpec, RateSpec
from gateway.config.source import LDict

MAX_LIMITS = 64  # every call with limits evaluates all of its own in one script


def check_limits(ctx: Ctx) -> None:
    seen: dict[str, int] = {}
    entries = items(ctx.root.get("limits"))
    if len(entries) > MAX_LIMITS:
        ctx.fail(("limits",), f"at most {MAX_LIMITS} limits")
    for index, node in entries:
        parts = ("limits", index)
        name = node.get("name")
        if isinstance(name, str):
            if name in seen:
                ctx.fail((*parts, "name"), f"duplicate limit name (first at limits[{seen[name]}])")
            seen.setdefault(name, index)
        has_rate, has_budget = "rate" in node, "budget" in node
        if has_rate == has_budget:
            ctx.fail(parts, "a limit has exactly one of rate and budget")
        rate, budget = node.get("rate"), node.get("budget")
        if isinstance(rate, LDict):
            ctx.positive(rate, "window", (*parts, "rate"))
            limit, burst = rate.get("limit"), rate.get("burst")
            if isinstance(limit, int) and isinstance(burst, int) and burst > limit:
                ctx.fail((*parts, "rate", "burst"), "must be at most rate.limit")
        if isinstance(budget, LDict):
            ctx.positive(budget, "window", (*parts, "budget"))
            window = seconds_of(budget, "window")
            if window is not None and window < 0.001:
                ctx.fail((*parts, "budget", "window"), "must be at least 1ms")
        if isinstance(rate, LDict):
            window = seconds_of(rate, "window")
            limit = rate.get("limit")
            if window is not None and isinstance(limit, int) and window * 1000 / limit < 0.001:
                ctx.fail((*parts, "rate"), "one call's share of the window must be at least 1us")


def build_limits(root: Mapping[str, Any]) -> tuple[LimitSpec, ...]:
    """The limits of a config that passed the schema and every check."""
    out = []
    for index, node in items(root.get("limits")):
        rate = budget = None
        if isinstance(node.get("rate"), Mapping):
            r = node["rate"]
            rate = RateSpec(
                limit=r["limit"],
                window_s=parse_duration(r["window"]),
                burst=r.get("burst", r["limit"]),
            )
        else:
            b = node["budget"]
            budget = BudgetSpec(
                amount=b["amount"],
                amount_site=_site(b, "amount"),
                max=float(b["max"]),
                window_s=parse_duration(b["window"]),
                on_exceed=b.get("on_exceed", "deny"),
            )
        out.append(
            LimitSpec(
                name=node["name"],
                key=node["key"],
                key_site=_site(node, "key"),
                rate=rate,
                budget=budget,
                capabilities=tuple(node["capabilities"]) if "capabilities" in node else None,
                tags=frozenset(node["tags"]) if "tags" in node else None,
                on_redis_down=node.get("on_redis_down"),
                index=index,
            )
        )
    return tuple(out)


def _site(node: Any, key: str) -> ExprSite:
    """Where `node[key]`'s text starts: its key's line, and the column where the text sits
    verbatim on that line (else column 1, and positions inside it are reported by offset)."""
    locs = getattr(node, "key_locs", {})
    path, line = locs.get(key, ("", 0))
    text = node[key]
    source = _line(path, line)
    colon = source.find(":", source.find(key))
    column = source.find(text, colon + 1) if colon >= 0 and "\n" not in text else -1
    if column < 0:
        return ExprSite(path, line, 1, exact=False)
    return ExprSite(path, line, column + 1, exact=True)


@lru_cache(maxsize=64)
def _lines(path: str, stamp: float) -> tuple[str, ...]:
    return tuple(Path(path).read_text(encoding="utf-8", errors="replace").splitlines())


def _line(path: str, line: int) -> str:
    try:
        lines = _lines(path, Path(path).stat().st_mtime)
    except OSError:
        return ""
    return lines[line - 1] if 0 < line <= len(lines) else ""
