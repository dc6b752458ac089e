"""The Helm chart: lint, render and validate every CI values file, then check what a cluster
operator relies on — probes, security context, config mounts, the socket's reach, secrets only
by reference, and the values schema's refusals."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helm.chart import (
    CHART,
    CI_VALUES,
    RELEASE,
    Manifest,
    Rendered,
    all_containers,
    chart_config,
    gateway_container,
    lint,
    pod_spec,
    render,
    template,
    validate_manifests,
)

pytestmark = pytest.mark.integration

ENV_REF = re.compile(r"\{\{ *env\.([A-Za-z_][A-Za-z0-9_]*) *\}\}")
IDS = [p.stem for p in CI_VALUES]


@pytest.fixture(scope="module", params=CI_VALUES, ids=IDS)
def rendered(request: pytest.FixtureRequest) -> Rendered:
    return render([request.param])


def test_ci_values_cover_both_modes() -> None:
    modes = {yaml.safe_load(p.read_text())["mode"] for p in CI_VALUES}
    assert modes == {"sidecar", "standalone"}


@pytest.mark.parametrize("values", [None, *CI_VALUES], ids=["defaults", *IDS])
def test_helm_lint_strict_passes(values: Path | None) -> None:
    result = lint([values] if values else [])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


def test_rendered_manifests_are_valid_kubernetes_objects(rendered: Rendered) -> None:
    validate_manifests(rendered.docs)


def test_service_monitor_selects_the_service_metrics_port() -> None:
    rendered = render([CHART / "ci" / "standalone.yaml"])
    monitor = rendered.one("ServiceMonitor")
    service = rendered.one("Service")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    port_names = {p["name"] for p in service["spec"]["ports"]}
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    assert "metrics" in port_names


def test_every_workload_runs_the_gateway_with_grpc_health_probes(rendered: Rendered) -> None:
    config = chart_config(rendered)
    probe_listener = next(item for item in config["listeners"] if item["name"] == "probe")
    probe_port = int(probe_listener["address"].rsplit(":", 1)[1])
    # kubelet's gRPC probe speaks plaintext TCP only: the probed listener must be exactly that.
    assert probe_listener["auth"] == "none"
    assert "tls" not in probe_listener
    assert rendered.workloads(), "no workload rendered"
    for workload in rendered.workloads():
        gateway = gateway_container(pod_spec(workload))
        probes = {
            k: gateway[k]["grpc"] for k in ("startupProbe", "livenessProbe", "readinessProbe")
        }
        assert {p["port"] for p in probes.values()} == {probe_port}
        # "" and "capgate" = config and policies loaded; "capgate.redis" must never gate a pod,
        # so a Redis blip does not take application pods out of service.
        assert probes["readinessProbe"]["service"] == "capgate"
        assert probes["startupProbe"]["service"] == "capgate"
        assert probes["livenessProbe"]["service"] == ""


def test_containers_are_non_root_read_only_and_drop_all_capabilities(rendered: Rendered) -> None:
    for workload in rendered.workloads():
        pod = pod_spec(workload)
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["automountServiceAccountToken"] is False
        for container in all_containers(pod):
            context = container["securityContext"]
            assert context["runAsNonRoot"] is True, container["name"]
            assert context["readOnlyRootFilesystem"] is True, container["name"]
            assert context["allowPrivilegeEscalation"] is False, container["name"]
            assert context["capabilities"]["drop"] == ["ALL"], container["name"]
        gateway = gateway_container(pod)
        assert gateway["securityContext"]["runAsUser"] > 0


def test_config_is_a_projected_directory_never_a_sub_path(rendered: Rendered) -> None:
    for workload in rendered.workloads():
        pod = pod_spec(workload)
        for container in all_containers(pod):
            for mount in container.get("volumeMounts", []):
                # subPath mounts never receive ConfigMap updates: hot reload would silently stop.
                assert not {"subPath", "subPathExpr"} & set(mount), mount
        gateway = gateway_container(pod)
        mount = next(m for m in gateway["volumeMounts"] if m["mountPath"] == "/etc/capgate")
        assert mount["readOnly"] is True
        volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
        names = [s["configMap"]["name"] for s in volume["projected"]["sources"]]
        assert f"{RELEASE}-capgate-config" in names
        # No checksum of the config in the pod template: edits hot-reload without a restart.
        annotations = workload["spec"]["template"]["metadata"].get("annotations", {})
        assert not any("config" in key for key in annotations)


def test_writable_paths_are_volumes(rendered: Rendered) -> None:
    for workload in rendered.workloads():
        pod = pod_spec(workload)
        gateway = gateway_container(pod)
        volumes = {v["name"]: v for v in pod["volumes"]}
        writable = {
            m["mountPath"]: volumes[m["name"]]
            for m in gateway["volumeMounts"]
            if not m.get("readOnly")
        }
        assert set(writable) == {"/tmp", "/run/capgate"}
        assert all("emptyDir" in v for v in writable.values())


def _gateway_config_text(rendered: Rendered, pod: Manifest) -> str:
    """The text of the chart's ConfigMaps in the gateway's config volume (not the inbox's)."""
    volume = next(v for v in pod["volumes"] if v["name"] == "capgate-config")
    mounted = {source["configMap"]["name"] for source in volume["projected"]["sources"]}
    return "\n".join(
        text
        for name, config_map in rendered.config_maps().items()
        if name in mounted
        for text in config_map.get("data", {}).values()
    )


def _secret_fields(node: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every value whose key says it is secret material, anywhere in a parsed config."""
    found: list[tuple[str, Any]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{path}.{key}"
            # A mapping (the inbox's admin.token block) is searched, not taken as a value.
            secret_key = key in {"secret", "hmac_key", "password", "token"}
            if (secret_key and not isinstance(value, dict)) or here == ".redis.url":
                found.append((here, value))
            found += _secret_fields(value, here)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            found += _secret_fields(item, f"{path}[{i}]")
    return found


def test_config_maps_hold_no_secret_values(rendered: Rendered) -> None:
    for config_map in rendered.of_kind("ConfigMap"):
        for name, text in config_map["data"].items():
            for path, value in _secret_fields(yaml.safe_load(text)):
                assert isinstance(value, str), (name, path)
                assert ENV_REF.fullmatch(value), (name, path)
    assert not rendered.of_kind("Secret"), "the chart references Secrets, it never creates them"


def test_every_env_reference_in_the_config_is_set_on_the_gateway(rendered: Rendered) -> None:
    for workload in rendered.workloads():
        pod = pod_spec(workload)
        used = set(ENV_REF.findall(_gateway_config_text(rendered, pod)))
        env = {e["name"]: e for e in gateway_container(pod)["env"]}
        # A missing variable would stop the gateway at load; a secret must come from a Secret.
        assert used <= set(env), used - set(env)
        for name in used:
            assert "secretKeyRef" in env[name].get("valueFrom", {}) or name == "CAPGATE_REDIS_URL"


def test_trusted_local_socket_is_shared_only_by_the_app_and_the_gateway() -> None:
    for values in [CHART / "ci" / "sidecar.yaml", CHART / "ci" / "sidecar-classic.yaml"]:
        rendered = render([values])
        local = [
            item for item in chart_config(rendered)["listeners"] if item["auth"] == "trusted-local"
        ]
        assert len(local) == 1
        socket_dir = str(Path(local[0]["address"].removeprefix("unix://")).parent)
        (workload,) = rendered.workloads()
        pod = pod_spec(workload)
        volumes = {v["name"]: v for v in pod["volumes"]}
        holders = {
            container["name"]: mount["name"]
            for container in all_containers(pod)
            for mount in container.get("volumeMounts", [])
            if mount["mountPath"] == socket_dir
        }
        app_name = yaml.safe_load(values.read_text())["exampleApp"]["name"]
        assert set(holders) == {"capgate", app_name}
        (volume_name,) = set(holders.values())
        assert "emptyDir" in volumes[volume_name]
        sharers = {
            c["name"]
            for c in all_containers(pod)
            for m in c.get("volumeMounts", [])
            if m["name"] == volume_name
        }
        assert sharers == {"capgate", app_name}
        app = next(c for c in all_containers(pod) if c["name"] == app_name)
        address = next(e["value"] for e in app["env"] if e["name"] == "CAPGATE_ADDRESS")
        assert address == local[0]["address"]


def test_standalone_mode_has_no_trusted_local_listener_and_a_full_deployment() -> None:
    rendered = render([CHART / "ci" / "standalone.yaml"])
    assert all(item["auth"] != "trusted-local" for item in chart_config(rendered)["listeners"])
    deployment = rendered.one("Deployment")
    hpa = rendered.one("HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert "replicas" not in deployment["spec"], "the HPA owns the replica count"
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert rendered.one("PodDisruptionBudget")["spec"]["selector"]["matchLabels"] == selector
    assert rendered.one("NetworkPolicy")["spec"]["podSelector"]["matchLabels"] == selector
    service = rendered.one("Service")
    assert service["spec"]["selector"] == selector
    container_ports = {p["name"] for p in gateway_container(pod_spec(deployment))["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= container_ports


def test_sidecar_mode_runs_as_a_native_sidecar_unless_disabled() -> None:
    native = pod_spec(render([CHART / "ci" / "sidecar.yaml"]).one("Deployment"))
    assert [c["name"] for c in native["initContainers"]] == ["capgate"]
    assert native["initContainers"][0]["restartPolicy"] == "Always"
    classic = pod_spec(render([CHART / "ci" / "sidecar-classic.yaml"]).one("Deployment"))
    assert "initContainers" not in classic
    assert "capgate" in [c["name"] for c in classic["containers"]]


def test_capability_edits_hot_reload_while_listener_edits_roll_the_pods() -> None:
    values = [CHART / "ci" / "sidecar.yaml"]

    def pod_template(*sets: str) -> Any:
        return render(values, sets=sets).one("Deployment")["spec"]["template"]

    base = pod_template()
    assert pod_template("config.capabilities[0].description=Changed") == base
    assert pod_template("listeners.probe.port=9086") != base


# --- values.schema.json refusals -------------------------------------------------------------

NO_REDIS: dict[str, str] = {
    "approvals on": "config.approvals.enabled=true",
    "idempotency on": "config.idempotency.enabled=true",
}


@pytest.mark.parametrize("setting", list(NO_REDIS.values()), ids=list(NO_REDIS))
def test_redis_url_is_required_when_approvals_or_idempotency_are_on(
    setting: str, tmp_path: Path
) -> None:
    values = tmp_path / "values.yaml"
    section, _, rest = setting.removeprefix("config.").partition(".")
    values.write_text(yaml.safe_dump({"config": {section: {rest.split("=")[0]: True}}}))
    for result in (template([values]), lint([values])):
        assert result.returncode != 0
        assert "redis" in result.stderr + result.stdout
    assert template([values], sets=["redis.url=redis://redis:6379/0"]).returncode == 0


def test_gateway_defaults_count_as_on_when_approvals_are_not_mentioned() -> None:
    # The gateway enables approvals and idempotency when the keys are absent: so does the
    # schema. (null removes the chart's default `approvals: {enabled: false}`.)
    result = template(sets=["config.approvals=null"])
    assert result.returncode != 0
    assert "redis" in result.stderr


def test_redis_audit_sink_requires_redis_url() -> None:
    result = template(set_json=['config.audit={"sinks": ["stdout", "redis"]}'])
    assert result.returncode != 0
    assert "redis" in result.stderr


TCP = [
    "listeners.tcp[0].name=agents",
    "listeners.tcp[0].port=7443",
    "listeners.tcp[0].surface=agent",
    "listeners.tcp[0].auth=none",
]
REFUSED: dict[str, list[str]] = {
    "literal hmac_key": ["config.audit.hmac_key=literal-hmac-key-0123456789abcdef"],
    "password in the redis url": ["redis.url=redis://:hunter2@redis:6379/0"],
    "redis in config": ["config.redis.url=redis://redis:6379"],
    "listeners in config": ["config.listeners=x"],
    "root user": ["runAsUser=0"],
    "reserved listener name": [*TCP, "listeners.tcp[0].name=probe"],
    "trusted-local on tcp": [*TCP, "listeners.tcp[0].auth=trusted-local"],
    "exposed on the probe surface": ["config.capabilities[0].expose.probe=true"],
}


@pytest.mark.parametrize("sets", list(REFUSED.values()), ids=list(REFUSED))
def test_schema_refuses_secrets_in_values_and_unsafe_settings(sets: list[str]) -> None:
    result = template(sets=sets)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr, result.stderr
    assert template(sets=[s for s in sets if s in TCP]).returncode == 0, "the baseline must pass"


def test_literal_jwt_secret_is_refused() -> None:
    listener: dict[str, Any] = {
        "name": "agents",
        "port": 7443,
        "surface": "agent",
        "auth": "jwt",
        "jwt": {
            "issuers": ["i"],
            "audience": "a",
            "keys": [{"kid": "k", "alg": "HS256", "secret": "x" * 40}],
        },
    }
    result = template(set_json=[f"listeners.tcp=[{json.dumps(listener)}]"])
    assert result.returncode != 0
    assert "secret" in result.stderr
    listener["jwt"]["keys"][0]["secret"] = "{{ env.JWT_SECRET }}"
    assert template(set_json=[f"listeners.tcp=[{json.dumps(listener)}]"]).returncode == 0


def test_duplicate_listener_ports_are_refused() -> None:
    result = template(sets=[*TCP, "listeners.tcp[0].port=8086"])
    assert result.returncode != 0
    assert "port 8086 is already used by listeners.probe" in result.stderr


def test_standalone_needs_a_tcp_listener() -> None:
    assert template(sets=["mode=standalone"]).returncode != 0


def test_workers_become_the_serve_flag_and_need_a_tcp_listener() -> None:
    standalone = [CHART / "ci" / "standalone.yaml"]
    one = gateway_container(pod_spec(render(standalone).one("Deployment")))
    # The default, auto, follows the container's CPU limit: none in the standalone values.
    assert "--workers=1" in one["args"]
    three = render(standalone, sets=["gateway.workers=3"])
    validate_manifests(three.docs)
    assert "--workers=3" in gateway_container(pod_spec(three.one("Deployment")))["args"]
    # A sidecar whose app speaks only over the unix socket gains nothing from more workers.
    refused = template(
        [CHART / "ci" / "sidecar.yaml"],
        sets=["gateway.workers=2"],
        set_json=["listeners.tcp=[]"],
    )
    assert refused.returncode != 0
    assert "needs a listeners.tcp entry" in refused.stderr
    assert template(standalone, sets=["gateway.workers=0"]).returncode != 0  # the schema
    assert template(standalone, sets=["gateway.workers=many"]).returncode != 0


def test_workers_auto_follows_the_containers_cpu_limit() -> None:
    standalone = [CHART / "ci" / "standalone.yaml"]
    for limit, workers in (("2", 2), ("1500m", 1), ("3.7", 3), ("250m", 1), ("4000m", 4)):
        docs = render(standalone, sets=[f"resources.limits.cpu={limit}"])
        validate_manifests(docs.docs)
        args = gateway_container(pod_spec(docs.one("Deployment")))["args"]
        assert f"--workers={workers}" in args, (limit, args)
    # A sidecar serving its app over the unix socket alone: one process, whatever the limit.
    sidecar = render(
        [CHART / "ci" / "sidecar.yaml"],
        sets=["resources.limits.cpu=4"],
        set_json=["listeners.tcp=[]"],
    )
    assert "--workers=1" in gateway_container(pod_spec(sidecar.one("Deployment")))["args"]
