"""YAML reading details (anchors, hostile aliases, tags) and Go-style durations."""

from __future__ import annotations

import pytest

from gateway.config import ConfigError, load_settings, parse_duration
from gateway.config.durations import whole_seconds


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("250ms", 0.25),
        ("90s", 90.0),
        ("15m", 900.0),
        ("1h30m", 5400.0),
        ("1.5h", 5400.0),
        ("2h45m30.5s", 9930.5),
        ("100us", 0.0001),
        ("100\u00b5s", 0.0001),
        ("5ns", 5e-9),
    ],
)
def test_go_durations_become_seconds(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5", "-1s", "1d", "1h 30m", "s", "1.s", "ms5"])
def test_malformed_durations_are_refused(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_whole_seconds_refuses_fractions():
    assert whole_seconds("2m") == 120
    with pytest.raises(ValueError):
        whole_seconds("1500ms")


def test_anchors_and_aliases_can_share_blocks(write, base, env):
    text = write(base).read_text()
    text = text.replace("  jwt:\n", "  jwt: &idp\n", 1)
    text = text.replace(
        "upstreams:",
        "- name: admin\n  address: 127.0.0.1:7444\n  surface: admin\n  role: admin\n"
        "  auth: jwt\n  jwt: *idp\nupstreams:",
        1,
    )
    settings = load_settings(write(text), environ=env)
    assert settings.listeners[0].jwt == settings.listeners[1].jwt


def test_a_recursive_alias_is_refused(write, env):
    with pytest.raises(ConfigError) as info:
        load_settings(write("version: 1\nlisteners: &x [*x]\n"), environ=env)
    assert "recursive YAML alias" in [p.message for p in info.value.problems]


def test_alias_expansion_is_bounded(write, env):
    lines = ["version: 1", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 7)]
    with pytest.raises(ConfigError) as info:
        load_settings(write("\n".join(lines) + "\n"), environ=env)
    [problem] = info.value.problems
    assert problem.message.startswith("more than 200000 values")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("version: 1\n<<: {listeners: []}\n", "YAML merge keys (<<) are not supported"),
        ("version: !!python/name:os.system 1\n", "unsupported YAML tag"),
        ("version: 1\n1: x\n", "mapping keys must be strings"),
        ("- just\n- a list\n", "the config must be a mapping"),
    ],
)
def test_yaml_constructs_outside_plain_data_are_refused(write, env, text, message):
    with pytest.raises(ConfigError) as info:
        load_settings(write(text), environ=env)
    assert any(p.message.startswith(message) for p in info.value.problems)
