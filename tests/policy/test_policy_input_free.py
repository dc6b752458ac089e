"""Which policies never read `input` (decidable before input validation, ADR 0016), and the
input-free part of a phase: `hides_without_input` and `evaluate_all(..., input_free=True)`."""

from __future__ import annotations

from policy import Decision, Phase
from tests.policy.conftest import LoadPolicies, MakeRequest

POLICIES = """
policies:
  - name: roles-hide
    match: {tags: [orders]}
    rules:
      - when: "!('admin' in actor.roles)"
        effect: hide
  - name: amount-hide
    rules:
      - when: has(input.amount) && input.amount > 5
        effect: hide
  - name: loop-variable-named-input
    rules:
      - when: "[1, 2].all(input, input > 0) && actor.kind == 'robot'"
        effect: deny
  - name: shadow-hide
    mode: shadow
    rules:
      - when: "true"
        effect: hide
"""


def test_a_policy_is_input_free_exactly_when_no_rule_reads_input(
    load_policies: LoadPolicies,
) -> None:
    policy_set = load_policies(POLICIES)
    free = {p.name: p.input_free for p in policy_set._policies}
    assert free == {
        "roles-hide": True,
        "amount-hide": False,
        "loop-variable-named-input": True,  # an iteration variable, not the input
        "shadow-hide": True,
    }


def test_only_the_input_free_policies_decide_before_validation(
    load_policies: LoadPolicies, make_request: MakeRequest
) -> None:
    policy_set = load_policies(POLICIES)
    req = make_request(roles=("support",), input=None)
    early = policy_set.evaluate_all(Phase.INVOCATION, req, input_free=True)
    assert [s.policy for s in early.stances] == [
        "roles-hide",
        "loop-variable-named-input",
        "shadow-hide",
    ]
    assert early.decision is Decision.HIDE
    capability = req.capability
    assert policy_set.hides_without_input(capability, ())
    other = {**capability, "id": "billing.pay", "tags": ["billing"]}
    # Only amount-hide (reads input) and a shadow hide (never enforced) apply: nothing to do.
    assert not policy_set.hides_without_input(other, ())
