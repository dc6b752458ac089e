"""`capgate config check|schema`."""

from __future__ import annotations

import json

import pytest

from gateway.cli.main import main as capgate
from gateway.config import config_schema, load_settings


@pytest.fixture
def environ(env, monkeypatch):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def test_check_prints_a_summary_of_a_valid_config(write, base, environ, capsys):
    path = write(base)
    assert capgate(["config", "check", str(path)]) == 0
    revision = load_settings(path).revision
    assert capsys.readouterr().out == f"ok: 1 listener, 2 capabilities, revision {revision}\n"


def test_check_prints_every_problem_as_file_line_path_message(write, base, environ, capsys):
    base["capabilities"][0]["risk"] = "extreme"
    base["capabilities"][1]["upstream"] = "nowhere"
    path = write(base)
    assert capgate(["config", "check", str(path)]) == 1
    out = capsys.readouterr()
    *lines, count = out.out.splitlines()
    assert len(lines) == 2
    assert count == "2 problems"  # on the same stream as the problems (issue 27)
    assert all(line.startswith(f"{path}:") for line in lines)
    assert any(
        line.endswith(": capabilities[0].risk: must be one of: low, medium, high, critical")
        for line in lines
    )
    assert any(
        line.endswith(": capabilities[1].upstream: no upstream with this name") for line in lines
    )


def test_check_shows_warnings_on_stderr(write, base, environ, capsys):
    base["capabilities"][1]["retry"] = {"max_attempts": 1}
    assert capgate(["config", "check", str(write(base))]) == 0
    assert (
        "warning: capability things.make: retry.max_attempts has no effect"
        in capsys.readouterr().err
    )


def test_schema_prints_the_published_schema(capsys):
    assert capgate(["config", "schema"]) == 0
    assert json.loads(capsys.readouterr().out) == config_schema()


def test_usage_errors_exit_2(capsys):
    assert capgate(["config"]) == 2
    assert capgate(["config", "frobnicate"]) == 2
