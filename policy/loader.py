"""`load_policy_set`: files → parsed, validated, checked and compiled policy set.

Every step adds to one issue list and nothing is raised before the end, so a single
load reports every problem in the set: unreadable files, bad YAML, schema violations,
duplicate names, conflicting constants and CEL errors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from policy.backends import make_backend
from policy.checker import Checker
from policy.compiler import compile_policies
from policy.document import FileSpec, PolicySpec, read_document
from policy.engine import PolicySet
from policy.errors import LoadIssue, PolicyLoadError
from policy.files import SourceFile, read_sources, revision_of
from policy.model import Limits
from policy.schemacheck import schema_issues
from policy.yamlsource import parse_documents

__all__ = ["load_policy_set"]


def load_policy_set(
    paths: Path | Sequence[Path],
    *,
    registry: Mapping[str, Mapping[str, Any]] | None = None,
    backend: str = "cel-expr-python",
    limits: Limits = Limits(),  # noqa: B008 - frozen value object
    clock: Callable[[], datetime] | None = None,
    limit_names: Sequence[str] = (),
    hooks: Mapping[str, Mapping[str, str]] | None = None,
) -> PolicySet:
    """Load the policy files under `paths` (files or directories, `*_test.yaml` excluded).

    `registry` maps capability id → `{input_schema, tags, side_effect, risk}`; with it,
    `input` is type-checked per matched capability. Raises `PolicyLoadError` listing
    every problem; ValueError for an unknown backend.
    """
    runtime = make_backend(backend)
    sources = read_sources(paths)
    issues: list[LoadIssue] = []
    files = [spec for source in sources for spec in _read(source, issues)]
    policies = _unique_policies(files, issues)
    constants = _merged_constants(files, issues)
    checker = Checker(registry, constants, limit_names=limit_names, hooks=hooks)
    compiled = compile_policies(policies, checker, runtime, issues)
    if issues:
        raise PolicyLoadError(issues, names=[p.name for p in policies])
    if not sources:
        checker.notes.append("no policy files found: every request is allowed")
    return PolicySet(
        compiled,
        backend=runtime,
        limits=limits,
        clock=clock,
        revision=revision_of(sources),
        constants=constants,
        notes=tuple(dict.fromkeys(checker.notes)),
    )


def _read(source: SourceFile, issues: list[LoadIssue]) -> list[tuple[str, FileSpec]]:
    if source.data is None:
        issues.append(LoadIssue(source.label, 1, 1, None, None, f"cannot read: {source.error}"))
        return []
    try:
        text = source.data.decode("utf-8")
    except UnicodeDecodeError as exc:
        issues.append(LoadIssue(source.label, 1, 1, None, None, f"not UTF-8 text: {exc.reason}"))
        return []
    docs, found = parse_documents(source.label, text)
    issues += found
    out = []
    for doc in docs:
        issues += schema_issues(doc, source.label)
        out.append((source.label, read_document(doc, source.label, issues)))
    return out


def _unique_policies(
    files: list[tuple[str, FileSpec]], issues: list[LoadIssue]
) -> list[PolicySpec]:
    first: dict[str, PolicySpec] = {}
    out = []
    for _, spec in files:
        for policy in spec.policies:
            seen = first.get(policy.name)
            if seen is not None:
                where = f"{seen.path}:{seen.line}:{seen.column}"
                message = f"duplicate policy name {policy.name!r} (first defined at {where})"
                issues.append(
                    LoadIssue(policy.path, policy.line, policy.column, policy.name, None, message)
                )
                continue
            first[policy.name] = policy
            out.append(policy)
    return out


def _merged_constants(files: list[tuple[str, FileSpec]], issues: list[LoadIssue]) -> dict[str, Any]:
    """One `const` namespace for the set; a name defined twice must agree."""
    merged: dict[str, Any] = {}
    where: dict[str, str] = {}
    for path, spec in files:
        for name, (value, (line, column)) in spec.constants.items():
            if name in merged and merged[name] != value:
                message = f"constant {name!r} differs from its definition in {where[name]}"
                issues.append(LoadIssue(path, line, column, None, None, message))
                continue
            merged.setdefault(name, value)
            where.setdefault(name, f"{path}:{line}:{column}")
    return merged
