"""What the chart writes is a config the gateway accepts: every CI values file, rendered,
projected into a directory the way kubelet mounts it, loads with the gateway's own loader and
its policies compile. A chart that renders valid Kubernetes YAML but a config the gateway
refuses would crash-loop every pod."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.helm.chart import CI_VALUES, render
from tests.helm.podfiles import load_rendered_config

pytestmark = pytest.mark.integration

REFUNDS_POLICY = """\
policies:
  - name: refund-limit
    match:
      capabilities: ["orders.*"]
    rules:
      - when: has(input.amount) && input.amount > 1000
        effect: deny
        message: Refunds over 1000 go through finance.
"""
# ConfigMaps a values file references but leaves to the operator (extraConfigMaps).
OPERATOR_CONFIG_MAPS = {
    "shop-policies": {
        "metadata": {"name": "shop-policies"},
        "data": {"refunds.yaml": REFUNDS_POLICY},
    }
}


@pytest.mark.parametrize("values", CI_VALUES, ids=[p.stem for p in CI_VALUES])
def test_rendered_config_loads_in_the_gateway_and_its_policies_compile(
    values: Path, tmp_path: Path
) -> None:
    rendered = render([values])
    loaded = load_rendered_config(rendered, tmp_path, extra=OPERATOR_CONFIG_MAPS)
    assert loaded
    declared = yaml.safe_load(values.read_text())
    for settings, policies in loaded:
        ids = [c.id for c in settings.capabilities]
        assert ids == [c["id"] for c in declared["config"]["capabilities"]]
        if declared.get("policies") or declared.get("extraConfigMaps"):
            assert policies is not None
            assert policies.policy_names
