"""{{ env.NAME }} substitution: string scalars only, missing variables, and secrets never echoed."""

from __future__ import annotations

import pytest

from gateway.config import ConfigError, load_settings


def test_variables_are_substituted_inside_string_scalars(write, base, env):
    base["upstreams"]["things"]["address"] = "{{ env.HOST }}:{{env.PORT}}"
    env.update(HOST="127.0.0.7", PORT="6000")
    settings = load_settings(write(base), environ=env)
    assert settings.upstreams["things"].address == "127.0.0.7:6000"


def test_a_value_is_never_parsed_as_yaml(write, base, env):
    base["capabilities"][0]["description"] = "{{ env.DESC }}"
    env["DESC"] = "x\nrisk: critical\n- [injected]"
    settings = load_settings(write(base), environ=env)
    assert settings.capabilities[0].description == env["DESC"]
    assert settings.capabilities[0].risk == "low"


def test_keys_are_never_substituted(write, base, env):
    text = write(base).read_text() + '"{{ env.KEY }}": 1\n'
    env["KEY"] = "redis"
    with pytest.raises(ConfigError) as info:
        load_settings(write(text), environ=env)
    [problem] = info.value.problems
    assert problem.path_in_file == '["{{ env.KEY }}"]'
    assert problem.message.startswith("unknown key")


def test_a_substituted_string_is_not_coerced_to_a_number(write, base, env):
    base["upstreams"]["things"]["max_response_bytes"] = "{{ env.SIZE }}"
    env["SIZE"] = "1024"
    with pytest.raises(ConfigError) as info:
        load_settings(write(base), environ=env)
    assert [(p.path_in_file, p.message) for p in info.value.problems] == [
        ("upstreams.things.max_response_bytes", "must be an integer")
    ]


def test_a_missing_variable_names_the_variable_and_the_place(write, base, env):
    base["capabilities"][0]["description"] = "{{ env.NOT_SET_ANYWHERE }}"
    path = write(base)
    line = next(n for n, row in enumerate(path.read_text().splitlines(), 1) if "NOT_SET" in row)
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ=env)
    [problem] = info.value.problems  # the empty string left behind is not reported again
    assert problem.path_in_file == "capabilities[0].description"
    assert problem.line == line
    assert problem.file == str(path)
    assert problem.message == "environment variable NOT_SET_ANYWHERE is not set"


def test_only_env_templates_are_allowed(write, base, env):
    base["capabilities"][0]["description"] = "{{ vars.X }}"
    with pytest.raises(ConfigError) as info:
        load_settings(write(base), environ=env)
    assert [p.message for p in info.value.problems] == [
        "unsupported template: only {{ env.NAME }} is allowed"
    ]


def test_a_rejected_secret_is_never_echoed(write, base, env):
    env["JWT_SECRET"] = "short-but-secret-Zq9"
    with pytest.raises(ConfigError) as info:
        load_settings(write(base), environ=env)
    [problem] = info.value.problems
    assert problem.path_in_file == "listeners[0].jwt.keys[0].secret"
    assert problem.message == "HS256 secret must be at least 32 bytes"
    assert "Zq9" not in str(info.value)
    assert "Zq9" not in repr(info.value.problems)


def test_substituted_values_are_scrubbed_even_where_a_message_quotes_a_path(write, base, env):
    base["upstreams"]["things"]["descriptor_set"] = "{{ env.SECRET_DIR }}/things.pb"
    env["SECRET_DIR"] = "/nonexistent/tenant-Kx7Pq"
    with pytest.raises(ConfigError) as info:
        load_settings(write(base), environ=env)
    [problem] = info.value.problems
    assert problem.message == "file not found: <redacted>/things.pb"
    assert "Kx7Pq" not in str(info.value)


def test_secrets_are_not_in_the_repr_of_settings(write, base, env):
    base["audit"] = {"hmac_key": "{{ env.HMAC }}"}
    base["redis"] = {"url": "redis://:{{ env.REDIS_PASSWORD }}@127.0.0.1:6379/0"}
    env.update(HMAC="h" * 40, REDIS_PASSWORD="pw-Lm3Ty")
    settings = load_settings(write(base), environ=env)
    assert settings.audit.hmac_key == "h" * 40
    assert settings.redis.url == "redis://:pw-Lm3Ty@127.0.0.1:6379/0"
    text = repr(settings)
    assert env["JWT_SECRET"] not in text
    assert "h" * 40 not in text
    assert "pw-Lm3Ty" not in text
