"""Every problem in a policy set is reported at once, each at file:line:column."""

from __future__ import annotations

import pytest

from policy import Decision, LoadIssue, Phase, PolicyLoadError, load_policy_set

MANY_PROBLEMS = """\
policies:
  - name: discovery-reads-input
    phases: [discovery]
    rules:
      - when: input.amount > 5
        effect: deny
      - when: actor.rolez == 1
        efect: deny
      - when: "'x'.matches('(')"
        effect: dney
  - name: execution-only
    phases: [execution]
    rules:
      - when: 1 + 2
        effect: require-approval
      - when: |
          actor.kind == 'user' &&
            approval.decided_at > 5
        effect: deny
        approval: {expires_in: 0s}
  - name: invocation
    rules:
      - when: actor.id.matches('[a-')
        effect: allow
      - when: approval == null
        effect: allow
      - when: nobody.knows
        effect: allow
  - name: discovery-reads-input
    rules: [{when: "true", effect: allow}]
"""

EXPECTED = [
    "p.yaml:5:20: discovery-reads-input/rules[0]: `input` is not bound in the discovery phase; "
    "it exists in the invocation and execution phases (in a rule's `when`)",
    "p.yaml:7:9: discovery-reads-input/rules[1]: missing required field 'effect'",
    "p.yaml:7:20: discovery-reads-input/rules[1]: actor has no field 'rolez'",
    "p.yaml:8:9: discovery-reads-input/rules[1]: unknown field 'efect' (did you mean 'effect'?)",
    "p.yaml:9:28: discovery-reads-input/rules[2]: invalid regex '(' in matches(): missing ): (",
    "p.yaml:10:17: discovery-reads-input/rules[2]: effect: 'dney' is not one of deny, hide, "
    "require-approval, allow",
    "p.yaml:14:15: execution-only/rules[0]: when must be a bool expression, but it is INT",
    "p.yaml:15:9: execution-only/rules[0]: require-approval is not allowed in an execution-only "
    "policy",
    "p.yaml:18:33: execution-only/rules[1]: found no matching overload for '_>_' applied to "
    "'(timestamp, int)'",
    "p.yaml:20:9: execution-only/rules[1]: approval is only allowed with require-approval, "
    "not deny",
    "p.yaml:20:20: execution-only/rules[1]: duration '0s' must be positive",
    "p.yaml:23:32: invocation/rules[0]: invalid regex '[a-' in matches(): missing ]: [a-",
    "p.yaml:25:15: invocation/rules[1]: `approval` is not bound in the invocation phase; it "
    "exists in the execution phase (in a rule's `when`)",
    "p.yaml:27:21: invocation/rules[2]: unknown variable 'nobody' (variables: actor, capability, "
    "surface, request, input, approval, const)",
    "p.yaml:29:11: discovery-reads-input: duplicate policy name 'discovery-reads-input' (first "
    "defined at {dir}/p.yaml:2:11)",
]


def load_error(directory) -> PolicyLoadError:
    with pytest.raises(PolicyLoadError) as caught:
        load_policy_set(directory)
    return caught.value


def relative(issues: list[LoadIssue], directory) -> list[str]:
    return [str(issue).removeprefix(f"{directory}/") for issue in issues]


def test_every_problem_is_reported_at_once_with_its_position(write_policies):
    directory = write_policies(p__yaml=MANY_PROBLEMS)

    error = load_error(directory)

    assert relative(error.errors, directory) == [e.format(dir=directory) for e in EXPECTED]


def test_issues_carry_path_position_policy_and_rule(write_policies):
    directory = write_policies(p__yaml=MANY_PROBLEMS)

    issue = load_error(directory).errors[0]

    assert issue == LoadIssue(
        path=str(directory / "p.yaml"),
        line=5,
        column=20,
        policy="discovery-reads-input",
        rule=0,
        message=issue.message,
    )


def test_the_error_text_lists_every_issue(write_policies):
    directory = write_policies(p__yaml=MANY_PROBLEMS)

    text = str(load_error(directory))

    assert text.splitlines()[0] == f"{len(EXPECTED)} problems in the policy set"
    assert len(text.splitlines()) == len(EXPECTED) + 1


def test_problems_in_several_files_are_reported_together(write_policies):
    directory = write_policies(
        a__yaml="policies:\n  - name: a\n    rules: [{when: 'true', effect: permit}]\n",
        b__yaml="policies:\n  - name: b\n    rules: [\n",
        c__yaml="policies: [{name: c, rules: [{when: 'input.x +', effect: deny}]}]\n",
    )

    assert relative(load_error(directory).errors, directory) == [
        "a.yaml:3:36: a/rules[0]: effect: 'permit' is not one of deny, hide, require-approval, "
        "allow",
        "b.yaml:4:1: YAML syntax error: while parsing a flow node expected the node content, but "
        "found '<stream end>'",
        "c.yaml:1:47: c/rules[0]: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', "
        "'.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, "
        "IDENTIFIER}",
    ]


def test_duplicate_names_across_files_point_at_the_first_definition(write_policies):
    directory = write_policies(
        a__yaml="policies: [{name: same, rules: [{when: 'true', effect: allow}]}]",
        b__yaml="policies: [{name: same, rules: [{when: 'true', effect: deny}]}]",
    )

    (issue,) = load_error(directory).errors

    assert issue.path == str(directory / "b.yaml")
    assert (
        issue.message == f"duplicate policy name 'same' (first defined at {directory}/a.yaml:1:19)"
    )


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("- just a list", "value: ['just a list'] is not of type 'object'"),
        ("policies: {}", "policies: {} is not of type 'array'"),
        ("{}", "missing required field 'policies'"),
        ("policies: []\nextra: 1", "unknown field 'extra'; allowed: constants, policies"),
        (
            "policies: [{name: 'bad name!', rules: [{when: 'true', effect: allow}]}]",
            "name: 'bad name!' is not a valid name (letters, digits, '.', '_', '-'; at most 128)",
        ),
        ("policies: [{name: p, rules: []}]", "rules: [] should be non-empty"),
        (
            "policies: [{name: p, phases: [later], rules: [{when: 'true', effect: allow}]}]",
            "value: 'later' is not one of discovery, invocation, execution",
        ),
        (
            "policies: [{name: p, scope: local, rules: [{when: 'true', effect: allow}]}]",
            "scope: 'local' is not one of global, capability",
        ),
        (
            "policies: [{name: p, match: {capabilities: ['a..b']}, rules: [{when: 'true', "
            "effect: allow}]}]",
            "value: 'a..b' has the wrong form",
        ),
        (
            "policies: [{name: p, rules: [{when: 'true', effect: require-approval, "
            "approval: {expires_in: 1 day}}]}]",
            "expires_in: '1 day' is not a duration like 90s, 15m or 1h30m",
        ),
        ("constants: {1st: 1}\npolicies: []", "constants: '1st' is not a CEL identifier"),
    ],
)
def test_schema_violations_are_explained(write_policies, document, message):
    directory = write_policies(p__yaml=document)

    messages = [issue.message for issue in load_error(directory).errors]

    assert any(m.startswith(message) for m in messages), messages


def test_a_when_of_yaml_true_is_accepted_as_a_catch_all(load_policies, make_request):
    policy_set = load_policies("policies: [{name: p, rules: [{when: true, effect: deny}]}]")

    assert policy_set.evaluate_all(Phase.INVOCATION, make_request()).decision is Decision.DENY


def test_duplicate_yaml_keys_are_reported(write_policies):
    directory = write_policies(
        p__yaml="policies:\n  - name: a\n    name: b\n    rules: [{when: 'true', effect: allow}]\n"
    )

    (issue,) = load_error(directory).errors

    assert (issue.line, issue.column, issue.message) == (3, 5, "duplicate key 'name'")


def test_a_missing_path_and_a_non_utf8_file_are_load_errors(tmp_path):
    (tmp_path / "latin1.yaml").write_bytes("policies: [] # caf\xe9".encode("latin-1"))

    with pytest.raises(PolicyLoadError) as caught:
        load_policy_set([tmp_path, tmp_path / "absent.yaml"])

    messages = sorted(issue.message for issue in caught.value.errors)
    assert messages[0].startswith("cannot read: No such file or directory")
    assert messages[1].startswith("not UTF-8 text")


def test_a_match_expression_cannot_read_input(write_policies):
    directory = write_policies(
        p__yaml="""
        policies:
          - name: p
            match: {expr: "input.amount > 1"}
            rules: [{when: "true", effect: allow}]
        """
    )

    (issue,) = load_error(directory).errors

    assert issue.message.startswith("`input` is not bound in match.expr")
    assert (issue.policy, issue.rule) == ("p", None)


def test_approval_is_bound_in_the_execution_phase(load_policies):
    policy_set = load_policies(
        """
        policies:
          - name: fresh
            phases: [execution]
            rules:
              - when: approval != null && request.now - approval.decided_at > duration('1h')
                effect: deny
        """
    )

    assert policy_set.policy_names == ("fresh",)


def test_approval_in_a_policy_that_also_runs_at_invocation_is_an_error(write_policies):
    directory = write_policies(
        p__yaml="""
        policies:
          - name: p
            phases: [invocation, execution]
            rules: [{when: "approval == null", effect: allow}]
        """
    )

    (issue,) = load_error(directory).errors

    assert "`approval` is not bound in the invocation phase" in issue.message


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        (">-\n          actor.kind == 'user' &&\n          nobody.knows", (7, 17)),
        ("|\n          actor.kind == 'user' &&\n            nobody.knows", (7, 19)),
        ("actor.kind == 'user'\n          && nobody.knows", (6, 20)),
    ],
    ids=["folded", "literal", "plain-multiline"],
)
def test_multi_line_expressions_are_located_exactly(write_policies, when, expected):
    # cel-cpp reports an unknown qualified name at its first dot: `nobody|.knows`.
    head = "# comment\npolicies:\n  - name: p\n    rules:\n"
    text = f"{head}      - when: {when}\n        effect: allow\n"
    directory = write_policies(p__yaml=text)

    (issue,) = load_error(directory).errors

    assert (issue.line, issue.column) == expected
    assert issue.message.startswith("unknown variable 'nobody'")


def test_an_expression_with_escapes_is_located_at_its_start(write_policies):
    directory = write_policies(
        p__yaml='policies: [{name: p, rules: [{when: "\\"a\\" == nobody", effect: allow}]}]'
    )

    (issue,) = load_error(directory).errors

    assert (issue.line, issue.column) == (1, 38)
    assert issue.message.endswith("(expression line 1, column 8)")


def test_a_quoted_expression_is_located_inside_its_quotes(write_policies):
    directory = write_policies(
        p__yaml='policies: [{name: p, rules: [{when: "x == 1", effect: allow}]}]'
    )

    (issue,) = load_error(directory).errors

    assert (issue.line, issue.column) == (1, 38)


def test_constants_are_bound_as_const_and_unknown_ones_are_errors(write_policies):
    directory = write_policies(
        p__yaml="""
        constants: {limit: 500, teams: [red, blue], nested: {deep: true}}
        policies:
          - name: ok
            rules: [{when: "input.amount > const.limit && 'red' in const.teams", effect: deny}]
          - name: nested
            rules: [{when: "const.nested.deep", effect: deny}]
          - name: typo
            rules: [{when: "const.limt > 1", effect: deny}]
        """
    )

    (issue,) = load_error(directory).errors

    assert issue.policy == "typo"
    assert issue.message == "const has no field 'limt'"


def test_const_without_constants_is_explained(write_policies):
    directory = write_policies(
        p__yaml="policies: [{name: p, rules: [{when: 'const.x', effect: deny}]}]"
    )

    (issue,) = load_error(directory).errors

    assert issue.message == "no constants are defined (add a top-level `constants:` mapping)"


def test_constants_defined_twice_must_agree(write_policies):
    directory = write_policies(
        a__yaml="constants: {limit: 500, same: 1}\npolicies: []",
        b__yaml="constants: {limit: 600, same: 1}\npolicies: []",
    )

    (issue,) = load_error(directory).errors

    assert issue.path == str(directory / "b.yaml")
    assert (
        issue.message == f"constant 'limit' differs from its definition in {directory}/a.yaml:1:13"
    )


@pytest.mark.parametrize(
    ("phases", "rule", "message"),
    [
        (
            "[discovery]",
            "{when: 'input.amount > 1', effect: hide}",
            "`input` is not bound in the discovery phase",
        ),
        (
            "[discovery, invocation]",
            "{when: 'approval == null', effect: deny}",
            "`approval` is not bound in the discovery phase",
        ),
        (
            "[execution]",
            "{when: 'true', effect: require-approval}",
            "require-approval is not allowed in an execution-only policy",
        ),
    ],
    ids=["input-in-discovery", "approval-outside-execution", "approval-required-at-execution"],
)
def test_phase_rules_are_load_errors(write_policies, phases, rule, message):
    directory = write_policies(
        p__yaml=f"policies: [{{name: p, phases: {phases}, rules: [{rule}]}}]"
    )

    messages = [issue.message for issue in load_error(directory).errors]

    assert any(m.startswith(message) for m in messages), messages


def test_require_approval_in_discovery_loads(load_policies):
    policy_set = load_policies(
        "policies: [{name: p, phases: [discovery], "
        "rules: [{when: \"capability.risk == 'high'\", effect: require-approval}]}]"
    )

    assert policy_set.policy_names == ("p",)


def test_yaml_1_1_booleans_are_text_so_when_yes_is_not_a_catch_all(write_policies):
    directory = write_policies(p__yaml="policies: [{name: p, rules: [{when: yes, effect: deny}]}]")

    (issue,) = load_error(directory).errors

    assert issue.message.startswith("unknown variable 'yes'")
