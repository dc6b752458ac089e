"""The chart README's copy-paste examples work as written: each values example lints, renders
valid Kubernetes objects and a config the gateway loads; the "in your own chart" example builds
a parent chart whose pod runs the gateway as a native sidecar next to the app."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from tests.helm.chart import (
    CHART,
    all_containers,
    gateway_container,
    helm,
    lint,
    pod_spec,
    render,
    validate_manifests,
)
from tests.helm.podfiles import load_rendered_config

pytestmark = pytest.mark.integration

README = CHART / "README.md"
# A fenced YAML block whose first line names the file it is: ```yaml\n# shop/Chart.yaml\n...
_BLOCK = re.compile(r"```yaml\n# (?P<name>[\w./-]+)\n(?P<body>.*?)```", re.DOTALL)
EXAMPLES = {m["name"]: f"# {m['name']}\n{m['body']}" for m in _BLOCK.finditer(README.read_text())}
VALUES_EXAMPLES = sorted(name for name in EXAMPLES if name.endswith("-values.yaml"))


def test_readme_has_an_example_for_both_modes() -> None:
    modes = {yaml.safe_load(EXAMPLES[name])["mode"] for name in VALUES_EXAMPLES}
    assert modes == {"sidecar", "standalone"}


@pytest.mark.parametrize("name", VALUES_EXAMPLES)
def test_readme_values_example_installs_as_written(name: str, tmp_path: Path) -> None:
    values = tmp_path / name
    values.write_text(EXAMPLES[name])
    result = lint([values])
    assert result.returncode == 0, result.stdout + result.stderr
    rendered = render([values])
    validate_manifests(rendered.docs)
    assert load_rendered_config(rendered, tmp_path / "pod")


def test_readme_parent_chart_example_runs_the_gateway_next_to_the_app(tmp_path: Path) -> None:
    for name, text in EXAMPLES.items():
        if name.startswith("shop/"):
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    # The dependency's `repository: file://../capgate`, as in this repository's helm/ folder.
    shutil.copytree(CHART, tmp_path / "capgate", ignore=shutil.ignore_patterns("ci"))
    update = helm("dependency", "update", str(tmp_path / "shop"), home=tmp_path / "helm-home")
    assert update.returncode == 0, update.stderr
    result = helm("template", "shop", str(tmp_path / "shop"))
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    validate_manifests(docs)

    shop = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "shop")
    pod = pod_spec(shop)
    gateway = gateway_container(pod)
    assert gateway["restartPolicy"] == "Always"
    assert gateway["image"] == "registry.example.com/capgate:0.1.0"
    app = next(c for c in all_containers(pod) if c["name"] == "shop")
    socket_mount = app["volumeMounts"][0]
    assert socket_mount["name"] in {m["name"] for m in gateway["volumeMounts"]}
    assert [e["name"] for e in app["env"]] == ["CAPGATE_ADDRESS"]
    assert pod["securityContext"]["fsGroup"] == gateway["securityContext"]["runAsGroup"]
    config_volume = next(v for v in pod["volumes"] if v["name"] == "capgate-config")
    mounted = {s["configMap"]["name"] for s in config_volume["projected"]["sources"]}
    created = {d["metadata"]["name"] for d in docs if d["kind"] == "ConfigMap"}
    assert mounted <= created, "the sidecar mounts a ConfigMap the release does not create"
