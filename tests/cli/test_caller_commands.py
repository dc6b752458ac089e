"""The caller commands (issue 27 build 1) through the real `capgate` console script against a
real gateway (tests/cli/conftest.py): describe, invoke, check, resume [--wait], approval status;
the token from --token, --token-file or CAPGATE_TOKEN; -o table|json|yaml; exit codes by
outcome (0 completed, 2 usage, 3 no answer, 4 approval required, 5 failed, 6 cancelled)."""

from __future__ import annotations

import json
import re
import subprocess
import threading
from pathlib import Path

import pytest
import yaml

from tests.cli.conftest import CAPGATE, Served

pytestmark = pytest.mark.integration

SMALL = '{"order": "A-1", "amount": 40}'
LARGE = '{"order": "A-2", "amount": 250}'


@pytest.fixture(scope="module")
def alice(served: Served) -> dict[str, str]:
    return {"CAPGATE_TOKEN": served.token("alice")}


@pytest.fixture(scope="module")
def bob(served: Served) -> str:
    return served.token("bob", "--listener", "admin", "--role", "approver")


def _approve(served: Served, bob: str, approval: str, input_hash: str) -> None:
    done = served.capgate(
        "approvals", "approve", approval, "--hash", input_hash, "--insecure", "--token", bob
    )
    assert done.returncode == 0, done.stderr


def test_describe_lists_what_the_caller_may_see(served: Served, alice: dict[str, str]) -> None:
    done = served.capgate("describe", "--insecure", env=alice)
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.splitlines()[:2]
    assert header.split() == ["ID", "SIDE", "EFFECT", "RISK", "APPROVAL", "DESCRIPTION"]
    assert row.split()[:3] == ["refunds.create", "write", "high"]
    one = served.capgate("describe", "refunds.create", "--insecure", "-o", "yaml", env=alice)
    described = yaml.safe_load(one.stdout)
    assert described["capabilities"][0]["input_schema"]["required"] == ["order", "amount"]


def test_invoke_completed_prints_the_envelope_and_exits_0(
    served: Served, alice: dict[str, str]
) -> None:
    done = served.capgate("invoke", "refunds.create", "--input", SMALL, "--insecure", env=alice)
    assert done.returncode == 0, done.stderr
    assert "status:" in done.stdout and "completed" in done.stdout
    assert re.search(r"^execution state: +completed$", done.stdout, re.MULTILINE)
    assert '"status": "refunded"' in done.stdout
    as_json = served.capgate(
        "invoke", "refunds.create", "-i", SMALL, "--insecure", "-o", "json", env=alice
    )
    envelope = json.loads(as_json.stdout)
    assert envelope["status"] == "completed"
    assert envelope["completed"]["output"]["amount"] == 40


def test_input_from_a_file_and_stdin(served: Served, alice: dict[str, str], tmp_path: Path) -> None:
    body = tmp_path / "input.json"
    body.write_text(SMALL)
    from_file = served.capgate(
        "invoke", "refunds.create", "--input", f"@{body}", "--insecure", "-o", "json", env=alice
    )
    assert json.loads(from_file.stdout)["status"] == "completed", from_file.stderr
    from_stdin = served.capgate(
        "invoke",
        "refunds.create",
        "--input",
        "-",
        "--insecure",
        "-o",
        "json",
        stdin=SMALL,
        env=alice,
    )
    assert json.loads(from_stdin.stdout)["status"] == "completed", from_stdin.stderr
    missing = served.capgate(
        "invoke", "refunds.create", "--input", "@/nonexistent.json", "--insecure", env=alice
    )
    assert missing.returncode == 2
    assert "--input @/nonexistent.json" in missing.stderr


def test_an_invalid_input_fails_with_exit_5(served: Served, alice: dict[str, str]) -> None:
    done = served.capgate("invoke", "refunds.create", "-i", '{"order": 1}', "--insecure", env=alice)
    assert done.returncode == 5, done.stdout
    assert "INPUT_INVALID" in done.stdout


def test_approval_required_exits_4_then_resume_completes(
    served: Served, alice: dict[str, str], bob: str
) -> None:
    asked = served.capgate(
        "invoke", "refunds.create", "-i", LARGE, "--insecure", "-o", "json", env=alice
    )
    assert asked.returncode == 4, asked.stdout + asked.stderr
    approval = json.loads(asked.stdout)["approval_required"]["approval"]
    status = served.capgate("approval", "status", approval["id"], "--insecure", env=alice)
    assert status.returncode == 0, status.stderr
    assert "status:" in status.stdout and "pending" in status.stdout
    early = served.capgate("resume", approval["id"], "--insecure", env=alice)
    assert early.returncode in (4, 5), early.stdout  # not approved yet: not run
    _approve(served, bob, approval["id"], approval["input_hash"])
    resumed = served.capgate("resume", approval["id"], "--insecure", "-o", "json", env=alice)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    envelope = json.loads(resumed.stdout)
    assert envelope["completed"]["output"]["amount"] == 250
    assert envelope["approval_id"] == approval["id"]
    again = served.capgate("resume", approval["id"], "--insecure", "-o", "json", env=alice)
    assert json.loads(again.stdout)["completed"] == envelope["completed"]  # recorded, once
    after = served.capgate(
        "approval", "status", approval["id"], "--insecure", "-o", "json", env=alice
    )
    assert json.loads(after.stdout)["approval"]["status"] == "APPROVAL_STATUS_EXECUTED"


def test_resume_wait_returns_once_approved(served: Served, alice: dict[str, str], bob: str) -> None:
    asked = served.capgate(
        "invoke", "refunds.create", "-i", LARGE, "--insecure", "-o", "json", env=alice
    )
    approval = json.loads(asked.stdout)["approval_required"]["approval"]
    process = subprocess.Popen(
        [CAPGATE, "resume", approval["id"], "--wait", "--insecure"],
        env={**served.env, **alice},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    # It says it waits before it waits: approve once it does.
    assert "waiting for a decision" in process.stderr.readline()
    threading.Thread(target=process.stderr.read, daemon=True).start()
    _approve(served, bob, approval["id"], approval["input_hash"])
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 0, out
    assert '"amount": 250' in out


def test_check_answers_without_calling(served: Served, alice: dict[str, str]) -> None:
    allowed = served.capgate("check", "refunds.create", "-i", SMALL, "--insecure", env=alice)
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert "decision:" in allowed.stdout and "allow" in allowed.stdout
    needs = served.capgate("check", "refunds.create", "-i", LARGE, "--insecure", env=alice)
    assert needs.returncode == 4, needs.stdout
    assert "Refund over 100." in needs.stdout
    missing = served.capgate("check", "refunds.nothing", "--insecure", "-o", "json", env=alice)
    assert missing.returncode == 5, missing.stdout
    assert json.loads(missing.stdout)["error"]["code"] == "ERROR_CODE_CAPABILITY_NOT_FOUND"


def test_token_from_option_file_or_environment(served: Served, tmp_path: Path) -> None:
    token = served.token("alice")
    by_option = served.capgate("describe", "--insecure", "--token", token)
    assert by_option.returncode == 0, by_option.stderr
    saved = tmp_path / "alice.jwt"
    saved.write_text(token + "\n")
    by_file = served.capgate("describe", "--insecure", "--token-file", str(saved))
    assert by_file.returncode == 0, by_file.stderr
    by_env = served.capgate("describe", "--insecure", env={"CAPGATE_TOKEN": token})
    assert by_env.returncode == 0, by_env.stderr
    none = served.capgate("describe", "--insecure")
    assert none.returncode == 3
    assert "UNAUTHENTICATED" in none.stderr and "capgate token --dev" in none.stderr
    assert token not in by_option.stdout + by_option.stderr


def test_usage_errors_exit_2_and_a_missing_listener_exit_3(served: Served) -> None:
    assert served.capgate("invoke").returncode == 2
    assert served.capgate("invoke", "x", "-o", "xml").returncode == 2
    gone = served.capgate("describe", "--insecure", "--address", "127.0.0.1:1")
    assert gone.returncode == 3
    assert "nothing accepts connections at 127.0.0.1:1" in gone.stderr
    helped = served.capgate("help", "invoke")
    assert helped.returncode == 0
    assert "4  approval required" in helped.stdout and "6  cancelled" in helped.stdout
