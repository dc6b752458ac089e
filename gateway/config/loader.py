"""Loading the gateway config: YAML file or directory -> validated, frozen `Settings`.

Order (DESIGN §10, §12): parse YAML keeping line marks; merge a directory's files; substitute
`{{ env.NAME }}` inside string scalars; validate against the published JSON Schema; run the
semantic checks; and only when nothing at all is wrong, build `Settings`. Every problem is
collected and raised together in one `ConfigError`, so an invalid config never starts a server
and never replaces a running one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from gateway.config import places
from gateway.config.build import build_settings
from gateway.config.checks import check_all
from gateway.config.context import Ctx, mapping, resolve
from gateway.config.env import substitute
from gateway.config.problems import ConfigError, Problem
from gateway.config.revision import digest, key_files, policy_files
from gateway.config.schema import schema_problems
from gateway.config.settings import Settings
from gateway.config.source import LDict, SourceFile, config_files, merge, parse, problem_at


def load_settings(path: str | Path, *, environ: Mapping[str, str] | None = None) -> Settings:
    """Load, validate and freeze the config at `path` (a YAML file or a directory of them).

    `environ` defaults to the process environment. Raises `ConfigError` listing every problem.
    """
    config_path = Path(os.path.abspath(path))
    env = os.environ if environ is None else environ
    sources = read_sources(config_path)
    base = config_path if config_path.is_dir() else config_path.parent

    problems: list[Problem] = []
    root: LDict | None = None
    for source in sources:
        data, parse_problems = parse(source, str(source.path))
        problems += parse_problems
        if data is None:
            continue
        if not isinstance(data, LDict):
            problems.append(Problem("", 1, "the config must be a mapping", str(source.path)))
        elif root is None:
            root = data
        else:
            merge(root, data, (), problems)
    if root is None:
        raise ConfigError(problems)

    env_problems, used, _ = substitute(root, env)
    # A missing variable leaves an empty string behind; its consequences are noise.
    noisy = {p.path_in_file for p in env_problems}
    problems += env_problems
    problems += [
        p
        for p in (problem_at(root, parts, message) for parts, message in schema_problems(root))
        if p.path_in_file not in noisy
    ]
    ctx = Ctx(root, base)
    check_all(ctx)
    problems += [p for p in ctx.problems if p.path_in_file not in noisy]
    if problems:
        raise ConfigError(problems, secrets=used)

    paths = [str(resolve(base, p)) for p in _policy_paths(root)]
    settings = build_settings(root, base, source=str(config_path), revision="")
    watched = policy_files(paths) + key_files(settings.listeners)
    revision = digest([(s.path, s.data) for s in sources], watched)
    places.remember(revision, root, used)
    return replace(settings, revision=revision)


def read_sources(config_path: Path) -> list[SourceFile]:
    """The bytes of every config file at `config_path`; ConfigError when there are none."""
    if not config_path.exists():
        raise ConfigError([Problem("", None, "config file not found", str(config_path))])
    files = config_files(config_path)
    if not files:
        raise ConfigError([Problem("", None, "no *.yaml files in directory", str(config_path))])
    sources: list[SourceFile] = []
    problems: list[Problem] = []
    for file in files:
        try:
            sources.append(SourceFile(file, file.read_bytes()))
        except OSError as exc:
            problems.append(Problem("", None, f"cannot read: {exc.strerror}", str(file)))
    if problems:
        raise ConfigError(problems)
    return sources


def _policy_paths(root: LDict) -> list[str]:
    paths: Any = mapping(root.get("policies")).get("paths", [])
    return [p for p in paths if isinstance(p, str)]


__all__ = ["ConfigError", "Problem", "load_settings"]
