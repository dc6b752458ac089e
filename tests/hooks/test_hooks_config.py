"""The `hooks` config section through `capgate config check` (the loader `serve` uses too):
every problem at file:line, policies reading `hooks` type-checked against the declarations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.cli.main import main as capgate

HOOK = {
    "name": "standing",
    "upstream": "hooks",
    "calls": ["pre_invoke"],
    "context": {"in_arrears": "boolean"},
}


@pytest.fixture
def environ(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def hooked(base: dict[str, Any], *hooks: dict[str, Any]) -> dict[str, Any]:
    base["upstreams"]["hooks"] = {"address": "127.0.0.1:50060", "kind": "grpc"}
    base["hooks"] = list(hooks)
    return base


def check(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = capgate(["config", "check", str(path)])
    lines = capsys.readouterr().out.splitlines()
    # The problems, then their count on the same stream (`N problem(s)`); the count is not one.
    return code, [line for line in lines if not line.split(" ")[-1].startswith("problem")]


def test_a_valid_hooks_section_passes(write, base, environ, capsys) -> None:
    data = hooked(base, HOOK, {**HOOK, "name": "dlp", "calls": ["post_invoke"], "context": {}})
    assert check(write(data), capsys)[0] == 0


def test_every_hook_problem_is_reported_at_its_line(write, base, environ, capsys) -> None:
    data = hooked(
        base,
        HOOK,
        {**HOOK, "timeout": "0s"},  # a duplicate name, a zero timeout
        {
            "name": "lost",
            "upstream": "nowhere",
            "calls": ["post_failure"],
            "context": {"x": "string"},
        },
        {
            "name": "proc",
            "upstream": "proc",
            "calls": ["pre_invoke"],
            "scope": "capability",
            "tags": ["a"],
        },
        {"name": "Bad-Name", "upstream": "hooks", "calls": ["pre_invoke"], "failure": "maybe"},
    )
    data["capabilities"][0]["hooks"] = ["standing", "unknown"]
    path = write(data)
    code, lines = check(path, capsys)
    assert code == 1
    assert all(line.startswith(f"{path}:") for line in lines)
    expected = [
        "hooks[1].name: duplicate hook name 'standing'",
        "hooks[1].timeout: must be greater than 0",
        "hooks[2].upstream: unknown upstream 'nowhere'",
        "hooks[2].context: only a pre_invoke hook returns context",
        "hooks[3].upstream: a hook is called over a grpc upstream (kind grpc)",
        "hooks[3].tags: selectors are for global hooks",
        "hooks[4].name: must be a lowercase identifier",
        "hooks[4].failure: must be one of",
        "capabilities[0].hooks[0]: no capability-scoped hook named 'standing' in hooks",
        "capabilities[0].hooks[1]: no capability-scoped hook named 'unknown' in hooks",
    ]
    for message in expected:
        assert any(message in line for line in lines), (message, lines)


def test_a_policy_reading_hooks_is_type_checked_against_the_declarations(
    write,
    base,
    environ,
    capsys,
    config_dir: Path,
) -> None:
    policies = config_dir / "policies"
    policies.mkdir()
    (policies / "p.yaml").write_text(
        "policies:\n"
        "  - name: arrears\n"
        "    rules:\n"
        "      - when: has(hooks.standing) && hooks.standing.in_arrears\n"
        "        effect: require-approval\n"
        "      - when: hooks.standing.tier == 'gold'\n"
        "        effect: deny\n"
        "      - when: hooks.standing.in_arrears == 'yes'\n"
        "        effect: deny\n"
    )
    data = hooked(base, HOOK)
    data["policies"] = {"paths": ["policies"]}
    code, lines = check(write(data), capsys)
    assert code == 1
    located = [line for line in lines if f"{policies / 'p.yaml'}:" in line]
    # rule 0 checks; rule 1 reads an undeclared attribute; rule 2 compares a bool to a string
    assert [line.split(":")[1] for line in located] == ["6", "8"], lines
    assert any("tier" in line for line in located)
