"""A rule's `approval` options of issue 28 (grantable, quorum, distinct_roles, escalation):
read from the file, merged toward the stricter, and refused with a position when malformed."""

from __future__ import annotations

from datetime import timedelta

import pytest

from policy import Decision, Phase, PolicyLoadError, load_policy_set

ALL_OPTIONS = """
policies:
  - name: payments
    rules:
      - when: "true"
        effect: require-approval
        approval:
          approvers: {roles: [approver]}
          grantable: false
          quorum: 2
          distinct_roles: [finance, risk]
          escalate_after: 30m
          escalation_roles: [cfo]
"""

TWO_PARTS = """
policies:
  - name: refunds
    rules:
      - when: "true"
        effect: require-approval
        approval:
          quorum: 3
          distinct_roles: [finance]
          escalate_after: 1h
          escalation_roles: [head-of-support]
  - name: payments
    rules:
      - when: "true"
        effect: require-approval
        approval:
          grantable: false
          quorum: 2
          distinct_roles: [risk, legal]
          escalate_after: 20m
          escalation_roles: [cfo]
  - name: plain
    rules:
      - when: "true"
        effect: require-approval
"""


def test_every_option_is_read_from_the_rule(load_policies, make_request):
    approval = load_policies(ALL_OPTIONS).evaluate_all(Phase.INVOCATION, make_request()).approval

    assert approval is not None
    assert approval.grantable is False
    assert approval.quorum == 2
    assert approval.distinct_roles == frozenset({"finance", "risk"})
    assert approval.escalate_after == timedelta(minutes=30)
    assert approval.escalation_roles == frozenset({"cfo"})


def test_a_requirement_without_options_is_grantable_by_one_approver_and_never_escalates(
    load_policies, make_request
):
    policy_set = load_policies(
        """
        policies:
          - name: plain
            rules: [{when: "true", effect: require-approval, approval: {reason: Look.}}]
        """
    )

    approval = policy_set.evaluate_all(Phase.INVOCATION, make_request()).approval

    assert approval is not None
    assert (approval.grantable, approval.quorum) == (True, 1)
    assert approval.distinct_roles == frozenset()
    assert (approval.escalate_after, approval.escalation_roles) == (None, frozenset())


def test_parts_merge_toward_the_stricter(load_policies, make_request):
    evaluation = load_policies(TWO_PARTS).evaluate_all(Phase.INVOCATION, make_request())

    assert evaluation.decision is Decision.REQUIRE_APPROVAL
    approval = evaluation.approval
    assert approval is not None
    assert approval.grantable is False  # one part says false
    assert approval.quorum == 3  # the largest
    assert approval.distinct_roles == frozenset({"finance", "risk", "legal"})  # the union
    assert approval.escalate_after == timedelta(hours=1)  # the latest of those declaring one
    # Their escalation roles and the roles of the part declaring none ("plain": the default).
    assert approval.escalation_roles == frozenset({"head-of-support", "cfo", "approver"})
    assert approval.policies == ("refunds", "payments", "plain")


def test_the_quorum_is_at_least_one_approver_per_distinct_role(load_policies, make_request):
    policy_set = load_policies(
        """
        policies:
          - name: a
            rules:
              - when: "true"
                effect: require-approval
                approval: {quorum: 2}
          - name: b
            rules:
              - when: "true"
                effect: require-approval
                approval: {distinct_roles: [finance, risk, legal]}
        """
    )

    approval = policy_set.evaluate_all(Phase.INVOCATION, make_request()).approval

    assert approval is not None
    assert approval.quorum == 3


def test_all_grantable_parts_stay_grantable(load_policies, make_request):
    policy_set = load_policies(
        """
        policies:
          - name: a
            rules: [{when: "true", effect: require-approval, approval: {grantable: true}}]
          - name: b
            rules: [{when: "true", effect: require-approval}]
        """
    )

    approval = policy_set.evaluate_all(Phase.INVOCATION, make_request()).approval

    assert approval is not None
    assert approval.grantable is True


def _errors(write_policies, text: str) -> list[str]:
    directory = write_policies(p__yaml=text)
    with pytest.raises(PolicyLoadError) as caught:
        load_policy_set(directory)
    return [str(issue).removeprefix(f"{directory}/") for issue in caught.value.errors]


RULE = """\
policies:
  - name: pay
    rules:
      - when: "true"
        effect: require-approval
        approval:
          {key}: {value}
"""


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("quorum", "0", "quorum: 0 is less than the minimum of 1"),
        ("quorum", "11", "quorum: 11 is greater than the maximum of 10"),
        ("quorum", "two", "quorum: 'two' is not of type 'integer'"),
        ("grantable", "'no'", "grantable: 'no' is not of type 'boolean'"),
        ("distinct_roles", "[]", "distinct_roles: [] should be non-empty"),
        ("distinct_roles", "[a, b, c, d, e, f]", "is too long"),
        ("distinct_roles", "[a, a]", "has non-unique elements"),
        ("escalate_after", "soon", "is not a duration like 90s, 15m or 1h30m"),
    ],
)
def test_malformed_options_are_refused_at_their_value(write_policies, key, value, message):
    errors = _errors(write_policies, RULE.format(key=key, value=value))

    assert len(errors) == 1, errors
    assert errors[0].startswith("p.yaml:7:"), errors
    assert "pay/rules[0]: " in errors[0]
    assert message in errors[0]


def test_escalation_roles_without_escalate_after_is_a_load_error_at_the_key(write_policies):
    errors = _errors(write_policies, RULE.format(key="escalation_roles", value="[cfo]"))

    assert errors == ["p.yaml:7:11: pay/rules[0]: escalation_roles needs escalate_after"]


def test_escalate_after_without_escalation_roles_is_a_load_error_at_the_key(write_policies):
    errors = _errors(write_policies, RULE.format(key="escalate_after", value="1h"))

    assert errors == ["p.yaml:7:11: pay/rules[0]: escalate_after needs escalation_roles"]


def test_a_zero_escalate_after_is_refused_at_the_key(write_policies):
    text = RULE.format(key="escalate_after", value="0s") + "          escalation_roles: [cfo]\n"

    errors = _errors(write_policies, text)

    assert errors == ["p.yaml:7:11: pay/rules[0]: duration '0s' must be positive"]
