"""The surface the gateway depends on, pinned: names, signatures and field lists."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest

import policy
from policy import (
    ApprovalRequirement,
    Decision,
    EvalRequest,
    Evaluation,
    Limits,
    LoadIssue,
    Phase,
    PolicySet,
    Stance,
    load_policy_set,
)

POLICY_DIR = Path(policy.__file__).parent


def fields(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def test_the_package_exports_exactly_the_public_names():
    assert sorted(policy.__all__) == sorted(
        [
            "ITERATION_BUDGET",
            "ApprovalRequirement",
            "Decision",
            "EvalRequest",
            "Evaluation",
            "Limits",
            "LoadIssue",
            "Phase",
            "PolicyLoadError",
            "PolicySet",
            "Stance",
            "load_policy_set",
        ]
    )


def test_load_policy_set_signature():
    assert str(inspect.signature(load_policy_set)) == (
        "(paths: 'Path | Sequence[Path]', *, "
        "registry: 'Mapping[str, Mapping[str, Any]] | None' = None, "
        "backend: 'str' = 'cel-expr-python', "
        "limits: 'Limits' = Limits(cpu_time_s=0.05), "
        "clock: 'Callable[[], datetime] | None' = None, "
        "limit_names: 'Sequence[str]' = (), "
        "hooks: 'Mapping[str, Mapping[str, str]] | None' = None) -> 'PolicySet'"
    )


def test_evaluate_all_signature():
    assert str(inspect.signature(PolicySet.evaluate_all)) == (
        "(self, phase: 'Phase', req: 'EvalRequest', *, input_free: 'bool' = False, "
        "without_hooks: 'bool' = False, activation: 'Any' = None) -> 'Evaluation'"
    )
    assert str(inspect.signature(PolicySet.activation)) == (
        "(self, phase: 'Phase', req: 'EvalRequest') -> 'Any'"
    )


def test_value_objects_have_the_agreed_fields():
    assert fields(EvalRequest) == [
        "actor",
        "capability",
        "capability_policies",
        "surface",
        "input",
        "now",
        "correlation_id",
        "metadata",
        "approval",
        "hooks",  # the gateway's pre-hooks' context (docs/hooks.md)
        "limits",  # what is left of each limit, execution phase (docs/limits.md)
    ]
    assert fields(Stance) == ["policy", "mode", "effect", "rule", "message", "error"]
    assert fields(ApprovalRequirement) == [
        "reasons",
        "roles",
        "expires_in",
        "policies",
        "grantable",  # grants, quorum and escalation (docs/approvals.md)
        "quorum",
        "distinct_roles",
        "escalate_after",
        "escalation_roles",
    ]
    assert fields(Evaluation) == [
        "decision",
        "stances",
        "message",
        "approval",
        "failed",
        "duration_s",
    ]
    assert fields(LoadIssue) == ["path", "line", "column", "policy", "rule", "message"]
    assert fields(Limits) == ["cpu_time_s"]


def test_value_objects_are_frozen():
    request = EvalRequest(actor={}, capability={})

    with pytest.raises(dataclasses.FrozenInstanceError):
        request.surface = "x"  # type: ignore[misc]
    assert request.metadata == {}


def test_decisions_and_phases_have_the_agreed_values():
    assert [(d.name, d.value) for d in Decision] == [
        ("ALLOW", 0),
        ("REQUIRE_APPROVAL", 1),
        ("HIDE", 2),
        ("DENY", 3),
    ]
    assert [p.value for p in Phase] == ["discovery", "invocation", "execution"]


def test_the_policy_package_never_imports_the_gateway():
    offenders = []
    for path in POLICY_DIR.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] == "gateway"]
    assert offenders == []


def test_policy_modules_stay_small():
    sizes = {p.name: len(p.read_text().splitlines()) for p in POLICY_DIR.rglob("*.py")}
    assert {name: n for name, n in sizes.items() if n > 300} == {}
