"""What the config says about one limit (`limits:` in the gateway config, docs/limits.md).

A `LimitSpec` is frozen config data, built by `gateway.config.build` after the schema and the
checks passed; its CEL texts are compiled and type-checked when the snapshot is built
(`gateway.pipeline.limits`), where the input types of the capabilities it selects are known.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

OnExceed = Literal["deny", "require-approval"]
OnRedisDown = Literal["open", "closed"]


@dataclass(frozen=True, slots=True)
class ExprSite:
    """Where a CEL text of the config is written: file, 1-based line and column of its
    first character (the column is 1 when the value does not sit on its key's line)."""

    path: str
    line: int
    column: int
    exact: bool = False  # the text sits verbatim at (line, column): inner positions map too


@dataclass(frozen=True, slots=True)
class RateSpec:
    """GCRA: `limit` calls per `window_s` sustained, up to `burst` at once (burst <= limit)."""

    limit: int
    window_s: float
    burst: int

    @property
    def interval_ms(self) -> float:
        """The emission interval: one call's share of the window."""
        return self.window_s * 1000.0 / self.limit


@dataclass(frozen=True, slots=True)
class BudgetSpec:
    """At most `max` of the CEL `amount` per `window_s`, the window starting at the first
    spend of a key (the key expires with its window)."""

    amount: str
    amount_site: ExprSite
    max: float
    window_s: float
    on_exceed: OnExceed = "deny"


@dataclass(frozen=True, slots=True)
class LimitSpec:
    name: str
    key: str
    key_site: ExprSite
    rate: RateSpec | None = None
    budget: BudgetSpec | None = None
    capabilities: tuple[str, ...] | None = None  # id globs as for policies; None: every one
    tags: frozenset[str] | None = None
    on_redis_down: OnRedisDown | None = None  # None: closed for budgets, open for rates
    index: int = 0  # position in `limits:` (config problems point there)

    @property
    def kind(self) -> Literal["rate", "budget"]:
        return "rate" if self.rate is not None else "budget"

    @property
    def window_s(self) -> float:
        if self.rate is not None:
            return self.rate.window_s
        assert self.budget is not None
        return self.budget.window_s

    @property
    def fails_open(self) -> bool:
        if self.on_redis_down is not None:
            return self.on_redis_down == "open"
        return self.rate is not None
