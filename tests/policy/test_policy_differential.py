"""One corpus, two backends: cel-expr-python and cel-python must agree case by case.

The corpus is every example suite plus `tests/policy/corpus/`, and a few generated cases
that YAML cannot express. Where cel-python cannot match cel-cpp the case is listed in
EXPECTED_DIFFERENCES (and in docs/policies.md); any other difference fails, and so does
a listed case that stops differing, so the table never goes stale.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from policy import ITERATION_BUDGET, EvalRequest, Limits, Phase, load_policy_set
from policy.suites import run_suites

ROOT = Path(__file__).resolve().parents[2]
CORPUS = [ROOT / "examples" / "policies", Path(__file__).parent / "corpus"]
DOCS = ROOT / "docs" / "policies.md"
BACKENDS = ("cel-expr-python", "cel-python")
GENEROUS = Limits(cpu_time_s=10.0)  # evaluation time is not what this test compares

INT_DOUBLE = "cel-python has no cross-type numeric comparison: int vs double is an error"
MAP_NULL = "cel-python cannot compare a map or a number with null (`!=`/`==` is an error)"
EXPECTED_DIFFERENCES = {
    ("semantics", "an int above a double literal"): INT_DOUBLE,
    ("semantics", "an int equal to a double literal"): INT_DOUBLE,
    ("semantics", "a map is not null"): MAP_NULL,
    ("semantics", "a number does not equal null"): MAP_NULL,
    ("semantics", "has on a missing parent"): (
        "cel-python's has() is false when a parent is missing; cel-cpp reports no such key"
    ),
    ("execution", "an approval older than an hour is refused"): MAP_NULL,
    ("execution", "an approval given by the requester is refused"): MAP_NULL,
    ("generated", "a list at the iteration budget"): (
        "cel-cpp stops comprehensions at 10,000 iterations; cel-python has no budget"
    ),
    ("generated", "a lone surrogate in a string"): (
        "cel-cpp cannot hold a lone surrogate (error); cel-python evaluates the string"
    ),
    ("generated", "roles given as a string"): (
        "`in` on a string: cel-cpp has no such overload (error); cel-python answers false"
    ),
}

SCAN = """
policies:
  - name: scan
    rules: [{when: "input.items.exists(i, i == 'forbidden')", effect: deny}]
  - name: roles
    rules: [{when: "'admin' in actor.roles", effect: allow}]
"""


def _request(items, roles=("agent",)):
    return EvalRequest(
        actor={"id": "u", "kind": "user", "roles": roles},
        capability={"id": "orders.refund"},
        input={"items": items},
    )


GENERATED = {
    "a list below the iteration budget": _request(["ok"] * (ITERATION_BUDGET - 1)),
    "a list at the iteration budget": _request(["ok"] * ITERATION_BUDGET),
    "a lone surrogate in a string": _request(["\ud800"]),
    "roles given as a string": _request([], roles="admin"),
}


def signature(evaluation):
    """What must agree: the decision and every stance (error text aside)."""
    stances = tuple(
        (s.policy, s.mode, s.effect, s.rule, s.message, s.error is None) for s in evaluation.stances
    )
    return evaluation.decision, evaluation.failed, evaluation.message, stances


def corpus_outcomes(backend):
    outcomes = {}
    for directory in CORPUS:
        report = run_suites(directory, load_policy_set(directory, backend=backend, limits=GENEROUS))
        assert report.errors == []
        outcomes.update({(r.suite, r.name): signature(r.evaluation) for r in report.results})
    return outcomes


def generated_outcomes(backend, tmp_path):
    (tmp_path / "scan.yaml").write_text(SCAN)
    policy_set = load_policy_set(tmp_path, backend=backend, limits=GENEROUS)
    return {
        ("generated", name): signature(policy_set.evaluate_all(Phase.INVOCATION, request))
        for name, request in GENERATED.items()
    }


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    return {
        backend: corpus_outcomes(backend)
        | generated_outcomes(backend, tmp_path_factory.mktemp(backend))
        for backend in BACKENDS
    }


def test_the_corpus_is_substantial(outcomes):
    assert len(outcomes["cel-expr-python"]) >= 80


def test_both_backends_run_the_same_cases(outcomes):
    assert outcomes["cel-expr-python"].keys() == outcomes["cel-python"].keys()


def test_backends_differ_exactly_where_documented(outcomes):
    default, python = outcomes["cel-expr-python"], outcomes["cel-python"]

    differing = {case for case in default if default[case] != python[case]}

    assert differing == set(EXPECTED_DIFFERENCES)


def test_every_expected_difference_is_in_the_authoring_guide():
    guide = DOCS.read_text("utf-8")

    missing = [case for _, case in EXPECTED_DIFFERENCES if case not in guide]

    assert missing == []
