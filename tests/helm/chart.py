"""Helpers for the chart tests: the pinned helm binary, rendering, and reading the manifests.

helm is never looked up on PATH: the tests use the version `scripts/helm.sh` pins, so every
machine renders the same YAML. When it is missing the tests fail (never skip) and say how to
install it.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "capgate"
CI_VALUES = sorted((CHART / "ci").glob("*.yaml"))
INSTALL_SCRIPT = ROOT / "scripts" / "helm.sh"
RELEASE = "demo"

Manifest = dict[str, Any]
# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion) and the newest schemas
# kubernetes-validate ships.
KUBE_VERSIONS = ["1.29.0", kubernetes_validate.latest_version()]
# Custom resources have no schema in kubernetes-validate; their tests check them structurally.
CUSTOM_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}


def pinned_version() -> str:
    """The helm version scripts/helm.sh installs (the one place it is written)."""
    match = re.search(r'HELM_VERSION="\$\{HELM_VERSION:-(v[0-9.]+)\}"', INSTALL_SCRIPT.read_text())
    assert match, "scripts/helm.sh no longer pins HELM_VERSION"
    return match.group(1)


def _install_dir() -> Path:
    """Where scripts/helm.sh installs helm (the same defaults, outside the clone)."""
    explicit = os.environ.get("CAPGATE_TOOLS_BIN")
    if explicit:
        return Path(explicit)
    cache_home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache_home) / "capgate" / "bin"


@cache
def helm_binary() -> str:
    """Path of the pinned helm; fails the calling test with the install command when absent."""
    override = os.environ.get("CAPGATE_HELM")
    path = Path(override) if override else _install_dir() / "helm"
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(
            f"helm is not installed at {path}. Install the pinned version with "
            f"`bash scripts/helm.sh` (builds helm {pinned_version()} with `go install`; "
            "a few minutes the first time), or point CAPGATE_HELM at a helm binary.",
            pytrace=False,
        )
    version = _run([str(path), "version", "--template", "{{.Version}}"]).stdout.strip()
    if not override and version != pinned_version():
        pytest.fail(
            f"{path} is helm {version}, scripts/helm.sh pins {pinned_version()}: "
            "run `bash scripts/helm.sh` to rebuild it",
            pytrace=False,
        )
    return str(path)


def _run(
    argv: Sequence[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60, env=env)


def helm(*args: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the pinned helm; the caller checks the return code. With `home`, helm's config,
    cache and data directories live there instead of the user's."""
    env = None
    if home is not None:
        env = {
            **os.environ,
            **{
                f"HELM_{kind}_HOME": str(home / kind.lower())
                for kind in ("CONFIG", "CACHE", "DATA")
            },
        }
    return _run([helm_binary(), *args], env)


def validate_manifests(docs: Sequence[Manifest]) -> None:
    """Validate against the Kubernetes schemas (strict: unknown fields are errors too, since a
    misspelt key would be silently dropped by the API server)."""
    for doc in docs:
        if (doc["apiVersion"], doc["kind"]) in CUSTOM_KINDS:
            continue
        for version in KUBE_VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)


def _value_args(values: Sequence[Path], sets: Sequence[str], set_json: Sequence[str]) -> list[str]:
    argv: list[str] = []
    for file in values:
        argv += ["-f", str(file)]
    for item in sets:
        argv += ["--set", item]
    for item in set_json:
        argv += ["--set-json", item]
    return argv


def template(
    values: Sequence[Path] = (),
    sets: Sequence[str] = (),
    set_json: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    return helm("template", RELEASE, str(CHART), *_value_args(values, sets, set_json))


def lint(values: Sequence[Path] = (), sets: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    return helm("lint", "--strict", str(CHART), *_value_args(values, sets, ()))


@dataclass(frozen=True)
class Rendered:
    """The documents of one `helm template` run."""

    docs: list[Manifest]

    def of_kind(self, kind: str) -> list[Manifest]:
        return [d for d in self.docs if d["kind"] == kind]

    def one(self, kind: str, name: str | None = None) -> Manifest:
        found = [d for d in self.of_kind(kind) if name is None or d["metadata"]["name"] == name]
        assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
        return found[0]

    def config_maps(self) -> dict[str, Manifest]:
        return {d["metadata"]["name"]: d for d in self.of_kind("ConfigMap")}

    def workloads(self) -> list[Manifest]:
        """The Deployments whose pods run the gateway (not the approver inbox)."""
        return [
            d
            for d in self.of_kind("Deployment")
            if any(c["name"] == "capgate" for c in all_containers(pod_spec(d)))
        ]

    def inbox(self) -> Manifest | None:
        """The approver inbox Deployment, when the values enable it."""
        found = [d for d in self.of_kind("Deployment") if d["metadata"]["name"].endswith("-inbox")]
        assert len(found) <= 1, "at most one inbox Deployment"
        return found[0] if found else None


def render(
    values: Sequence[Path] = (),
    sets: Sequence[str] = (),
    set_json: Sequence[str] = (),
) -> Rendered:
    result = template(values, sets, set_json)
    assert result.returncode == 0, result.stderr
    return Rendered([d for d in yaml.safe_load_all(result.stdout) if d])


def pod_spec(workload: Manifest) -> Manifest:
    spec: Manifest = workload["spec"]["template"]["spec"]
    return spec


def all_containers(pod: Manifest) -> Iterator[Manifest]:
    yield from pod.get("initContainers", [])
    yield from pod.get("containers", [])


def gateway_container(pod: Manifest) -> Manifest:
    found = [c for c in all_containers(pod) if c["name"] == "capgate"]
    assert len(found) == 1, "the pod must run exactly one capgate container"
    return found[0]


def chart_config(rendered: Rendered) -> dict[str, Any]:
    """The gateway config the chart writes (00-chart.yaml), parsed."""
    config_map = rendered.one("ConfigMap", f"{RELEASE}-capgate-config")
    parsed: dict[str, Any] = yaml.safe_load(config_map["data"]["00-chart.yaml"])
    return parsed


def projected_files(
    rendered: Rendered,
    pod: Manifest,
    extra: dict[str, Manifest] | None = None,
    volume: str = "capgate-config",
) -> dict[str, str]:
    """The files kubelet puts in the config volume: relative path -> text.

    `extra` supplies ConfigMaps the chart references but does not render (extraConfigMaps).
    """
    spec = next(v for v in pod["volumes"] if v["name"] == volume)
    config_maps = {**rendered.config_maps(), **(extra or {})}
    files: dict[str, str] = {}
    for source in spec["projected"]["sources"]:
        ref = source["configMap"]
        data: dict[str, str] = config_maps[ref["name"]]["data"]
        items = ref.get("items") or [{"key": key, "path": key} for key in data]
        for item in items:
            files[item["path"]] = data[item["key"]]
    return files
