"""`capgate grants create|list|show|revoke` through the real `capgate` console script against a
real gateway (tests/cli/conftest.py: the quickstart config, embedded Redis), including the
`--from-approval` example of docs/cli.md run as the doc writes it.

Grants here cover dave and erin only: the other CLI tests' caller, alice, must keep needing
approvals for her large refunds."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.cli.conftest import CAPGATE, ROOT, Served

pytestmark = pytest.mark.integration

LARGE = '{"order": "G-1", "amount": 250}'


@pytest.fixture(scope="module")
def bob(served: Served) -> dict[str, str]:
    """An approver's credential for the admin listener."""
    return {"CAPGATE_TOKEN": served.token("bob", "--listener", "admin", "--role", "approver")}


def _approval(served: Served, caller: str) -> str:
    """A pending approval of a large refund asked by `caller`."""
    env = {"CAPGATE_TOKEN": served.token(caller)}
    asked = served.capgate(
        "invoke", "refunds.create", "-i", LARGE, "--insecure", "-o", "json", env=env
    )
    assert asked.returncode == 4, asked.stdout + asked.stderr
    return str(json.loads(asked.stdout)["approval_required"]["approval"]["id"])


def _path() -> str:
    """PATH with the `capgate` of this environment first, as an installed one would be."""
    return f"{Path(CAPGATE).parent}{os.pathsep}{os.environ.get('PATH', '')}"


def _doc_example() -> str:
    """The `--from-approval` command of docs/cli.md's `capgate grants` section, as written."""
    text = (ROOT / "docs" / "cli.md").read_text()
    section = text[text.index("## `capgate grants`") :]
    blocks = re.findall(r"```\n(.*?)```", section, re.DOTALL)
    (example,) = [b for b in blocks if '--from-approval "$APPROVAL"' in b]
    return example.strip()


def test_create_list_show_revoke(served: Served, bob: dict[str, str]) -> None:
    made = served.capgate(
        "grants", "create", "--actor", "dave", "--issuer", "quickstart",
        "--capability", "refunds.create", "--expires-in", "30m", "--max-uses", "3",
        "--note", "end of month", "--insecure", "-o", "json", env=bob,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    grant = json.loads(made.stdout)
    assert grant["status"] == "GRANT_STATUS_ACTIVE"
    assert (grant["actor"]["id"], grant["capability_id"], grant["max_uses"]) == (
        "dave",
        "refunds.create",
        "3",
    )
    listed = served.capgate("grants", "list", "--insecure", env=bob)
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["ID", "WHOM", "WHAT", "STATUS", "USES", "TOTAL", "EXPIRES"]
    (row,) = [r for r in rows if r.startswith(grant["id"])]
    assert "dave (quickstart)" in row and "refunds.create" in row and "0/3" in row
    shown = served.capgate("grants", "show", grant["id"], "--insecure", env=bob)
    assert shown.returncode == 0, shown.stderr
    assert "note:           end of month" in shown.stdout
    assert "approver roles: approver" in shown.stdout
    as_yaml = served.capgate("grants", "show", grant["id"], "--insecure", "-o", "yaml", env=bob)
    assert yaml.safe_load(as_yaml.stdout)["id"] == grant["id"]
    revoked = served.capgate("grants", "revoke", grant["id"], "--insecure", env=bob)
    assert revoked.returncode == 0, revoked.stderr
    assert revoked.stdout == f"{grant['id']}: revoked\n"
    again = served.capgate("grants", "revoke", grant["id"], "--insecure", env=bob)
    assert again.returncode == 1
    assert again.stderr.startswith("refused: APPROVAL_ALREADY_DECIDED")
    gone = served.capgate("grants", "list", "--insecure", "-o", "json", env=bob)
    assert grant["id"] not in gone.stdout  # active ones only, by default
    old = served.capgate(
        "grants", "list", "--status", "revoked", "--insecure", "-o", "json", env=bob
    )
    assert grant["id"] in [json.loads(line)["id"] for line in old.stdout.splitlines()]


def test_the_from_approval_example_of_the_docs(served: Served, bob: dict[str, str]) -> None:
    approval = _approval(served, "erin")
    example = _doc_example()
    assert example.startswith("capgate grants create --from-approval")
    done = subprocess.run(
        ["bash", "-c", f"{example} --insecure -o json"],
        env={**served.env, **bob, "APPROVAL": approval, "PATH": _path()},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    grant = json.loads(done.stdout)
    assert (grant["actor"]["id"], grant["actor"]["issuer"]) == ("erin", "quickstart")
    assert grant["capability_id"] == "refunds.create"
    assert (grant["from_approval_id"], grant["amount"], grant["max_total"]) == (
        approval,
        "input.amount",
        500,
    )
    revoked = served.capgate("grants", "revoke", grant["id"], "--insecure", env=bob)
    assert revoked.returncode == 0, revoked.stderr


def test_refusals_name_the_problem_and_exit_1(served: Served, bob: dict[str, str]) -> None:
    approval = _approval(served, "dave")
    # The quickstart's refunds have no currency: the constraint names where it reads one.
    done = served.capgate(
        "grants", "create", "--from-approval", approval, "--expires-in", "1h",
        "--constraint", 'input.currency == "EUR"', "--insecure", env=bob,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith("refused: INPUT_INVALID: constraint 1:6: ")
    assert "input.currency" in done.stderr
    done = served.capgate(
        "grants", "create", "--from-approval", approval, "--expires-in", "1h",
        "--max-total", "500", "--insecure", env=bob,
    )  # fmt: skip
    assert done.returncode == 1
    assert "max_total needs an amount" in done.stderr
    caller = {"CAPGATE_TOKEN": served.token("carl", "--listener", "admin")}  # no approver role
    done = served.capgate(
        "grants", "create", "--from-approval", approval, "--expires-in", "1h", "--insecure",
        env=caller,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith("refused: FORBIDDEN")
    missing = served.capgate("grants", "show", "grt_none", "--insecure", env=bob)
    assert missing.returncode == 1
    assert missing.stderr.startswith("refused: APPROVAL_NOT_FOUND")


def test_usage_errors_exit_2(served: Served, bob: dict[str, str]) -> None:
    lone = served.capgate(
        "grants", "create", "--actor", "dave", "--capability", "refunds.create",
        "--expires-in", "1h", "--insecure", env=bob,
    )  # fmt: skip
    assert lone.returncode == 2
    assert "--actor and --issuer go together" in lone.stderr
    bad = served.capgate(
        "grants", "create", "--role", "x", "--capability", "refunds.create",
        "--expires-in", "soon", "--insecure", env=bob,
    )  # fmt: skip
    assert bad.returncode == 2
    assert "--expires-in" in bad.stderr
    missing = served.capgate("grants", "create", "--role", "x", "--insecure", env=bob)
    assert missing.returncode == 2  # --expires-in is required
    typo = served.capgate("revoke", "grt_x")
    assert typo.returncode == 2
    assert "did you mean 'capgate grants revoke'" in typo.stderr
