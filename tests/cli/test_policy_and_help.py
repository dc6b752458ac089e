"""Issue 27 defects 5 and 8 and the CLI's vocabulary (build 3), through the real console script:
`policy test` runs a suite without `now` and counts suite errors; `policy check|test` take a
policy file as `policies.paths` does; counts are pluralised; `cache --help` says its sentence
whole; unknown commands are answered with the nearest ones; `capgate help CMD`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.cli.conftest import CAPGATE, QUICKSTART

POLICY = (QUICKSTART / "policies" / "refunds.yaml").read_text()
SUITE = (QUICKSTART / "policies" / "refunds_test.yaml").read_text()


def capgate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CAPGATE, *args], capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    (tmp_path / "refunds.yaml").write_text(POLICY)
    (tmp_path / "refunds_test.yaml").write_text(SUITE)
    return tmp_path


def test_a_suite_without_now_runs(policies: Path) -> None:
    assert "\nnow:" not in SUITE and "  now:" not in SUITE
    done = capgate("policy", "test", str(policies))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "2 passed, 0 failed"


def test_suite_errors_are_counted(policies: Path) -> None:
    (policies / "refunds_test.yaml").write_text(SUITE.replace("input: large", "input: huge"))
    done = capgate("policy", "test", str(policies))
    assert done.returncode == 1
    assert "ERROR" in done.stdout
    assert done.stdout.splitlines()[-1] == "1 passed, 0 failed, 1 error", done.stdout


def test_check_and_test_take_a_policy_file(policies: Path) -> None:
    checked = capgate("policy", "check", str(policies / "refunds.yaml"))
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.startswith("ok: 1 policy, 1 rule in 1 file (revision ")
    tested = capgate("policy", "test", str(policies / "refunds.yaml"))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert tested.stdout.splitlines()[-1] == "2 passed, 0 failed"
    missing = capgate("policy", "check", str(policies / "nothing.yaml"))
    assert missing.returncode == 2
    assert "no such file or directory" in missing.stderr


def test_counts_are_pluralised(policies: Path) -> None:
    one = capgate("policy", "check", str(policies))
    assert one.stdout.startswith("ok: 1 policy, 1 rule in 1 file (revision "), one.stdout
    (policies / "more.yaml").write_text(
        POLICY.replace("large-refunds-need-approval", "second").replace(
            "      - when: input.amount > 100",
            "      - when: input.amount > 1000\n        effect: deny\n"
            "      - when: input.amount > 100",
        )
    )
    done = capgate("policy", "check", str(policies))
    assert done.stdout.startswith("ok: 2 policies, 3 rules in 2 files"), done.stdout + done.stderr


def test_cache_help_says_its_sentence_whole() -> None:
    done = capgate("cache", "--help")
    text = " ".join(done.stdout.split())
    assert (
        "delete a capability's result cache entries over `CacheAdmin.PurgeCache` (docs/cache.md)."
        in text
    )


def test_unknown_commands_are_answered_with_the_nearest() -> None:
    group = capgate("aprovals")
    assert group.returncode == 2
    assert "did you mean 'capgate approvals'" in group.stderr
    sub = capgate("approve")
    assert "did you mean 'capgate approvals approve'" in sub.stderr
    inside = capgate("approvals", "aprove", "x")
    assert inside.returncode == 2
    assert "did you mean 'approve'?" in inside.stderr


def test_help_command() -> None:
    done = capgate("help", "approvals", "approve")
    assert done.returncode == 0
    assert done.stdout.startswith("usage: capgate approvals approve")
    top = capgate("help")
    assert top.returncode == 0 and "capgate help <command>" in top.stdout


def test_config_check_vocabulary(tmp_path: Path) -> None:
    """`--config` as everywhere else, -o json|yaml, the count with the problems on stdout, and
    counts in the singular when they are one."""
    env = {**os.environ, "QUICKSTART_JWT_SECRET": "x" * 40}
    run = lambda *a: subprocess.run(  # noqa: E731
        [CAPGATE, *a], capture_output=True, text=True, check=False, env=env
    )
    config = str(QUICKSTART / "gateway.yaml")
    ok = run("config", "check", "--config", config)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("ok: 2 listeners, 1 capability, revision ")
    as_json = json.loads(run("config", "check", config, "-o", "json").stdout)
    assert as_json["ok"] is True and as_json["capabilities"] == 1
    broken = tmp_path / "gateway.yaml"
    broken.write_text(
        (QUICKSTART / "gateway.yaml").read_text().replace("risk: high", "risk: extreme")
    )
    (tmp_path / "policies").symlink_to(QUICKSTART / "policies")
    bad = run("config", "check", "--config", str(broken))
    assert bad.returncode == 1
    *problems, count = bad.stdout.splitlines()
    assert count == "1 problem" and problems[0].startswith(f"{broken}:"), bad.stdout
    as_yaml = yaml.safe_load(run("config", "check", str(broken), "-o", "yaml").stdout)
    assert as_yaml["ok"] is False and as_yaml["count"] == 1
    assert run("config", "check").returncode == 2
