"""Policy suites supply the pre-hooks' context (`hooks:` in a case, read by policies as
`hooks.<hook>.<attribute>`, docs/hooks.md), type-checked against the hooks' `context`
declarations of the gateway config given with `--config`: an undeclared hook or attribute, or
a value of another type, is an error of that case (the gateway would never bind it).

Through the installed console script on the example suites: examples/hooks/policies beside
examples/policies (the example config's `policies.paths`), against examples/config/gateway.yaml,
which declares `standing` with `{in_arrears: boolean, tier: string}`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CAPGATE = str(Path(sys.executable).parent / "capgate")
CONFIG = ROOT / "examples" / "config" / "gateway.yaml"
SUITE = ROOT / "examples" / "hooks" / "policies" / "standing_test.yaml"


def _policies(tmp_path: Path) -> Path:
    """The example config's policy paths, merged into one directory the CLI runs."""
    merged = Path(shutil.copytree(ROOT / "examples" / "policies", tmp_path / "policies"))
    for path in (ROOT / "examples" / "hooks" / "policies").glob("*.yaml"):
        shutil.copy(path, merged / path.name)
    return merged


def _policy_test(policies: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CAPGATE, "policy", "test", str(policies), *extra],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_example_hook_suite_passes_against_the_example_config(tmp_path: Path) -> None:
    run = _policy_test(_policies(tmp_path), "--config", str(CONFIG))
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert not [line for line in lines if line.startswith(("ERROR", "FAIL"))], run.stdout
    assert "PASS standing :: a refund to a customer in arrears needs a manager's approval" in lines
    assert "coverage: 10/10 rules hit" in lines  # the example rules and refunds-in-arrears


def _with_case_hooks(policies: Path, hooks: object) -> None:
    suite = yaml.safe_load(SUITE.read_text())
    suite["tests"] = [suite["tests"][0] | {"hooks": hooks}]
    (policies / "standing_test.yaml").write_text(yaml.safe_dump(suite))


@pytest.mark.parametrize(
    ("hooks", "message"),
    [
        ({"standing": {"in_arrears": "yes"}}, "hooks.standing.in_arrears: the hook declares"),
        ({"standing": {"in_arrears": 1}}, "hooks.standing.in_arrears: the hook declares boolean"),
        ({"standing": {"tier": 3}}, "hooks.standing.tier: the hook declares string"),
        ({"standing": {"score": 0.5}}, "'score' is not in the hook's declared context"),
        ({"fraud": {"score": 0.5}}, "no pre_invoke hook 'fraud' in the config"),
    ],
    ids=["string for boolean", "integer for boolean", "integer for string", "attr", "hook"],
)
def test_hook_values_the_gateway_would_not_bind_are_case_errors(
    tmp_path: Path, hooks: object, message: str
) -> None:
    policies = _policies(tmp_path)
    _with_case_hooks(policies, hooks)
    run = _policy_test(policies, "--config", str(CONFIG))
    assert run.returncode == 1, run.stdout
    errors = [line for line in run.stdout.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1, run.stdout
    assert message in errors[0]
    assert "standing_test.yaml:" in errors[0]  # located at the case


def test_hooks_of_a_case_reach_the_policy(tmp_path: Path) -> None:
    """The value decides: a case stating the wrong expectation for its hooks fails."""
    policies = _policies(tmp_path)
    suite = yaml.safe_load(SUITE.read_text())
    first = suite["tests"][0]
    suite["tests"] = [first | {"hooks": {"standing": {"in_arrears": False}}}]
    (policies / "standing_test.yaml").write_text(yaml.safe_dump(suite))
    run = _policy_test(policies, "--config", str(CONFIG))
    assert run.returncode == 1
    assert "refunds-in-arrears: expected require-approval, got abstain" in run.stdout


def test_a_suite_schema_refuses_hook_values_that_are_not_scalars(tmp_path: Path) -> None:
    policies = _policies(tmp_path)
    _with_case_hooks(policies, {"standing": {"in_arrears": [True]}})
    run = _policy_test(policies, "--config", str(CONFIG))
    assert run.returncode == 1
    assert "standing_test.yaml" in run.stdout


def _explain(policies: Path, hooks: object, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    request = {
        "phase": "invocation",
        "surface": "mcp",
        "now": "2025-03-04T10:00:00Z",
        "actor": {"id": "u-alice", "kind": "user", "issuer": "https://idp.example.com"}
        | {"roles": ["support"]},
        "capability": {"id": "orders.refund"},
        "input": {"order_id": "o-100", "amount": 120, "reason": "damaged in transit"},
        "hooks": hooks,
    }
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    argv = ["explain", str(policies), "--request", str(path), "--config", str(CONFIG)]
    return subprocess.run(
        [CAPGATE, "policy", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("hooks", "message"),
    [
        ({"standing": {"in_arrears": "yes"}}, "hooks.standing.in_arrears: the hook declares"),
        ({"standing": {"tier": 3}}, "hooks.standing.tier: the hook declares string"),
        ({"standing": {"score": 0.5}}, "'score' is not in the hook's declared context"),
        ({"fraud": {"score": 0.5}}, "no pre_invoke hook 'fraud' in the config"),
    ],
    ids=["string for boolean", "integer for string", "attr", "hook"],
)
def test_explain_refuses_hook_values_the_gateway_would_not_bind(
    tmp_path: Path, hooks: object, message: str
) -> None:
    # A string "yes" is truthy nowhere in CEL, but an explain that took it would show a
    # decision the gateway never makes; like a suite case, it is refused.
    run = _explain(_policies(tmp_path), hooks, tmp_path)
    assert run.returncode == 2, run.stdout + run.stderr
    assert message in run.stderr, run.stderr
    assert run.stdout == ""


def test_explain_evaluates_declared_hook_values(tmp_path: Path) -> None:
    policies = _policies(tmp_path)
    arrears = _explain(policies, {"standing": {"in_arrears": True, "tier": "basic"}}, tmp_path)
    assert arrears.returncode == 0, arrears.stderr
    assert json.loads(arrears.stdout)["decision"] == "require-approval"
    good = _explain(policies, {"standing": {"in_arrears": False, "tier": "gold"}}, tmp_path)
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["decision"] == "allow"
