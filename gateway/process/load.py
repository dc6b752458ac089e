"""`load_everything`: the one loader `capgate serve` and `capgate config check` share.

A config is usable when its YAML passes the schema and the semantic checks (`load_settings`)
*and* it becomes a snapshot: every capability's upstream method resolves (descriptor set, or
server reflection), every policy file loads and type-checks with `input` typed from each
capability's input schema (configured or derived from its protobuf request message), and every
capability-scoped policy a capability lists exists. `serve` runs this before it starts Redis or
binds a port; `config check` runs exactly the same code and binds nothing (it contacts
upstreams only with `--resolve-reflection`). Every problem of either layer is raised together
in one `ConfigError`, each at its file:line (policy problems at file:line:column).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from gateway.config.loader import load_settings
from gateway.config.places import places_of, problem
from gateway.config.problems import ConfigError, Problem
from gateway.config.settings import Settings
from gateway.config.watch import SETTLE_S
from gateway.pipeline.snapshot import (
    ContentMoved,
    Snapshot,
    SnapshotError,
    build_snapshot,
    check_snapshot,
)
from gateway.upstream.channels import ChannelPool
from policy import LoadIssue

__all__ = ["SETTLE_ATTEMPTS", "Loaded", "load_everything", "located"]

# How many times a load whose policy files moved between reading the settings and compiling them
# is tried (`settle_s` apart) before the files are reported as never settling.
SETTLE_ATTEMPTS = 4


@dataclass(frozen=True, slots=True)
class Loaded:
    """A config that can serve. `loaded` is as read (its revision and key files are the
    files'); `settings` is what this process serves of it (after `prepare`)."""

    loaded: Settings
    settings: Settings
    snapshot: Snapshot | None  # None when some upstream was not resolved (check only)
    unresolved: tuple[str, ...]  # capabilities whose upstream methods were not looked up


def _same(settings: Settings) -> Settings:
    return settings


async def load_everything(
    path: str | Path,
    pool: ChannelPool,
    *,
    environ: Mapping[str, str] | None = None,
    bind: bool = True,
    resolve_reflection: bool = True,
    prepare: Callable[[Settings], Settings] = _same,
    settle_s: float = SETTLE_S,
    attempts: int = SETTLE_ATTEMPTS,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Loaded:
    """Load the config at `path` and everything it names; raises `ConfigError` listing every
    problem. With `bind` (serve) the result carries the snapshot to serve, built with `pool`
    (which then belongs to the caller's gateway); without it (config check) nothing is kept,
    and upstreams without a descriptor set are resolved only with `resolve_reflection`.

    A policy file that changes between reading the settings and compiling them (a writer still
    at work) is not an error of the config: the whole load runs again `settle_s` later, up to
    `attempts` times in all, and only the last attempt's refusal is raised."""
    attempt = 1
    while True:
        try:
            return await _load_once(
                path, pool, environ, bind=bind, resolve=resolve_reflection, prepare=prepare
            )
        except _Moved as moved:
            if attempt >= attempts:
                raise moved.error from None
        attempt += 1
        await sleep(settle_s)


class _Moved(Exception):
    """One attempt's `ContentMoved`, already located (the typed early exit of the retry)."""

    def __init__(self, error: ConfigError) -> None:
        super().__init__(str(error))
        self.error = error


async def _load_once(
    path: str | Path,
    pool: ChannelPool,
    environ: Mapping[str, str] | None,
    *,
    bind: bool,
    resolve: bool,
    prepare: Callable[[Settings], Settings],
) -> Loaded:
    loaded = load_settings(path, environ=environ)
    settings = prepare(loaded)
    try:
        if bind:
            snapshot = await build_snapshot(
                settings, pool, hmac_key=settings.audit.hmac_key.encode()
            )
            return Loaded(loaded, settings, snapshot, ())
        checked = await check_snapshot(settings, pool, resolve_reflection=resolve)
    except ContentMoved as exc:
        raise _Moved(located(settings, exc)) from None
    except SnapshotError as exc:
        raise located(settings, exc) from None
    return Loaded(loaded, settings, None, checked.unresolved)


def located(settings: Settings, error: SnapshotError) -> ConfigError:
    """The snapshot's problems at their file:line in the config `settings` was loaded from
    (at start, and on a reload, where the watcher loaded it)."""
    places = places_of(settings.revision)
    problems = [problem(places, p.parts, p.message) for p in error.problems]
    problems += [policy_problem(issue) for issue in error.policy_issues]
    return ConfigError(problems, secrets=places.secrets if places is not None else ())


def policy_problem(issue: LoadIssue) -> Problem:
    """A policy-file problem in the config's terms: file:line:column, policy/rules[i]."""
    who = "" if issue.policy is None else issue.policy
    if issue.policy is not None and issue.rule is not None:
        who += f"/rules[{issue.rule}]"
    return Problem(who, issue.line, issue.message, issue.path, column=issue.column)
