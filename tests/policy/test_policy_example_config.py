"""The example policy suites run against the example gateway config itself, not only against
their own fixtures: a suite whose capability disagrees with the config (a policy its fixture
lists but the config does not) fails. Through the installed console script, as `make demo`'s
readers would run it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CAPGATE = str(Path(sys.executable).parent / "capgate")
POLICIES = ROOT / "examples" / "policies"
CONFIG = ROOT / "examples" / "config" / "gateway.yaml"


def _policy_test(policies: Path, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CAPGATE, "policy", "test", str(policies), "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_example_suites_pass_against_the_example_config() -> None:
    run = _policy_test(POLICIES, CONFIG)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[-1] == "28 passed, 0 failed"
    assert "coverage: 9/9 rules hit" in lines
    assert not [line for line in lines if line.startswith(("ERROR", "FAIL"))]


def test_a_suite_disagreeing_with_the_config_fails(tmp_path: Path) -> None:
    """The flagship regression: the config stops listing support-staff-only on orders.refund
    while the suites' fixture still does; the suites must fail, naming the difference."""
    policies = Path(shutil.copytree(POLICIES, tmp_path / "policies"))
    (tmp_path / "config").mkdir()
    shutil.copytree(ROOT / "examples" / "orders", tmp_path / "orders")
    text = CONFIG.read_text()
    refund = text.index("  - id: orders.refund")
    listed = text.index("    policies: [support-staff-only]\n", refund)
    config = tmp_path / "config" / "gateway.yaml"
    config.write_text(
        text[:listed] + text[listed:].replace("    policies: [support-staff-only]\n", "", 1)
    )
    run = _policy_test(policies, config)
    assert run.returncode == 1, run.stdout
    assert (
        "capability orders.refund: the suite gives policies ['support-staff-only'], "
        "the config []" in run.stdout
    )
    assert "orders.cancel" not in run.stdout  # it still lists the policy


def test_a_suite_naming_a_capability_the_config_lacks_fails(tmp_path: Path) -> None:
    policies = Path(shutil.copytree(POLICIES, tmp_path / "policies"))
    suite = policies / "access_test.yaml"
    suite.write_text(suite.read_text().replace("id: orders.list,", "id: orders.lst,"))
    run = _policy_test(policies, CONFIG)
    assert run.returncode == 1, run.stdout
    assert "capability 'orders.lst' is not in the config" in run.stdout


def test_policy_check_types_input_from_the_protobuf_request_message(tmp_path: Path) -> None:
    """orders.get has no input_schema: `policy check --config` types its `input` from
    GetOrderRequest (the descriptor set the config names), as `serve` does."""
    policies = Path(shutil.copytree(POLICIES, tmp_path / "policies"))
    (policies / "50-typo.yaml").write_text(
        "policies:\n"
        "  - name: typo\n"
        "    match: {capabilities: [orders.get]}\n"
        "    rules:\n"
        '      - when: input.order_idd == ""\n'
        "        effect: deny\n"
    )
    run = subprocess.run(
        [CAPGATE, "policy", "check", str(policies), "--config", str(CONFIG)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert (
        f"{policies}/50-typo.yaml:5:20: typo/rules[0]: no matched capability's input schema has "
        "input.order_idd (checked: orders.get)"
    ) in run.stderr
    (policies / "50-typo.yaml").write_text(
        (policies / "50-typo.yaml").read_text().replace("order_idd", "order_id")
    )
    run = subprocess.run(
        [CAPGATE, "policy", "check", str(policies), "--config", str(CONFIG)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "input is dyn" not in run.stdout  # every example capability is typed


def test_policy_check_reports_a_listed_policy_no_file_defines() -> None:
    """Like `serve` and `config check`, `policy check --config` refuses a capability-scoped
    policy name that the policy set lacks, at its file:line:column in the config."""
    case = ROOT / "tests" / "config" / "broken" / "06-unknown-capability-policy.yaml"
    policies = ROOT / "tests" / "config" / "broken" / "policies" / "ok"
    run = subprocess.run(
        [CAPGATE, "policy", "check", str(policies), "--config", str(case)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stderr.splitlines() == [
        "1 problem in the policy set",
        f"{case}:33:30: capabilities[1] (orders.cancel) lists policy 'suport-only', which no "
        "policy file defines",
    ]
