"""Several approval requirements merge into one that an approver must satisfy entirely."""

from __future__ import annotations

from datetime import timedelta

from policy import Decision, Phase

THREE_REQUIREMENTS = """
policies:
  - name: big-refund
    rules:
      - when: "true"
        effect: require-approval
        message: Refunds over 500 need a manager.
        approval: {reason: Refund above limit., approvers: {roles: [manager]}, expires_in: 4h}
  - name: risky
    rules:
      - when: "true"
        effect: require-approval
        approval:
          reason: High-risk capability.
          approvers: {roles: [security, manager]}
          expires_in: 1h30m
  - name: plain
    rules:
      - when: "true"
        effect: require-approval
        message: Someone must look at this.
"""


def test_requirements_merge_reasons_roles_expiry_and_policies(load_policies, make_request):
    evaluation = load_policies(THREE_REQUIREMENTS).evaluate_all(Phase.INVOCATION, make_request())

    assert evaluation.decision is Decision.REQUIRE_APPROVAL
    approval = evaluation.approval
    assert approval is not None
    assert approval.reasons == (
        "Refund above limit.",
        "High-risk capability.",
        "Someone must look at this.",
    )
    assert approval.roles == frozenset({"manager", "security", "approver"})
    assert approval.expires_in == timedelta(hours=1, minutes=30)
    assert approval.policies == ("big-refund", "risky", "plain")
    assert evaluation.message == "Refunds over 500 need a manager."


def test_a_requirement_without_roles_asks_for_the_default_approver_role(
    load_policies, make_request
):
    policy_set = load_policies(
        """
        policies:
          - name: plain
            rules: [{when: "true", effect: require-approval}]
        """
    )

    approval = policy_set.evaluate_all(Phase.INVOCATION, make_request()).approval

    assert approval is not None
    assert approval.roles == frozenset({"approver"})
    assert approval.expires_in is None
    assert approval.reasons == ("required by policy plain",)


def test_identical_reasons_are_kept_once(load_policies, make_request):
    policy_set = load_policies(
        """
        policies:
          - name: a
            rules: [{when: "true", effect: require-approval, message: Needs a look.}]
          - name: b
            rules: [{when: "true", effect: require-approval, message: Needs a look.}]
        """
    )

    approval = policy_set.evaluate_all(Phase.INVOCATION, make_request()).approval

    assert approval is not None
    assert approval.reasons == ("Needs a look.",)
    assert approval.policies == ("a", "b")


def test_there_is_no_approval_requirement_when_a_deny_wins(load_policies, make_request):
    policy_set = load_policies(
        THREE_REQUIREMENTS
        + """
  - name: stop
    rules: [{when: "true", effect: deny, message: No.}]
"""
    )

    evaluation = policy_set.evaluate_all(Phase.INVOCATION, make_request())

    assert evaluation.decision is Decision.DENY
    assert evaluation.approval is None
    assert evaluation.message == "No."


def test_shadow_requirements_do_not_join_the_merged_requirement(load_policies, make_request):
    policy_set = load_policies(
        """
        policies:
          - name: real
            rules:
              - {when: "true", effect: require-approval, approval: {approvers: {roles: [manager]}}}
          - name: trial
            mode: shadow
            rules:
              - when: "true"
                effect: require-approval
                approval: {approvers: {roles: [cfo]}, expires_in: 5m}
        """
    )

    approval = policy_set.evaluate_all(Phase.INVOCATION, make_request()).approval

    assert approval is not None
    assert approval.roles == frozenset({"manager"})
    assert approval.expires_in is None
    assert approval.policies == ("real",)


def test_require_approval_is_allowed_in_discovery_and_reported_there(load_policies, make_request):
    policy_set = load_policies(
        """
        policies:
          - name: gated
            phases: [discovery, invocation]
            rules: [{when: "capability.risk == 'high'", effect: require-approval}]
        """
    )

    evaluation = policy_set.evaluate_all(Phase.DISCOVERY, make_request(input=None))

    assert evaluation.decision is Decision.REQUIRE_APPROVAL
