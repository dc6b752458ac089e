"""load_settings: every problem at once with lines, file paths, descriptors, schemas, revisions."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from gateway.config import ConfigError, load_settings
from gateway.model import Limits


def problems_of(path: Path, env: dict[str, str]) -> list[tuple[str, int | None, str]]:
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ=env)
    return [(p.path_in_file, p.line, p.message) for p in info.value.problems]


def test_valid_config_builds_frozen_settings(write, base, env, config_dir):
    path = write(base)
    settings = load_settings(path, environ=env)

    assert [lst.name for lst in settings.listeners] == ["agents"]
    assert settings.listeners[0].jwt is not None
    assert settings.listeners[0].jwt.keys[0].secret == env["JWT_SECRET"]
    assert settings.upstreams["things"].descriptor_set == str(config_dir / "things.pb")
    get, make = settings.capabilities
    assert get.method == "/t.v1.Things/Get"
    assert make.method == "/capgate.v1.Procedure/Invoke"  # procedure default
    assert make.input_schema == {"type": "object", "properties": {"name": {"type": "string"}}}
    assert type(make.input_schema) is dict  # no loader internals leak out
    assert get.exposed_on("agent")
    assert not make.exposed_on("agent")
    assert len(settings.revision) == 16
    assert int(settings.revision, 16) >= 0
    assert settings.source == str(path)
    with pytest.raises(AttributeError):
        settings.revision = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        settings.upstreams["new"] = settings.upstreams["things"]  # type: ignore[index]


def test_every_problem_is_reported_at_once_with_line_numbers(write, env):
    env["S"] = env["JWT_SECRET"]
    text = """\
version: 1
listeners:
  - name: agents
    address: 127.0.0.1:7443
    surface: agent
    auth: jwt
    jwt: {issuers: [idp], audience: capgate, keys: [{kid: k1, alg: HS256, secret: "{{ env.S }}"}]}
    colour: blue
upstreams:
  things: {address: 127.0.0.1:50051, descriptor_set: things.pb}
capabilities:
  - id: things.get
    description: Read.
    upstream: things
    method: /t.v1.Things/Get
    side_effect: read
    risk: extreme
    timeout: soon
  - id: things.get
    description: Again.
    upstream: nowhere
    method: /t.v1.Things/Get
    side_effect: read
    risk: low
  - id: things.other
    upstream: things
    method: /t.v1.Things/Get
    side_effect: read
    risk: low
"""
    found = problems_of(write(text), env)
    where = {(path, line) for path, line, _ in found}
    assert ("listeners[0].colour", 8) in where  # unknown key
    assert ("capabilities[0].risk", 17) in where  # enum
    assert ("capabilities[0].timeout", 18) in where  # duration syntax
    assert ("capabilities[1].id", 19) in where  # duplicate id
    assert ("capabilities[1].upstream", 21) in where  # unknown upstream
    assert ("capabilities[2]", 25) in where  # missing description
    messages = {path: message for path, _, message in found}
    assert messages["capabilities[0].risk"] == "must be one of: low, medium, high, critical"
    assert "duration" in messages["capabilities[0].timeout"]
    assert messages["capabilities[2]"] == "missing required key 'description'"
    assert messages["capabilities[1].upstream"] == "no upstream with this name"
    assert "expected one of:" in messages["listeners[0].colour"]
    assert len(found) == 6


def test_yaml_syntax_error_names_the_line(write, env):
    found = problems_of(write("version: 1\nlisteners: [\n  - oops: {\n"), env)
    assert len(found) == 1
    assert found[0][1] is not None
    assert found[0][1] >= 3


def test_duplicate_yaml_key_is_a_problem_not_a_silent_overwrite(write, env):
    found = problems_of(write("version: 1\nversion: 1\nlisteners: []\n"), env)
    assert ("version", 2, "duplicate key (first defined at line 1)") in found


def test_yaml_yes_is_not_a_boolean_so_it_cannot_expose(write, base, env):
    text = write(base).read_text().replace("agent: true", "agent: yes")
    line = next(n for n, row in enumerate(text.splitlines(), 1) if row.strip() == "agent: yes")
    found = problems_of(write(text), env)
    assert found == [("capabilities[0].expose.agent", line, "must be true or false")]


def test_file_paths_resolve_against_the_config_directory_and_must_exist(write, base, env):
    base["upstreams"]["things"]["descriptor_set"] = "missing/things.pb"
    base["policies"] = {"paths": ["policies"]}
    found = problems_of(write(base), env)
    paths = {path: message for path, _, message in found}
    assert paths["upstreams.things.descriptor_set"].startswith("file not found: ")
    assert paths["upstreams.things.descriptor_set"].endswith("missing/things.pb")
    assert "policies.paths[0]" in paths


def test_methods_are_checked_against_the_descriptor_set(write, base, env):
    base["capabilities"][0]["method"] = "/t.v1.Things/Watch"
    base["capabilities"].append(
        {**base["capabilities"][0], "id": "a.b", "method": "/t.v1.Things/Nope"}
    )
    base["capabilities"].append({**base["capabilities"][0], "id": "a.c"})
    del base["capabilities"][-1]["method"]
    found = {(p, m) for p, _, m in problems_of(write(base), env)}
    streaming = (
        "upstream things (capability things.get): /t.v1.Things/Watch is a streaming method; "
        "only unary methods are supported"
    )
    unknown = "upstream things (capability a.b): /t.v1.Things/Nope is not in the upstream's "
    assert ("capabilities[0].method", streaming) in found
    assert ("capabilities[2].method", unknown + "descriptor set") in found
    assert ("capabilities[3]", "method is required for a grpc upstream") in found


def test_procedure_capabilities_need_an_input_schema_and_the_procedure_method(write, base, env):
    del base["capabilities"][1]["input_schema"]
    base["capabilities"][1]["method"] = "/t.v1.Things/Get"
    found = {(p, m) for p, _, m in problems_of(write(base), env)}
    assert ("capabilities[1]", "input_schema is required for a procedure upstream") in found
    assert (
        "capabilities[1].method",
        "procedure upstreams are called at /capgate.v1.Procedure/Invoke",
    ) in found


def test_input_and_output_schemas_must_be_valid_json_schemas(write, base, env):
    base["capabilities"][1]["input_schema"] = {"type": "nonsense"}
    base["capabilities"][0]["output_schema"] = {"properties": {"a": {"pattern": "("}}}
    found = {p: m for p, _, m in problems_of(write(base), env)}
    assert found["capabilities[1].input_schema"].startswith("not a valid JSON Schema")
    assert found["capabilities[0].output_schema"].startswith("not a valid JSON Schema")


def test_redaction_paths_and_hmac_key_are_checked(write, base, env):
    base["capabilities"][0]["redact"] = {
        "output": [{"path": "$..deep", "action": "mask"}, {"path": "$.email", "action": "hmac"}]
    }
    found = {p for p, _, _ in problems_of(write(base), env)}
    assert found == {
        "capabilities[0].redact.output[0].path",
        "capabilities[0].redact.output[1].action",
    }


def test_durations_become_seconds(write, base, env):
    cap = base["capabilities"][0]
    cap["timeout"] = "1h30m"
    cap["retry"] = {"max_attempts": 2, "initial_backoff": "250ms", "max_backoff": "1.5s"}
    cap["approval"] = {"expires_in": "90s", "approvers": {"roles": ["manager"]}}
    base["approvals"] = {"default_expires_in": "15m", "retention": "168h"}
    base["listeners"][0]["jwt"]["max_lifetime"] = "2h"
    settings = load_settings(write(base), environ=env)
    got = settings.capabilities[0]
    assert got.timeout_s == 5400.0
    assert (got.retry.initial_backoff_s, got.retry.max_backoff_s) == (0.25, 1.5)
    assert (got.approval.expires_in_s, got.approval.roles) == (90.0, ("manager",))
    assert settings.approvals.default_expires_in_s == 900.0
    assert settings.approvals.retention_s == 168 * 3600.0
    assert settings.listeners[0].jwt is not None
    assert settings.listeners[0].jwt.max_lifetime_s == 7200


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        (("listeners", 0, "jwt", "leeway"), "1.5s", "must be a whole number of seconds"),
        (("capabilities", 0, "timeout"), "0", "must be greater than 0"),
        (("actor_token", "lifetime"), "5m", "must be at most 60s"),
    ],
)
def test_duration_values_out_of_range_are_problems(write, base, env, where, value, message):
    node: Any = base
    for part in where[:-1]:
        node = node.setdefault(part, {}) if isinstance(part, str) else node[part]
    node[where[-1]] = value
    found = problems_of(write(base), env)
    dotted = ".".join(str(p) for p in where).replace(".0.", "[0].")
    assert (dotted, message) in {(p, m) for p, _, m in found}


def test_capability_limits_fall_back_per_key_to_defaults(write, base, env):
    base["defaults"] = {"limits": {"max_bytes": 1000, "max_depth": 4}}
    base["capabilities"][0]["limits"] = {"max_depth": 8}
    settings = load_settings(write(base), environ=env)
    assert settings.defaults.limits == Limits(max_bytes=1000, max_depth=4)
    assert settings.capabilities[0].limits == Limits(max_bytes=1000, max_depth=8)
    assert settings.capabilities[1].limits == Limits(max_bytes=1000, max_depth=4)


def test_schema_version_binds_input_schema_upstream_and_method_only(write, base, env):
    first = load_settings(write(base), environ=env).capabilities[1].schema_version
    base["capabilities"][1]["description"] = "Reworded."
    base["capabilities"][1]["risk"] = "high"
    assert load_settings(write(base), environ=env).capabilities[1].schema_version == first
    base["capabilities"][1]["input_schema"]["required"] = ["name"]
    assert load_settings(write(base), environ=env).capabilities[1].schema_version != first


def test_revision_covers_config_bytes_and_policy_files(write, base, env, config_dir):
    policies = config_dir / "policies"
    policies.mkdir()
    (policies / "a.yaml").write_text("policies: []\n")
    base["policies"] = {"paths": ["policies"]}
    path = write(base)
    first = load_settings(path, environ=env).revision
    assert load_settings(path, environ=env).revision == first
    (policies / "a.yaml").write_text("policies: [] # edited\n")
    second = load_settings(path, environ=env).revision
    assert second != first
    path.write_text(path.read_text() + "\n# a comment\n")
    assert load_settings(path, environ=env).revision not in {first, second}


def test_retry_on_a_non_idempotent_write_is_accepted_with_a_warning(write, base, env, caplog):
    base["capabilities"][1]["retry"] = {"max_attempts": 2}
    with caplog.at_level(logging.WARNING, logger="gateway.config"):
        settings = load_settings(write(base), environ=env)
    assert settings.capabilities[1].retry.max_attempts == 2
    assert any(
        "things.make" in r.getMessage() and "SI-11" in r.getMessage() for r in caplog.records
    )

    caplog.clear()
    base["capabilities"][1]["idempotent"] = True
    with caplog.at_level(logging.WARNING, logger="gateway.config"):
        load_settings(write(base), environ=env)
    assert not [r for r in caplog.records if "SI-11" in r.getMessage()]


def test_a_missing_config_is_a_config_error(tmp_path, env):
    found = problems_of(tmp_path / "absent.yaml", env)
    assert found == [("", None, "config file not found")]
