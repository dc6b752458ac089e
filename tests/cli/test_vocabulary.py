"""One CLI vocabulary (issue 27 build 3) through the real console script against a real
gateway: -o/--output table|json|yaml on approvals, audit, cache and policy; column headers in
`approvals watch`; an approval id given as a prefix, as a hash may be."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from tests.cli.conftest import CAPGATE, QUICKSTART, Served

pytestmark = pytest.mark.integration

LARGE = '{"order": "V-1", "amount": 500}'


@pytest.fixture(scope="module")
def bob(served: Served) -> list[str]:
    token = served.token("bob", "--listener", "admin", "--role", "approver")
    return ["--insecure", "--token", token]


@pytest.fixture(scope="module")
def pending(served: Served) -> dict[str, str]:
    """An approval waiting for bob."""
    alice = {"CAPGATE_TOKEN": served.token("alice")}
    asked = served.capgate(
        "invoke", "refunds.create", "-i", LARGE, "--insecure", "-o", "json", env=alice
    )
    assert asked.returncode == 4, asked.stdout + asked.stderr
    approval: dict[str, str] = json.loads(asked.stdout)["approval_required"]["approval"]
    return approval


def test_approvals_list_in_every_output(
    served: Served, bob: list[str], pending: dict[str, str]
) -> None:
    table = served.capgate("approvals", "list", *bob)
    assert table.stdout.split()[:7] == [
        "ID",
        "CAPABILITY",
        "STATUS",
        "REQUESTER",
        "EXPIRES",
        "APPROVALS",
        "HASH",
    ]
    assert pending["id"] in table.stdout
    as_json = served.capgate("approvals", "list", *bob, "-o", "json")
    ids = [json.loads(line)["id"] for line in as_json.stdout.splitlines()]
    assert pending["id"] in ids
    as_yaml = served.capgate("approvals", "list", *bob, "--output", "yaml")
    assert pending["id"] in [d["id"] for d in yaml.safe_load_all(as_yaml.stdout)]
    older = served.capgate("approvals", "list", *bob, "--format", "json")
    assert older.stdout == as_json.stdout


def test_an_approval_id_prefix_is_accepted(
    served: Served, bob: list[str], pending: dict[str, str]
) -> None:
    shown = served.capgate("approvals", "show", pending["id"][:10], *bob, "-o", "yaml")
    assert shown.returncode == 0, shown.stderr
    assert yaml.safe_load(shown.stdout)["id"] == pending["id"]
    short = served.capgate("approvals", "show", pending["id"][:4], *bob)
    assert short.returncode == 1  # under 8 characters: an id, not a prefix, and there is none


def test_watch_has_column_headers_and_approve_takes_prefixes(
    served: Served, bob: list[str], pending: dict[str, str]
) -> None:
    watch = subprocess.Popen(
        [CAPGATE, "approvals", "watch", *bob],
        env=served.env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert watch.stdout is not None
    try:
        assert watch.stdout.readline().split() == [
            "EVENT",
            "TYPE",
            "APPROVAL",
            "CAPABILITY",
            "STATUS",
        ]
        approved = served.capgate(
            "approvals", "approve", pending["id"][:12], "--hash", pending["input_hash"][:12], *bob
        )
        assert approved.returncode == 0, approved.stderr
        assert approved.stdout == f"{pending['id']}: approved\n"
        # The header came first; the rows follow as events arrive.
        for line in iter(watch.stdout.readline, ""):
            if pending["id"] in line and "approved" in line:
                break
    finally:
        watch.terminate()
        watch.wait(10)


def test_audit_query_in_every_output(served: Served, pending: dict[str, str]) -> None:
    base = ["audit", "query", "--redis-url", served.redis_url, "--capability", "refunds.create"]
    lines = served.capgate(*base)
    assert lines.returncode == 0, lines.stderr
    events = [json.loads(line) for line in lines.stdout.splitlines()]
    assert any(e["event"] == "capability.approval_requested" for e in events), events
    table = served.capgate(*base, "-o", "table")
    assert table.stdout.split("\n")[0].split() == [
        "TIME",
        "EVENT",
        "CAPABILITY",
        "ACTOR",
        "OUTCOME",
        "EXECUTION",
    ]
    assert len(table.stdout.splitlines()) == len(events) + 1
    documents = list(yaml.safe_load_all(served.capgate(*base, "-o", "yaml").stdout))
    assert [d["event_id"] for d in documents] == [e["event_id"] for e in events]


def test_cache_purge_output(served: Served, bob: list[str]) -> None:
    table = served.capgate("cache", "purge", "refunds.create", *bob)
    as_json = served.capgate("cache", "purge", "refunds.create", *bob, "-o", "json")
    assert table.returncode == as_json.returncode
    if table.returncode == 0:
        assert table.stdout == "purged 0 entries of refunds.create\n"
        assert json.loads(as_json.stdout) == {"capability_id": "refunds.create", "deleted": 0}


def test_policy_test_and_explain_outputs() -> None:
    policies = str(QUICKSTART / "policies")
    run = lambda *a: subprocess.run([CAPGATE, *a], capture_output=True, text=True, check=False)  # noqa: E731
    as_yaml = run("policy", "test", policies, "-o", "yaml")
    assert as_yaml.returncode == 0, as_yaml.stderr
    assert yaml.safe_load(as_yaml.stdout)["passed"] == 2
    as_json = run("policy", "test", policies, "--output", "json")
    assert json.loads(as_json.stdout)["passed"] == 2
    table = run("policy", "test", policies, "-o", "table")
    assert table.stdout.splitlines()[-1] == "2 passed, 0 failed"
