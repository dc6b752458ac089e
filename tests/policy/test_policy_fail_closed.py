"""SI-7: an error, a non-bool result or a late result is an error stance that denies."""

from __future__ import annotations

import pytest

from policy import Decision, Limits, Phase

ERRORS = """
policies:
  - name: reads-a-missing-key
    rules: [{when: "input.missing > 1", effect: allow}]
  - name: fine
    rules: [{when: "true", effect: allow}]
"""


def test_an_evaluation_error_is_an_error_stance_that_denies(load_policies, make_request):
    evaluation = load_policies(ERRORS).evaluate_all(
        Phase.INVOCATION, make_request(input={"amount": 1})
    )

    failing = evaluation.stances[0]
    assert failing.effect is Decision.DENY
    assert failing.rule == 0
    assert failing.error == "when: no such key 'missing'"
    assert failing.message is None
    assert evaluation.decision is Decision.DENY
    assert evaluation.failed is True
    assert evaluation.message is None
    assert evaluation.stances[1].effect is Decision.ALLOW  # every policy still ran


def test_an_explicit_deny_next_to_an_error_is_a_denial_not_a_failure(load_policies, make_request):
    policy_set = load_policies(
        ERRORS
        + """
  - name: refuses
    rules: [{when: "true", effect: deny, message: Not today.}]
"""
    )

    evaluation = policy_set.evaluate_all(Phase.INVOCATION, make_request(input={}))

    assert evaluation.decision is Decision.DENY
    assert evaluation.failed is False
    assert evaluation.message == "Not today."


def test_an_error_outweighs_hide_and_approval(load_policies, make_request):
    policy_set = load_policies(
        ERRORS
        + """
  - name: hides
    rules: [{when: "true", effect: hide}]
  - name: gates
    rules: [{when: "true", effect: require-approval}]
"""
    )

    evaluation = policy_set.evaluate_all(Phase.INVOCATION, make_request(input={}))

    assert (evaluation.decision, evaluation.failed) == (Decision.DENY, True)
    assert evaluation.approval is None


def test_a_non_bool_result_fails_closed(load_policies, make_request):
    policy_set = load_policies(
        """
        policies:
          - name: returns-text
            rules: [{when: "input.reason", effect: allow}]
        """
    )

    evaluation = policy_set.evaluate_all(Phase.INVOCATION, make_request(input={"reason": "x"}))

    assert evaluation.stances[0].error == "when: result is STRING, not bool"
    assert (evaluation.decision, evaluation.failed) == (Decision.DENY, True)


def test_a_failing_match_expression_fails_closed(load_policies, make_request):
    policy_set = load_policies(
        """
        policies:
          - name: odd-match
            match: {expr: "actor.attributes.region == 'eu'"}
            rules: [{when: "true", effect: allow}]
        """
    )

    evaluation = policy_set.evaluate_all(Phase.INVOCATION, make_request())

    (stance,) = evaluation.stances
    assert stance.rule is None
    assert stance.error == "match.expr: no such key 'region'"
    assert evaluation.failed is True


def test_a_result_past_the_cpu_time_limit_is_discarded(load_policies, make_request):
    policy_set = load_policies(
        """
        policies:
          - name: slow
            rules: [{when: "input.items.all(i, i >= 0)", effect: allow}]
        """,
        limits=Limits(cpu_time_s=1e-9),
    )

    evaluation = policy_set.evaluate_all(
        Phase.INVOCATION, make_request(input={"items": list(range(2000))})
    )

    (stance,) = evaluation.stances
    assert stance.effect is Decision.DENY
    assert stance.error is not None
    assert "time limit" in stance.error
    assert evaluation.failed is True


def test_the_default_cpu_time_limit_is_fifty_milliseconds():
    assert Limits().cpu_time_s == 0.050
    with pytest.raises(ValueError, match="positive"):
        Limits(cpu_time_s=0)


def test_a_shadow_policy_that_fails_is_recorded_but_not_enforced(load_policies, make_request):
    policy_set = load_policies(
        """
        policies:
          - name: trial
            mode: shadow
            rules: [{when: "input.missing", effect: deny}]
        """
    )

    evaluation = policy_set.evaluate_all(Phase.INVOCATION, make_request(input={}))

    assert evaluation.stances[0].error is not None
    assert (evaluation.decision, evaluation.failed) == (Decision.ALLOW, False)


@pytest.mark.parametrize(
    ("when", "value", "error"),
    [
        ("input.text.matches(input.secret)", "s3cr3t-(unbalanced", "invalid regular expression"),
        ("input.secret > 0", 2**70 + 12345, "integer out of range in the request"),
        ("input.table[input.secret] == 1", "s3cr3t-key", "no such key"),
        ("int(input.secret) > 0", "s3cr3t", "type conversion failed"),
    ],
)
def test_error_text_never_quotes_request_values(load_policies, make_request, when, value, error):
    policy_set = load_policies(
        f"policies: [{{name: p, rules: [{{when: '{when}', effect: allow}}]}}]"
    )
    request = make_request(input={"text": "x", "table": {}, "secret": value})

    (stance,) = policy_set.evaluate_all(Phase.INVOCATION, request).stances

    assert stance.error == f"when: {error}"
    assert str(value) not in stance.error
