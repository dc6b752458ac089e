"""Hostile or malformed request data yields error stances within the bounds, never a hang."""

from __future__ import annotations

import time

import pytest

from policy import ITERATION_BUDGET, Decision, Limits, Phase

BACKENDS = ["cel-expr-python", "cel-python"]

POLICIES = """
policies:
  - name: amount-limit
    rules: [{when: "input.amount > 500", effect: deny}]
  - name: item-scan
    rules: [{when: "input.items.exists(i, i == 'forbidden')", effect: deny}]
  - name: code-format
    rules: [{when: "!input.code.matches('^(a+)+$')", effect: deny}]
  - name: role-check
    rules: [{when: "'admin' in actor.roles", effect: allow}]
"""


def stances_by_policy(evaluation):
    return {s.policy: s for s in evaluation.stances}


@pytest.mark.parametrize("backend", BACKENDS)
def test_missing_input_keys_fail_closed(load_policies, make_request, backend):
    policy_set = load_policies(POLICIES, backend=backend)

    evaluation = policy_set.evaluate_all(Phase.INVOCATION, make_request(input={}))

    stances = stances_by_policy(evaluation)
    assert stances["amount-limit"].error is not None
    assert stances["item-scan"].error is not None
    assert stances["role-check"].error is None
    assert (evaluation.decision, evaluation.failed) == (Decision.DENY, True)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "value",
    [{"amount": "lots"}, {"amount": [1]}, {"amount": None}, {"amount": {"cents": 1}}],
    ids=["text", "list", "null", "map"],
)
def test_wrong_input_types_fail_closed(load_policies, make_request, backend, value):
    policy_set = load_policies(POLICIES, backend=backend)

    evaluation = policy_set.evaluate_all(Phase.INVOCATION, make_request(input=value))

    assert stances_by_policy(evaluation)["amount-limit"].error is not None
    assert evaluation.decision is Decision.DENY


@pytest.mark.parametrize("backend", BACKENDS)
def test_input_that_is_not_an_object_fails_closed(load_policies, make_request, backend):
    policy_set = load_policies(POLICIES, backend=backend)

    for value in (None, 42, "text", [1, 2]):
        evaluation = policy_set.evaluate_all(Phase.INVOCATION, make_request(input=value))
        assert stances_by_policy(evaluation)["amount-limit"].error is not None


@pytest.mark.parametrize("backend", BACKENDS)
def test_integers_beyond_64_bits_fail_closed_only_where_input_is_read(
    load_policies, make_request, backend
):
    policy_set = load_policies(POLICIES, backend=backend)

    evaluation = policy_set.evaluate_all(
        Phase.INVOCATION, make_request(input={"amount": 2**64 + 1, "items": [], "code": "a"})
    )

    stances = stances_by_policy(evaluation)
    assert stances["amount-limit"].error == "when: integer out of range in the request"
    assert stances["role-check"].error is None
    assert evaluation.failed is True


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_overflow_in_arithmetic_fails_closed(load_policies, make_request, backend):
    policy_set = load_policies(
        "policies: [{name: sum, rules: [{when: 'input.amount + 1 > 0', effect: allow}]}]",
        backend=backend,
    )

    evaluation = policy_set.evaluate_all(
        Phase.INVOCATION, make_request(input={"amount": 2**63 - 1})
    )

    assert evaluation.stances[0].error == "when: integer overflow"
    assert evaluation.decision is Decision.DENY


def test_a_list_past_the_iteration_budget_fails_closed_quickly(load_policies, make_request):
    policy_set = load_policies(POLICIES, limits=Limits(cpu_time_s=5.0))
    huge = {"amount": 1, "code": "a", "items": ["ok"] * 200_000}

    started = time.perf_counter()
    evaluation = policy_set.evaluate_all(Phase.INVOCATION, make_request(input=huge))
    elapsed = time.perf_counter() - started

    assert stances_by_policy(evaluation)["item-scan"].error == "when: iteration budget exceeded"
    assert evaluation.failed is True
    assert elapsed < 2.0


def test_the_iteration_budget_boundary(load_policies, make_request):
    policy_set = load_policies(POLICIES, limits=Limits(cpu_time_s=5.0))

    def scan(length):
        request = make_request(input={"amount": 1, "code": "a", "items": ["ok"] * length})
        return stances_by_policy(policy_set.evaluate_all(Phase.INVOCATION, request))["item-scan"]

    assert scan(ITERATION_BUDGET - 1).error is None
    assert scan(ITERATION_BUDGET).error == "when: iteration budget exceeded"


def test_a_huge_input_past_the_cpu_time_limit_is_discarded_not_awaited(load_policies, make_request):
    policy_set = load_policies(POLICIES)  # default 50 ms
    huge = {"amount": 1, "code": "a", "items": ["ok"] * 2_000_000}

    started = time.perf_counter()
    evaluation = policy_set.evaluate_all(Phase.INVOCATION, make_request(input=huge))

    assert time.perf_counter() - started < 5.0
    assert evaluation.failed is True
    errors = [s.error for s in evaluation.stances if s.error]
    assert any("time limit" in e for e in errors)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_catastrophic_backtracking_regex_runs_in_linear_time(
    load_policies, make_request, backend
):
    policy_set = load_policies(POLICIES, backend=backend, limits=Limits(cpu_time_s=5.0))
    nasty = {"amount": 1, "items": [], "code": "a" * 50_000 + "!"}

    started = time.perf_counter()
    evaluation = policy_set.evaluate_all(Phase.INVOCATION, make_request(input=nasty))

    assert time.perf_counter() - started < 2.0
    assert stances_by_policy(evaluation)["code-format"].effect is Decision.DENY
    assert stances_by_policy(evaluation)["code-format"].error is None


def test_an_actor_field_of_the_wrong_type_fails_closed(load_policies, make_request):
    policy_set = load_policies(POLICIES)
    request = make_request(input={"amount": 1, "items": [], "code": "a"})
    odd_actor = type(request)(
        actor={"id": "u", "roles": "admin"},  # a string where a list belongs
        capability=request.capability,
        input=request.input,
        now=request.now,
    )

    evaluation = policy_set.evaluate_all(Phase.INVOCATION, odd_actor)

    assert stances_by_policy(evaluation)["role-check"].error == "when: no matching overload"
    assert evaluation.failed is True


def test_a_string_cel_cpp_cannot_hold_fails_closed(load_policies, make_request):
    policy_set = load_policies(POLICIES)

    evaluation = policy_set.evaluate_all(
        Phase.INVOCATION, make_request(input={"amount": 1, "items": ["\ud800"], "code": "a"})
    )

    stances = stances_by_policy(evaluation)
    assert stances["item-scan"].error == "when: evaluation error"
    assert stances["role-check"].error is None
    assert evaluation.failed is True
