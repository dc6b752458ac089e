"""A capability's `approval` options of issue 28 (editable, grantable, quorum, distinct roles,
escalation) and `approvals.grants`: built into the settings, refused with a position when
malformed or when escalation is half given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.config import ConfigError, load_settings
from gateway.config.settings import ApprovalSettings
from gateway.model import ApprovalSpec


def problems_of(path: Path, env: dict[str, str]) -> list[tuple[str, int | None, str]]:
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ=env)
    return [(p.path_in_file, p.line, p.message) for p in info.value.problems]


def test_every_capability_option_is_built(write, base, env):
    base["capabilities"][0]["approval"] = {
        "required": True,
        "editable": True,
        "grantable": False,
        "quorum": 2,
        "distinct_roles": ["finance", "risk"],
        "escalate_after": "1h30m",
        "escalation_roles": ["cfo", "ceo"],
    }

    approval = load_settings(write(base), environ=env).capabilities[0].approval

    assert approval.editable is True
    assert approval.grantable is False
    assert approval.quorum == 2
    assert approval.distinct_roles == ("finance", "risk")
    assert approval.escalate_after_s == 5400.0
    assert approval.escalation_roles == ("cfo", "ceo")


def test_without_options_one_approver_decides_the_input_as_sent(write, base, env):
    approval = load_settings(write(base), environ=env).capabilities[0].approval

    assert approval == ApprovalSpec()
    assert (approval.editable, approval.grantable, approval.quorum) == (False, True, 1)
    assert (approval.distinct_roles, approval.escalate_after_s) == ((), None)
    assert approval.escalation_roles == ()


def test_grant_settings_are_built(write, base, env):
    base["approvals"] = {
        "default_expires_in": "10m",
        "grants": {"enabled": False, "max_expires_in": "24h", "max_active": 50},
    }

    approvals = load_settings(write(base), environ=env).approvals

    assert approvals.default_expires_in_s == 600.0
    assert approvals.grants_enabled is False
    assert approvals.grants_max_expires_in_s == 86400.0
    assert approvals.grants_max_active == 50


def test_grant_settings_default_to_on_thirty_days_and_ten_thousand(write, base, env):
    approvals = load_settings(write(base), environ=env).approvals

    assert approvals == ApprovalSettings()
    assert approvals.grants_enabled is True
    assert approvals.grants_max_expires_in_s == 30 * 24 * 3600.0
    assert approvals.grants_max_active == 10_000


def _at(base: dict[str, Any], where: tuple[str | int, ...], value: Any) -> None:
    node: Any = base
    for part in where[:-1]:
        node = node.setdefault(part, {}) if isinstance(part, str) else node[part]
    node[where[-1]] = value


APPROVAL = ("capabilities", 0, "approval")
GRANTS = ("approvals", "grants")


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        ((*APPROVAL, "quorum"), 0, "must be at least 1"),
        ((*APPROVAL, "quorum"), 11, "must be at most 10"),
        ((*APPROVAL, "quorum"), "two", "must be an integer"),
        ((*APPROVAL, "editable"), "yes", "must be true or false"),
        ((*APPROVAL, "grantable"), 1, "must be true or false"),
        ((*APPROVAL, "distinct_roles"), [], "must have at least 1 item(s)"),
        ((*APPROVAL, "distinct_roles"), list("abcdef"), "must have at most 5 item(s)"),
        ((*APPROVAL, "distinct_roles"), ["a", "a"], "must not repeat items"),
        ((*APPROVAL, "escalation_roles"), [], "must have at least 1 item(s)"),
        ((*GRANTS, "enabled"), "no", "must be true or false"),
        ((*GRANTS, "max_active"), 0, "must be at least 1"),
        ((*GRANTS, "max_expires_in"), "0s", "must be greater than 0"),
        (
            (*GRANTS, "max_expires_in"),
            "a month",
            "must be a duration such as 250ms, 90s, 15m or 1h30m",
        ),
    ],
)
def test_malformed_options_are_problems_at_their_place(write, base, env, where, value, message):
    _at(base, where, value)

    found = problems_of(write(base), env)

    dotted = ".".join(str(p) for p in where).replace(".0.", "[0].")
    assert (dotted, message) in {(p, m) for p, _, m in found}, found
    assert all(line is not None for _, line, _ in found)


def test_an_unknown_grants_key_is_a_problem_naming_the_known_ones(write, base, env):
    base["approvals"] = {"grants": {"max_uses": 3}}

    found = problems_of(write(base), env)

    assert [(p, m) for p, _, m in found] == [
        (
            "approvals.grants.max_uses",
            "unknown key; expected one of: enabled, max_active, max_expires_in",
        )
    ]


def test_escalation_roles_without_escalate_after_is_a_problem_at_the_key(write, base, env):
    base["capabilities"][0]["approval"] = {"required": True, "escalation_roles": ["cfo"]}

    found = problems_of(write(base), env)

    assert [(p, m) for p, _, m in found] == [
        ("capabilities[0].approval.escalation_roles", "escalation_roles needs escalate_after")
    ]
    assert found[0][1] is not None


def test_escalate_after_without_escalation_roles_is_a_problem_at_the_key(write, base, env):
    base["capabilities"][0]["approval"] = {"required": True, "escalate_after": "1h"}

    found = problems_of(write(base), env)

    assert [(p, m) for p, _, m in found] == [
        ("capabilities[0].approval.escalate_after", "escalate_after needs escalation_roles")
    ]


def test_a_zero_escalate_after_is_a_problem(write, base, env):
    base["capabilities"][0]["approval"] = {"escalate_after": "0s", "escalation_roles": ["cfo"]}

    found = problems_of(write(base), env)

    assert [(p, m) for p, _, m in found] == [
        ("capabilities[0].approval.escalate_after", "must be greater than 0")
    ]
