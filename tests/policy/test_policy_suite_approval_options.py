"""`capgate policy test` and `explain` with the approval options of issue 28: a suite case
states the merged requirement's quorum, grantability, distinct roles and escalation, and a
wrong one fails the case with what was expected and what came."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policy.cli import main

POLICIES = """\
policies:
  - name: payments
    rules:
      - when: has(input.amount) && input.amount > 1000
        effect: require-approval
        approval:
          approvers: {roles: [approver]}
          grantable: false
          quorum: 2
          distinct_roles: [finance, risk]
          escalate_after: 30m
          escalation_roles: [cfo]
      - when: "true"
        effect: require-approval
        approval: {quorum: 1}
"""

SUITE = """\
name: payments
now: "2025-03-04T10:00:00Z"
fixtures:
  actors: {alice: {id: u-alice, kind: user, roles: [clerk]}}
  capabilities: {pay: {id: payments.send, tags: [], side_effect: write, risk: high}}
tests:
  - name: a big payment needs two people, one of finance and one of risk, never by a grant
    actor: alice
    capability: pay
    input: {amount: 5000}
    decision: require-approval
    approval_quorum: {quorum}
    approval_grantable: false
    approval_distinct_roles: [risk, finance]
    approval_escalate_after: 1800s
    approval_escalation_roles: [cfo]
  - name: a small payment may be covered by a grant
    actor: alice
    capability: pay
    input: {amount: 10}
    decision: require-approval
    approval_quorum: 1
    approval_grantable: true
    approval_distinct_roles: []
    approval_escalate_after: null
    approval_escalation_roles: []
"""


def write(tmp_path: Path, quorum: str = "2") -> Path:
    directory = tmp_path / "policies"
    directory.mkdir()
    (directory / "payments.yaml").write_text(POLICIES)
    (directory / "payments_test.yaml").write_text(SUITE.replace("{quorum}", quorum))
    return directory


def test_a_suite_states_quorum_grants_and_escalation(capsys, tmp_path):
    assert main(["test", str(write(tmp_path))]) == 0

    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "2 passed, 0 failed"


def test_a_wrong_quorum_fails_the_case_with_both_values(capsys, tmp_path):
    assert main(["test", str(write(tmp_path, quorum="3"))]) == 1

    out = capsys.readouterr().out.splitlines()
    assert "     approval_quorum: expected 3, got 2" in out
    assert out[-1] == "1 passed, 1 failed"


def test_a_wrong_grantability_fails_the_case(capsys, tmp_path):
    directory = write(tmp_path)
    suite = directory / "payments_test.yaml"
    suite.write_text(
        suite.read_text().replace("approval_grantable: false", "approval_grantable: true")
    )

    assert main(["test", str(directory)]) == 1

    assert "     approval_grantable: expected True, got False" in capsys.readouterr().out


def test_a_quorum_of_zero_is_an_error_of_the_suite(capsys, tmp_path):
    assert main(["test", str(write(tmp_path, quorum="0"))]) == 1

    out = capsys.readouterr().out
    assert "approval_quorum: 0 is less than the minimum of 1" in out


@pytest.mark.parametrize("form", ["json", "text"])
def test_explain_shows_the_options_of_the_merged_requirement(capsys, tmp_path, form):
    request = tmp_path / "request.json"
    request.write_text(
        json.dumps(
            {
                "phase": "invocation",
                "now": "2025-03-04T10:00:00Z",
                "actor": {"id": "u-alice", "kind": "user", "roles": ["clerk"]},
                "capability": {"id": "payments.send", "side_effect": "write", "risk": "high"},
                "input": {"amount": 5000},
            }
        )
    )
    args = ["explain", str(write(tmp_path)), "--request", str(request)]

    assert main([*args, "--format", form] if form == "text" else args) == 0

    out = capsys.readouterr().out
    if form == "json":
        approval = json.loads(out)["approval"]
        assert approval["grantable"] is False
        assert approval["quorum"] == 2
        assert approval["distinct_roles"] == ["finance", "risk"]
        assert approval["escalate_after"] == "30m"
        assert approval["escalation_roles"] == ["cfo"]
    else:
        line = (
            "  2 approvers (one each: finance, risk); never by a grant; escalates after 30m to cfo"
        )
        assert line in out.splitlines()
