"""`{{ env.NAME }}` substitution, applied after parsing and only inside string scalars (§12).

Keys are never substituted and no YAML is ever built from text, so a variable cannot inject
structure. The values used are returned so that `ConfigError` can scrub them from messages:
a substituted value is never echoed (it may be a secret).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gateway.config.problems import PathParts, Problem
from gateway.config.source import LDict, LList, problem_at

_TEMPLATE = re.compile(r"\{\{(.*?)\}\}")
_ENV_REF = re.compile(r"\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*")


def substitute(
    root: Any, environ: Mapping[str, str]
) -> tuple[list[Problem], set[str], set[PathParts]]:
    """Replace templates in place; return (problems, values used, paths of substituted strings)."""
    problems: list[Problem] = []
    used: set[str] = set()
    paths: set[PathParts] = set()

    def expand(text: str, parts: PathParts) -> str:
        def one(match: re.Match[str]) -> str:
            ref = _ENV_REF.fullmatch(match.group(1))
            if ref is None:
                problems.append(
                    problem_at(root, parts, "unsupported template: only {{ env.NAME }} is allowed")
                )
                return ""
            name = ref.group(1)
            if name not in environ:
                problems.append(problem_at(root, parts, f"environment variable {name} is not set"))
                return ""
            used.add(environ[name])
            return environ[name]

        result = _TEMPLATE.sub(one, text)
        if result != text:
            paths.add(parts)
        return result

    def walk(node: Any, parts: PathParts) -> None:
        if isinstance(node, LDict):
            for key in list(node):
                value = node[key]
                if isinstance(value, str):
                    node[key] = expand(value, (*parts, key))
                else:
                    walk(value, (*parts, key))
        elif isinstance(node, LList):
            for i, value in enumerate(node):
                if isinstance(value, str):
                    node[i] = expand(value, (*parts, i))
                else:
                    walk(value, (*parts, i))

    walk(root, ())
    return problems, used, paths
