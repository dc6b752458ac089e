"""Combining stances: deny > hide > require-approval > allow; shadow stances never count."""

from __future__ import annotations

import itertools

import pytest

from policy import Decision, Phase
from policy.model import combine

EFFECTS = [Decision.ALLOW, Decision.REQUIRE_APPROVAL, Decision.HIDE, Decision.DENY]
EXPECTED = {
    # (first policy, second policy) -> combined; the seed's precedence, spelled out in full.
    (Decision.ALLOW, Decision.ALLOW): Decision.ALLOW,
    (Decision.ALLOW, Decision.REQUIRE_APPROVAL): Decision.REQUIRE_APPROVAL,
    (Decision.ALLOW, Decision.HIDE): Decision.HIDE,
    (Decision.ALLOW, Decision.DENY): Decision.DENY,
    (Decision.REQUIRE_APPROVAL, Decision.ALLOW): Decision.REQUIRE_APPROVAL,
    (Decision.REQUIRE_APPROVAL, Decision.REQUIRE_APPROVAL): Decision.REQUIRE_APPROVAL,
    (Decision.REQUIRE_APPROVAL, Decision.HIDE): Decision.HIDE,
    (Decision.REQUIRE_APPROVAL, Decision.DENY): Decision.DENY,
    (Decision.HIDE, Decision.ALLOW): Decision.HIDE,
    (Decision.HIDE, Decision.REQUIRE_APPROVAL): Decision.HIDE,
    (Decision.HIDE, Decision.HIDE): Decision.HIDE,
    (Decision.HIDE, Decision.DENY): Decision.DENY,
    (Decision.DENY, Decision.ALLOW): Decision.DENY,
    (Decision.DENY, Decision.REQUIRE_APPROVAL): Decision.DENY,
    (Decision.DENY, Decision.HIDE): Decision.DENY,
    (Decision.DENY, Decision.DENY): Decision.DENY,
}


def two_policies(first: Decision, second: Decision, *, second_mode: str = "enforce") -> str:
    return f"""
    policies:
      - name: first
        rules: [{{when: "true", effect: {first.label}, message: from first}}]
      - name: second
        mode: {second_mode}
        rules: [{{when: "true", effect: {second.label}, message: from second}}]
    """


def test_the_table_covers_every_pair_of_effects():
    assert set(EXPECTED) == set(itertools.product(EFFECTS, EFFECTS))


@pytest.mark.parametrize(("first", "second"), list(EXPECTED), ids=lambda d: d.label)
def test_two_enforced_stances_combine_by_precedence(load_policies, make_request, first, second):
    evaluation = load_policies(two_policies(first, second)).evaluate_all(
        Phase.INVOCATION, make_request()
    )

    assert evaluation.decision is EXPECTED[first, second]
    assert [s.effect for s in evaluation.stances] == [first, second]
    assert evaluation.failed is False


@pytest.mark.parametrize(("first", "second"), list(EXPECTED), ids=lambda d: d.label)
def test_the_message_comes_from_the_first_stance_with_the_winning_effect(
    load_policies, make_request, first, second
):
    evaluation = load_policies(two_policies(first, second)).evaluate_all(
        Phase.INVOCATION, make_request()
    )

    winner = EXPECTED[first, second]
    expected = (
        None if winner is Decision.ALLOW else ("from first" if first is winner else "from second")
    )
    assert evaluation.message == expected


@pytest.mark.parametrize("shadowed", EFFECTS, ids=lambda d: d.label)
def test_a_shadow_stance_is_recorded_but_never_changes_the_decision(
    load_policies, make_request, shadowed
):
    policy_set = load_policies(two_policies(Decision.ALLOW, shadowed, second_mode="shadow"))

    evaluation = policy_set.evaluate_all(Phase.INVOCATION, make_request())

    assert evaluation.decision is Decision.ALLOW
    assert evaluation.stances[1].mode == "shadow"
    assert evaluation.stances[1].effect is shadowed
    assert evaluation.approval is None
    assert evaluation.message is None


def test_when_every_policy_abstains_the_decision_is_allow(load_policies, make_request):
    policy_set = load_policies(
        """
        policies:
          - name: never
            rules: [{when: "false", effect: deny}]
        """
    )

    evaluation = policy_set.evaluate_all(Phase.INVOCATION, make_request())

    assert evaluation.decision is Decision.ALLOW
    assert [(s.policy, s.effect, s.rule) for s in evaluation.stances] == [("never", None, None)]


def test_with_no_applicable_policy_the_decision_is_allow_and_there_are_no_stances(
    load_policies, make_request
):
    policy_set = load_policies(
        """
        policies:
          - name: elsewhere
            match: {capabilities: [billing.*]}
            rules: [{when: "true", effect: deny}]
        """
    )

    evaluation = policy_set.evaluate_all(Phase.INVOCATION, make_request())

    assert evaluation.decision is Decision.ALLOW
    assert evaluation.stances == ()


def test_the_first_matching_rule_is_the_policys_stance(load_policies, make_request):
    policy_set = load_policies(
        """
        policies:
          - name: ordered
            rules:
              - {when: "false", effect: deny}
              - {when: "true", effect: require-approval}
              - {when: "true", effect: deny}
        """
    )

    (stance,) = policy_set.evaluate_all(Phase.INVOCATION, make_request()).stances

    assert (stance.effect, stance.rule) == (Decision.REQUIRE_APPROVAL, 1)


def test_combine_of_nothing_is_allow_and_otherwise_the_strongest():
    assert combine([]) is Decision.ALLOW
    assert combine([Decision.HIDE, Decision.REQUIRE_APPROVAL]) is Decision.HIDE


def test_decision_labels_round_trip():
    assert [d.label for d in EFFECTS] == ["allow", "require-approval", "hide", "deny"]
    assert all(Decision.from_label(d.label) is d for d in EFFECTS)
    with pytest.raises(ValueError, match="unknown effect"):
        Decision.from_label("permit")
