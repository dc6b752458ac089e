"""Which policies apply: phases, match selectors, capability scope, and stance order."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from policy import Decision, Phase, load_policy_set

SELECTORS = """
policies:
  - name: by-glob
    match: {capabilities: ["orders.*"]}
    rules: [{when: "true", effect: allow}]
  - name: by-deep-glob
    match: {capabilities: ["admin.**"]}
    rules: [{when: "true", effect: allow}]
  - name: by-tag
    match: {tags: [billing, payments]}
    rules: [{when: "true", effect: allow}]
  - name: by-expr
    match: {expr: "capability.side_effect != 'none'"}
    rules: [{when: "true", effect: allow}]
  - name: by-all-three
    match: {capabilities: ["orders.*"], tags: [billing], expr: "surface == 'mcp'"}
    rules: [{when: "true", effect: allow}]
  - name: everywhere
    rules: [{when: "true", effect: allow}]
"""


def applied(policy_set, phase, request):
    return [s.policy for s in policy_set.evaluate_all(phase, request).stances]


def test_match_selectors_must_all_hold(load_policies, make_request):
    policy_set = load_policies(SELECTORS)

    refund = make_request("orders.refund", tags=["billing"], side_effect="write", surface="mcp")
    assert applied(policy_set, Phase.INVOCATION, refund) == [
        "by-glob",
        "by-tag",
        "by-expr",
        "by-all-three",
        "everywhere",
    ]
    read = make_request("orders.get", tags=["orders"], side_effect="none", surface="grpc")
    assert applied(policy_set, Phase.INVOCATION, read) == ["by-glob", "everywhere"]
    purge = make_request("admin.orders.purge", tags=["admin"], side_effect="destructive")
    assert applied(policy_set, Phase.INVOCATION, purge) == ["by-deep-glob", "by-expr", "everywhere"]


def test_policies_run_only_in_their_phases_and_default_to_invocation(load_policies, make_request):
    policy_set = load_policies(
        """
        policies:
          - name: default-phase
            rules: [{when: "true", effect: allow}]
          - name: discovery-only
            phases: [discovery]
            rules: [{when: "true", effect: allow}]
          - name: both
            phases: [discovery, execution]
            rules: [{when: "true", effect: allow}]
        """
    )

    assert applied(policy_set, Phase.DISCOVERY, make_request()) == ["discovery-only", "both"]
    assert applied(policy_set, Phase.INVOCATION, make_request()) == ["default-phase"]
    assert applied(policy_set, Phase.EXECUTION, make_request()) == ["both"]


def test_evaluate_all_accepts_the_phase_as_text(load_policies, make_request):
    policy_set = load_policies("policies: [{name: p, rules: [{when: 'true', effect: deny}]}]")

    assert policy_set.evaluate_all("invocation", make_request()).decision is Decision.DENY


CAPABILITY_SCOPED = """
policies:
  - name: global-one
    rules: [{when: "true", effect: allow}]
  - name: listed-a
    scope: capability
    rules: [{when: "true", effect: allow}]
  - name: listed-b
    scope: capability
    phases: [invocation, execution]
    rules: [{when: "true", effect: deny, message: b says no}]
  - name: global-two
    rules: [{when: "true", effect: allow}]
"""


def test_capability_scoped_policies_run_only_where_listed(load_policies, make_request):
    policy_set = load_policies(CAPABILITY_SCOPED)

    evaluation = policy_set.evaluate_all(Phase.INVOCATION, make_request(policies=[]))

    assert [s.policy for s in evaluation.stances] == ["global-one", "global-two"]
    assert evaluation.decision is Decision.ALLOW


def test_listed_policies_run_after_global_ones_in_the_capabilitys_order_and_once(
    load_policies, make_request
):
    policy_set = load_policies(CAPABILITY_SCOPED)
    request = make_request(policies=["listed-b", "listed-a", "listed-b"])

    evaluation = policy_set.evaluate_all(Phase.INVOCATION, request)

    assert [s.policy for s in evaluation.stances] == [
        "global-one",
        "global-two",
        "listed-b",
        "listed-a",
    ]
    assert evaluation.decision is Decision.DENY
    assert evaluation.message == "b says no"


def test_listed_policies_respect_their_phases(load_policies, make_request):
    policy_set = load_policies(CAPABILITY_SCOPED)
    request = make_request(policies=["listed-a", "listed-b"])

    assert applied(policy_set, Phase.EXECUTION, request) == ["listed-b"]


def test_listing_a_global_policy_does_not_run_it_twice(load_policies, make_request):
    policy_set = load_policies(CAPABILITY_SCOPED)

    request = make_request(policies=["global-one"])

    assert applied(policy_set, Phase.INVOCATION, request) == ["global-one", "global-two"]


def test_a_capability_listing_an_unknown_policy_fails_closed(load_policies, make_request):
    policy_set = load_policies(CAPABILITY_SCOPED)

    request = make_request(policies=["missing", "listed-a"])

    evaluation = policy_set.evaluate_all(Phase.INVOCATION, request)

    assert evaluation.decision is Decision.DENY
    assert evaluation.failed is True
    assert [s.policy for s in evaluation.stances][-2:] == ["missing", "listed-a"]
    assert evaluation.stances[-2].error == "the capability lists an unknown policy"


def test_load_order_is_lexicographic_by_path_then_document_order(write_policies, make_request):
    directory = write_policies(
        b__yaml="policies: [{name: b1, rules: [{when: 'true', effect: deny, message: from b}]}]",
        a__yaml="""
        policies: [{name: a1, rules: [{when: 'true', effect: allow}]}]
        ---
        policies: [{name: a2, rules: [{when: 'true', effect: deny, message: from a}]}]
        """,
    )
    (directory / "sub").mkdir()
    (directory / "sub" / "c.yml").write_text(
        "policies: [{name: c1, rules: [{when: 'true', effect: deny, message: from c}]}]"
    )
    policy_set = load_policy_set(directory)
    evaluation = policy_set.evaluate_all(Phase.INVOCATION, make_request())

    assert policy_set.policy_names == ("a1", "a2", "b1", "c1")
    assert evaluation.message == "from a"


def test_test_suites_and_dot_files_are_not_policies(write_policies):
    directory = write_policies(
        p__yaml="policies: [{name: real, rules: [{when: 'true', effect: allow}]}]",
        p_test__yaml="tests: []",
        **{".hidden.yaml": "policies: [{name: hidden, rules: [{when: 'true', effect: allow}]}]"},
    )
    assert load_policy_set(directory).policy_names == ("real",)


def test_the_revision_changes_with_content_and_not_with_location(write_policies, tmp_path):
    text = "policies: [{name: p, rules: [{when: 'true', effect: allow}]}]"
    first = load_policy_set(write_policies(p__yaml=text))
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "p.yaml").write_text(text)
    moved = load_policy_set(other)
    (other / "p.yaml").write_text(text.replace("allow", "deny"))
    changed = load_policy_set(other)

    assert first.revision == moved.revision
    assert changed.revision != first.revision
    assert len(first.revision) == 12
    int(first.revision, 16)


def test_request_now_falls_back_to_the_sets_injected_clock(load_policies, make_request):
    night = datetime(2025, 3, 4, 23, 0, tzinfo=UTC)
    policy_set = load_policies(
        "policies: [{name: night, rules: [{when: 'request.now.getHours() >= 22', effect: deny}]}]",
        clock=lambda: night,
    )
    day_request = make_request()  # now = 10:00 UTC

    assert policy_set.evaluate_all(Phase.INVOCATION, day_request).decision is Decision.ALLOW
    undated = replace(day_request, now=None)
    assert policy_set.evaluate_all(Phase.INVOCATION, undated).decision is Decision.DENY
