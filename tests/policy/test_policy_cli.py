"""`capgate policy check|test|explain`, in-process and through the installed console script."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from policy.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "policies"
CAPGATE = Path(sys.executable).parent / "capgate"

GATEWAY_CONFIG = """
listeners: [{address: "127.0.0.1:7443", surface: mcp}]   # gateway keys the CLI ignores
capabilities:
  - id: orders.refund
    tags: [orders, billing]
    side_effect: write
    risk: high
    upstream: orders
    input_schema:
      type: object
      properties:
        order_id: {type: string}
        amount: {type: number}
        reason: {type: string}
  - id: orders.cancel
    tags: [orders]
    side_effect: write
    risk: medium
    input_schema:
      type: object
      properties: {order_id: {type: string}, reason: {type: string}}
  - id: orders.get
    tags: [orders]
    side_effect: none
    risk: low
"""


@pytest.fixture
def examples(tmp_path) -> Path:
    """A private copy of the example policies and suites."""
    return Path(shutil.copytree(EXAMPLES, tmp_path / "policies"))


@pytest.fixture
def config(tmp_path) -> Path:
    path = tmp_path / "capgate.yaml"
    path.write_text(GATEWAY_CONFIG)
    return path


def test_check_reports_a_clean_set_and_that_input_is_dyn(capsys):
    assert main(["check", str(EXAMPLES)]) == 0

    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("ok: 6 policies, 9 rules in 5 files (revision ")
    assert out[1].startswith("note: input is dyn: no capability registry was given")


def test_check_with_a_gateway_config_types_input(capsys, config):
    assert main(["check", str(EXAMPLES), "--config", str(config)]) == 0

    out = capsys.readouterr().out
    assert "no capability registry" not in out
    assert "note: input is dyn for capabilities without input_schema: orders.get" in out


def test_check_with_a_config_finds_a_misspelt_input_field(capsys, examples, config):
    refunds = examples / "20-refunds.yaml"
    refunds.write_text(
        refunds.read_text().replace(
            "has(input.amount) && input.amount > const.refund_hard",
            "input.amuont > const.refund_hard",
        )
    )

    assert main(["check", str(examples), "--config", str(config)]) == 1

    err = capsys.readouterr().err.splitlines()
    assert err == [
        "1 problem in the policy set",
        f"{refunds}:13:20: refund-limits/rules[0]: no matched capability's input schema has "
        "input.amuont (checked: orders.refund)",
    ]


def test_check_lists_every_error_and_fails(capsys, tmp_path):
    (tmp_path / "p.yaml").write_text(
        "policies:\n  - name: p\n    rules:\n      - {when: 'input.x +', effect: deny}\n"
        "      - {when: 'true', effect: dney}\n"
    )

    assert main(["check", str(tmp_path)]) == 1

    err = capsys.readouterr().err.splitlines()
    assert err[0] == "2 problems in the policy set"
    assert err[1].startswith(f"{tmp_path}/p.yaml:4:26: p/rules[0]: Syntax error")
    assert err[2].startswith(f"{tmp_path}/p.yaml:5:32: p/rules[1]: effect: 'dney' is not one of")


def test_usage_problems_exit_with_2(capsys, tmp_path):
    assert main(["check", str(tmp_path / "absent")]) == 2
    assert main(["check", str(EXAMPLES), "--config", str(tmp_path / "absent.yaml")]) == 2
    assert main(["frobnicate"]) == 2
    assert main([]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_test_runs_the_example_suites(capsys):
    assert main(["test", str(EXAMPLES)]) == 0

    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "28 passed, 0 failed"
    assert "coverage: 9/9 rules hit" in out
    assert "PASS refunds :: a refund over 500 needs a manager's approval" in out


def test_test_reports_failures_coverage_and_junit(capsys, examples, tmp_path):
    suite = examples / "refunds_test.yaml"
    suite.write_text(
        suite.read_text().replace(
            "expected: {refund-limits: deny}", "expected: {refund-limits: allow}"
        )
    )
    (examples / "access_test.yaml").unlink()
    junit = tmp_path / "junit.xml"

    assert main(["test", str(examples), "--junit", str(junit)]) == 1

    out = capsys.readouterr().out.splitlines()
    assert "FAIL refunds :: a refund over 10000 is refused" in out
    assert "     refund-limits: expected allow, got deny" in out
    assert "  not hit: admin-capabilities-hidden/rules[0] (" in "\n".join(out)
    assert out[-1] == "19 passed, 1 failed"
    root = ET.parse(junit).getroot()
    assert (root.get("tests"), root.get("failures")) == ("20", "1")
    (failure,) = root.iter("failure")
    assert failure.get("message") == "refund-limits: expected allow, got deny"
    names = [case.get("name") for case in root.iter("testcase")]
    assert len(names) == 20
    assert "a refund over 10000 is refused" in names


def test_test_json_output(capsys):
    assert main(["test", str(EXAMPLES), "--format", "json"]) == 0

    report = json.loads(capsys.readouterr().out)
    assert (report["passed"], report["failed"], report["errors"]) == (28, 0, [])
    assert report["coverage"] == {"rules": 9, "hit": 9, "uncovered": []}


def test_test_reports_a_suite_naming_an_unknown_fixture(capsys, examples):
    suite = examples / "access_test.yaml"
    suite.write_text(
        suite.read_text().replace(
            "actor: anonymous\n    capability: get", "actor: nobody\n    capability: get"
        )
    )

    assert main(["test", str(examples)]) == 1

    out = capsys.readouterr().out
    assert "ERROR " in out
    assert "anonymous callers may read an order: no actor fixture named 'nobody'" in out


def test_test_without_suites_is_a_usage_error(capsys, tmp_path):
    (tmp_path / "p.yaml").write_text("policies: []")

    assert main(["test", str(tmp_path)]) == 2
    assert "no *_test.yaml suites found" in capsys.readouterr().err


REQUEST = {
    "phase": "invocation",
    "surface": "mcp",
    "capability": {
        "id": "orders.refund",
        "tags": ["orders", "billing"],
        "side_effect": "write",
        "risk": "high",
    },
    "capability_policies": ["support-staff-only"],
    "actor": {
        "id": "u-alice",
        "kind": "user",
        "issuer": "https://idp.example.com",
        "roles": ["support"],
    },
    "input": {"order_id": "o-1", "amount": 750, "reason": "wrong item"},
    "now": "2025-03-04T10:00:00Z",
}


def write_request(tmp_path, request) -> Path:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    return path


def test_explain_prints_the_decision_and_every_stance(capsys, tmp_path):
    assert main(["explain", str(EXAMPLES), "--request", str(write_request(tmp_path, REQUEST))]) == 0

    shown = json.loads(capsys.readouterr().out)
    assert shown["decision"] == "require-approval"
    assert shown["failed"] is False
    assert shown["message"] == "Refunds over 500 need a manager's approval."
    assert shown["approval"] == {
        "reasons": ["Refund above the 500 self-service limit."],
        "roles": ["manager"],
        "expires_in": "4h",
        "policies": ["refund-limits"],
        "grantable": True,
        "quorum": 1,
        "distinct_roles": [],
        "escalate_after": None,
        "escalation_roles": [],
    }
    assert shown["stances"] == [
        {
            "policy": "anonymous-read-only",
            "mode": "enforce",
            "effect": None,
            "rule": None,
            "message": None,
            "error": None,
        },
        {
            "policy": "refund-limits",
            "mode": "enforce",
            "effect": "require-approval",
            "rule": 2,
            "message": "Refunds over 500 need a manager's approval.",
            "error": None,
        },
        {
            "policy": "business-hours",
            "mode": "shadow",
            "effect": None,
            "rule": None,
            "message": None,
            "error": None,
        },
        {
            "policy": "support-staff-only",
            "mode": "enforce",
            "effect": None,
            "rule": None,
            "message": None,
            "error": None,
        },
    ]


def test_explain_shows_a_failing_policy_as_deny(capsys, tmp_path):
    request = {**REQUEST, "input": {"order_id": "o-1", "amount": "seven hundred"}}

    assert main(["explain", str(EXAMPLES), "--request", str(write_request(tmp_path, request))]) == 0

    shown = json.loads(capsys.readouterr().out)
    assert (shown["decision"], shown["failed"]) == ("deny", True)
    refund = next(s for s in shown["stances"] if s["policy"] == "refund-limits")
    assert refund["effect"] == "deny"
    assert refund["error"] == "when: no matching overload"


def test_explain_text_format(capsys, tmp_path):
    path = write_request(tmp_path, {**REQUEST, "actor": {"id": "anon", "kind": "anonymous"}})

    assert main(["explain", str(EXAMPLES), "--request", str(path), "--format", "text"]) == 0

    out = capsys.readouterr().out.splitlines()
    assert out[0] == "decision: deny"
    assert out[1] == "message: Sign in to change orders."
    assert "  anonymous-read-only: deny rules[0] — Sign in to change orders." in out
    assert "  business-hours [shadow]: abstain" in out


def test_explain_fills_the_capability_from_the_config(capsys, tmp_path, config):
    request = {**REQUEST, "capability": {"id": "orders.refund"}}
    path = write_request(tmp_path, request)

    assert main(["explain", str(EXAMPLES), "--request", str(path), "--config", str(config)]) == 0

    shown = json.loads(capsys.readouterr().out)
    business = next(s for s in shown["stances"] if s["policy"] == "business-hours")
    assert business["effect"] is None  # applies: side_effect came from the config


def test_explain_rejects_a_malformed_request(capsys, tmp_path):
    path = write_request(tmp_path, {"phase": "later", "actor": {}, "capability": {}})

    assert main(["explain", str(EXAMPLES), "--request", str(path)]) == 2
    assert "phase must be one of discovery, invocation, execution" in capsys.readouterr().err


def capgate(*args) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CAPGATE, *map(str, args)], capture_output=True, text=True, check=False)


def test_the_console_script_routes_policy_commands(tmp_path):
    if not CAPGATE.exists():
        pytest.fail(f"{CAPGATE} is missing: run `pip install -e .[dev]`")
    path = write_request(tmp_path, REQUEST)

    checked = capgate("policy", "check", EXAMPLES)
    tested = capgate("policy", "test", EXAMPLES)
    explained = capgate("policy", "explain", EXAMPLES, "--request", path)
    broken = capgate("policy", "check", tmp_path / "absent")

    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.startswith("ok: 6 policies")
    assert tested.returncode == 0, tested.stderr
    assert tested.stdout.splitlines()[-1] == "28 passed, 0 failed"
    assert json.loads(explained.stdout)["decision"] == "require-approval"
    assert broken.returncode == 2
