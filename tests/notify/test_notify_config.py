"""The `notify` section of the gateway config: parsed into NotifySettings, validated without
echoing secrets, documented defaults equal to the dataclass defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.config import ConfigError, load_settings
from gateway.config.durations import parse_duration
from gateway.config.schema import config_schema
from gateway.config.settings import NotifySettings, Webhook

SECRET = "jwt-secret-that-is-long-enough-0123456789"
HOOK_SECRET = "hook-secret-that-is-long-enough-0123456789"
ENV = {"JWT_SECRET": SECRET, "HOOK_SECRET": HOOK_SECRET, "HOOK_URL": "https://hooks.example/T1/x"}


def config(notify: dict[str, Any] | None) -> dict[str, Any]:
    root: dict[str, Any] = {
        "version": 1,
        "listeners": [
            {
                "name": "agents",
                "address": "127.0.0.1:7443",
                "surface": "agent",
                "auth": "jwt",
                "jwt": {
                    "issuers": ["idp"],
                    "audience": "capgate",
                    "keys": [{"kid": "k1", "alg": "HS256", "secret": "{{ env.JWT_SECRET }}"}],
                },
            }
        ],
        "audit": {"sinks": []},
    }
    if notify is not None:
        root["notify"] = notify
    return root


def load(tmp_path: Path, root: dict[str, Any]) -> Any:
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(root))
    return load_settings(path, environ=ENV)


def test_the_notify_section_builds_notify_settings(tmp_path: Path) -> None:
    settings = load(
        tmp_path,
        config(
            {
                "inbox_base_url": "https://inbox.example.com/capgate",
                "webhooks": [
                    {
                        "name": "chat",
                        "kind": "slack",
                        "url": "{{ env.HOOK_URL }}",
                        "secret": "{{ env.HOOK_SECRET }}",
                    },
                    {
                        "name": "tickets",
                        "url": "http://tickets.internal:8080/hook",
                        "secret": "{{ env.HOOK_SECRET }}",
                        "timeout": "750ms",
                    },
                ],
                "max_attempts": 3,
                "initial_backoff": "200ms",
                "max_backoff": "10s",
                "max_pending": 50,
            }
        ),
    )
    notify = settings.notify
    assert notify.inbox_base_url == "https://inbox.example.com/capgate"
    assert notify.webhooks == (
        Webhook(name="chat", url="https://hooks.example/T1/x", kind="slack", secret=HOOK_SECRET),
        Webhook(
            name="tickets",
            url="http://tickets.internal:8080/hook",
            kind="generic",
            secret=HOOK_SECRET,
            timeout_s=0.75,
        ),
    )
    assert (
        notify.max_attempts,
        notify.initial_backoff_s,
        notify.max_backoff_s,
        notify.max_pending,
    ) == (3, 0.2, 10.0, 50)
    # The URL (a credential for Slack) and the secret never show in a repr, so never in logs.
    assert "hooks.example" not in repr(notify)
    assert HOOK_SECRET not in repr(notify)


def test_without_a_notify_section_nothing_is_notified(tmp_path: Path) -> None:
    assert load(tmp_path, config(None)).notify == NotifySettings()


def test_bad_webhooks_are_refused_without_echoing_secrets(tmp_path: Path) -> None:
    env_short = {"webhooks": [{"name": "chat", "url": "ftp://x", "secret": "short-secret"}]}
    with pytest.raises(ConfigError) as info:
        load(tmp_path, config(env_short))
    problems = {(p.path_in_file, p.message) for p in info.value.problems}
    assert ("notify", "missing required key 'inbox_base_url'") in problems
    assert ("notify.webhooks[0].url", "must be an http(s) URL") in problems
    assert ("notify.webhooks[0].secret", "must have at least 32 characters") in problems
    assert "short-secret" not in str(info.value)
    with pytest.raises(ConfigError) as no_secret:
        load(
            tmp_path,
            config(
                {
                    "inbox_base_url": "https://i.example",
                    "webhooks": [{"name": "chat", "url": "https://h.example"}],
                }
            ),
        )
    assert "missing required key 'secret'" in str(no_secret.value.problems)


@pytest.mark.parametrize(
    ("schema", "instance"),
    [
        (config_schema()["properties"]["notify"], NotifySettings()),
        (config_schema()["definitions"]["webhook"], Webhook(name="")),
    ],
    ids=["notify", "webhook"],
)
def test_documented_defaults_are_the_dataclass_defaults(schema: Any, instance: Any) -> None:
    checked = 0
    for key, prop in schema["properties"].items():
        if "default" not in prop:
            continue
        is_duration = prop.get("$ref") == "#/definitions/duration"
        name = f"{key}_s" if is_duration else key
        expected = parse_duration(prop["default"]) if is_duration else prop["default"]
        assert getattr(instance, name) == expected, key
        checked += 1
    assert checked >= 2
