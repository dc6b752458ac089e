"""Every top-level section of the gateway config can be set through the chart's `config` value,
and the two lists cannot drift: the chart's allowed `config` keys plus the keys the chart writes
itself (00-chart.yaml) are exactly the gateway config schema's top-level properties. A section
the gateway gains (hooks, limits, cache, notify, ...) fails this test until the chart takes it.

A chart with hooks, limits, a cache and webhooks set renders valid Kubernetes objects (the
kubernetes-validate schemas), its ConfigMap carries them, and the gateway's own loader accepts
the projected config; their secrets come from Secrets through the environment, never values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helm.chart import CHART, RELEASE, ROOT, render, template, validate_manifests
from tests.helm.podfiles import load_rendered_config
from tests.helm.test_helm_config_loads import OPERATOR_CONFIG_MAPS

pytestmark = pytest.mark.integration

GATEWAY_SCHEMA = ROOT / "gateway" / "config" / "schema" / "config.schema.json"
# What the chart writes itself from its own values (templates/_helpers.tpl capgate.chartConfig).
CHART_OWNED = {"version", "listeners", "redis", "policies"}


def _chart_config_keys() -> set[str]:
    schema = json.loads((CHART / "values.schema.json").read_text())
    config = schema["properties"]["config"]
    assert config["additionalProperties"] is False  # unknown keys are refused, so list them all
    return set(config["properties"])


def _gateway_keys() -> set[str]:
    return set(json.loads(GATEWAY_SCHEMA.read_text())["properties"])


def test_the_chart_takes_every_section_of_the_gateway_config() -> None:
    chart, gateway = _chart_config_keys(), _gateway_keys()
    assert gateway - CHART_OWNED - chart == set(), "gateway sections the chart refuses"
    assert chart - gateway == set(), "chart config keys the gateway does not know"
    assert chart & CHART_OWNED == set(), "keys the chart writes itself are not values"
    assert gateway >= CHART_OWNED


def test_keys_the_chart_writes_itself_are_refused_in_config() -> None:
    for key in sorted(CHART_OWNED):
        result = template(set_json=[f'config.{key}={{"x": 1}}'])
        assert result.returncode != 0, key
        assert "config" in result.stderr, (key, result.stderr)


SECTIONS: dict[str, Any] = {
    "hooks": [
        {
            "name": "fraud",
            "upstream": "orders",
            "calls": ["pre_invoke"],
            "capabilities": ["orders.*"],
            "timeout": "500ms",
        }
    ],
    "limits": [
        {
            "name": "reads_per_minute",
            "capabilities": ["orders.*"],
            "key": "actor.id",
            "rate": {"limit": 60, "window": "1m", "burst": 10},
        }
    ],
    "cache": {"key": "{{ env.CAPGATE_CACHE_KEY }}", "timeout": "50ms", "max_entries": 500},
    "notify": {
        "inbox_base_url": "https://inbox.example.com",
        "webhooks": [
            {
                "name": "approvers",
                "url": "https://hooks.example.com/capgate",
                "secret": "{{ env.CAPGATE_WEBHOOK_SECRET }}",
            }
        ],
    },
}


def _values(tmp_path: Path, sections: dict[str, Any]) -> Path:
    values = yaml.safe_load((CHART / "ci" / "standalone.yaml").read_text())
    values["config"].update(sections)
    values["config"]["capabilities"][0]["cache"] = {"ttl": "30s"}
    values["secretEnv"].update(
        {
            "CAPGATE_CACHE_KEY": {"name": "capgate-cache", "key": "key"},
            "CAPGATE_WEBHOOK_SECRET": {"name": "capgate-webhooks", "key": "approvers"},
        }
    )
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def test_hooks_limits_cache_and_notify_render_into_a_config_the_gateway_loads(
    tmp_path: Path,
) -> None:
    rendered = render([_values(tmp_path, SECTIONS)])
    validate_manifests(rendered.docs)
    written = yaml.safe_load(
        rendered.one("ConfigMap", f"{RELEASE}-capgate-config")["data"]["10-values.yaml"]
    )
    for section, value in SECTIONS.items():
        assert written[section] == value, section
    loaded = load_rendered_config(rendered, tmp_path / "pods", extra=OPERATOR_CONFIG_MAPS)
    assert loaded
    for settings, _ in loaded:
        assert [h.name for h in settings.hooks] == ["fraud"]
        assert [limit.name for limit in settings.limits] == ["reads_per_minute"]
        assert settings.cache.max_entries == 500
        assert settings.capabilities[0].cache is not None
        assert settings.notify is not None
        assert [w.name for w in settings.notify.webhooks] == ["approvers"]


@pytest.mark.parametrize(
    ("section", "value"),
    [
        ("cache", {"key": "a-literal-cache-key-0123456789abcdef"}),
        (
            "notify",
            {
                "inbox_base_url": "https://inbox.example.com",
                "webhooks": [{"name": "a", "url": "https://h.example.com", "secret": "x" * 40}],
            },
        ),
    ],
    ids=["literal cache key", "literal webhook secret"],
)
def test_secrets_of_the_new_sections_are_refused_in_values(
    section: str, value: Any, tmp_path: Path
) -> None:
    result = template([_values(tmp_path, {section: value})])
    assert result.returncode != 0
    assert section in result.stderr, result.stderr


def test_limits_need_a_real_redis(tmp_path: Path) -> None:
    values = _values(tmp_path, {"limits": SECTIONS["limits"]})
    refused = template([values], sets=["redis.url=null"])
    assert refused.returncode != 0
    assert "redis" in refused.stderr
    assert template([values]).returncode == 0
