"""The chart's approver inbox (inbox.enabled, standalone mode): a locked-down Deployment of the
same image running `capgate inbox`, with HTTP probes on paths the inbox serves, a ConfigMap
that holds only Secret references and loads in the inbox's own loader, a Service, and the
NetworkPolicy rule to the gateway's admin listener. Refused in sidecar mode."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helm.chart import (
    CHART,
    Manifest,
    Rendered,
    chart_config,
    pod_spec,
    render,
    template,
    validate_manifests,
)
from tests.helm.podfiles import load_rendered_inbox_config

pytestmark = pytest.mark.integration

VALUES = CHART / "ci" / "standalone-mcp-inbox.yaml"
ENV_REF = re.compile(r"\{\{ *env\.([A-Za-z_][A-Za-z0-9_]*) *\}\}")
SCHEMA_REFUSAL = "values don't meet the specifications of the schema"


@pytest.fixture(scope="module")
def rendered() -> Rendered:
    return render([VALUES])


def _inbox(rendered: Rendered) -> tuple[Manifest, Manifest, Manifest]:
    """The inbox Deployment, its pod spec and its one container."""
    deployment = rendered.inbox()
    assert deployment is not None
    pod = pod_spec(deployment)
    (container,) = pod["containers"]
    return deployment, pod, container


def _inbox_config(rendered: Rendered) -> dict[str, Any]:
    parsed: dict[str, Any] = yaml.safe_load(
        rendered.one("ConfigMap", "demo-capgate-inbox")["data"]["inbox.yaml"]
    )
    return parsed


def test_inbox_deployment_is_valid_non_root_and_read_only(rendered: Rendered) -> None:
    validate_manifests(rendered.docs)
    deployment, pod, container = _inbox(rendered)
    assert deployment["spec"]["replicas"] == 2
    assert container["image"] == "registry.example.com/capgate:0.1.0"
    assert container["command"] == ["capgate", "inbox"]
    assert "--config=/etc/capgate-inbox/inbox.yaml" in container["args"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    context = container["securityContext"]
    assert context["runAsNonRoot"] is True and context["runAsUser"] > 0
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"]["drop"] == ["ALL"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    writable = [m for m in container["volumeMounts"] if not m.get("readOnly")]
    assert [m["mountPath"] for m in writable] == ["/tmp"]
    assert "emptyDir" in volumes[writable[0]["name"]]
    assert not any({"subPath", "subPathExpr"} & set(m) for m in container["volumeMounts"])


def test_inbox_probes_ask_the_inbox_over_http(rendered: Rendered) -> None:
    _, _, container = _inbox(rendered)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    listen = _inbox_config(rendered)["listen"]
    assert listen == f"0.0.0.0:{ports['http']}"
    readiness = container["readinessProbe"]["httpGet"]
    liveness = container["livenessProbe"]["httpGet"]
    assert readiness == {"path": "/healthz", "port": "http"}  # ready once approvals are listed
    # Liveness needs no gateway: an unreachable admin listener must not restart the inbox.
    assert liveness == {"path": "/login", "port": "http"}


def test_inbox_config_map_holds_only_secret_references(rendered: Rendered) -> None:
    config = _inbox_config(rendered)
    secrets = [
        config["admin"]["token"]["secret"],
        config["session"]["secret"],
        config["redis"]["url"],
    ]
    assert all(ENV_REF.fullmatch(value) for value in secrets)
    _, _, container = _inbox(rendered)
    env = {e["name"]: e for e in container["env"]}
    used = set(
        ENV_REF.findall(rendered.one("ConfigMap", "demo-capgate-inbox")["data"]["inbox.yaml"])
    )
    assert used == {"CAPGATE_INBOX_TOKEN_KEY", "CAPGATE_INBOX_SESSION_SECRET", "CAPGATE_REDIS_URL"}
    for name in used:
        assert "secretKeyRef" in env[name]["valueFrom"], name
    assert not rendered.of_kind("Secret")


def test_inbox_files_it_names_are_mounted_secrets(rendered: Rendered) -> None:
    _, pod, container = _inbox(rendered)
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}
    jwks = _inbox_config(rendered)["approvers"]["jwt"]["jwks_file"]
    assert mounts[str(Path(jwks).parent)]["secret"]["secretName"] == "capgate-idp-jwks"


def test_rendered_inbox_config_loads_in_the_inbox_loader(
    rendered: Rendered, tmp_path: Path
) -> None:
    settings = load_rendered_inbox_config(rendered, tmp_path)
    assert settings.listen == "0.0.0.0:8080"
    assert settings.admin.address == "demo-capgate.default.svc:7444"
    assert settings.admin.token is not None and settings.admin.token.audience == "capgate-admin"
    assert settings.jwt is not None and settings.jwt.audience == "capgate-inbox"
    assert len(settings.session_secret) >= 32
    assert settings.base_url == "https://inbox.example.com"


def test_inbox_reaches_the_admin_listener_through_the_gateway_service(rendered: Rendered) -> None:
    host, _, port = _inbox_config(rendered)["admin"]["address"].partition(":")
    service = rendered.one("Service", "demo-capgate")
    assert host == "demo-capgate.default.svc"
    admin = next(item for item in chart_config(rendered)["listeners"] if item["name"] == "admin")
    assert admin["role"] == "admin"
    assert admin["address"].endswith(f":{port}")
    assert int(port) in {p["port"] for p in service["spec"]["ports"]}
    # The inbox's own identity is allow-listed to decide on behalf of humans.
    token = _inbox_config(rendered)["admin"]["token"]
    assert {"issuer": token["issuer"], "id": token["subject"]} in admin["on_behalf_of"]

    policy = rendered.one("NetworkPolicy", "demo-capgate")
    pod_labels = _inbox(rendered)[0]["spec"]["template"]["metadata"]["labels"]
    inbox_rules = [
        rule
        for rule in policy["spec"]["ingress"]
        if any("podSelector" in peer for peer in rule.get("from", []))
    ]
    (rule,) = inbox_rules
    assert rule["ports"] == [{"port": int(port), "protocol": "TCP"}]
    selector = rule["from"][0]["podSelector"]["matchLabels"]
    assert selector.items() <= pod_labels.items()


def test_inbox_pods_are_not_gateway_pods(rendered: Rendered) -> None:
    deployment, _, _ = _inbox(rendered)
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    for kind in ("Service", "PodDisruptionBudget", "NetworkPolicy"):
        gateway = rendered.one(kind, "demo-capgate")
        spec = gateway["spec"]
        selector = spec.get("selector") or spec["podSelector"]
        selector = selector.get("matchLabels", selector)
        assert not selector.items() <= labels.items(), f"the gateway's {kind} selects the inbox"
    service = rendered.one("Service", "demo-capgate-inbox")
    assert service["spec"]["selector"].items() <= labels.items()
    assert service["spec"]["ports"] == [
        {
            "name": "http",
            "port": 8080,
            "targetPort": "http",
            "protocol": "TCP",
            "appProtocol": "http",
        }
    ]


def test_inbox_replicas_share_the_gateways_redis_for_sessions(
    rendered: Rendered, tmp_path: Path
) -> None:
    # Sign-in sessions live in Redis: every inbox replica must use the same one, or a session
    # started on one replica is unknown to the next request's replica.
    deployment, _, container = _inbox(rendered)
    assert deployment["spec"]["replicas"] == 2
    config = _inbox_config(rendered)
    assert config["redis"] == {"url": "{{ env.CAPGATE_REDIS_URL }}", "key_prefix": "capgate"}
    inbox_env = {e["name"]: e for e in container["env"]}
    gateway = rendered.one("Deployment", "demo-capgate")
    gateway_env = {e["name"]: e for e in pod_spec(gateway)["containers"][0]["env"]}
    assert inbox_env["CAPGATE_REDIS_URL"] == gateway_env["CAPGATE_REDIS_URL"]
    assert inbox_env["CAPGATE_REDIS_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "capgate-redis",
        "key": "url",
    }
    settings = load_rendered_inbox_config(rendered, tmp_path)
    assert settings.redis.url == "redis://:a-password@redis.data.svc:6379/0"
    assert settings.redis.key_prefix == "capgate"


def test_several_inbox_replicas_need_redis_url_one_may_embed_its_own(tmp_path: Path) -> None:
    values = tmp_path / "no-redis.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "redis": {"url": None},
                "config": {"approvals": {"enabled": False}, "idempotency": {"enabled": False}},
            }
        )
    )
    result = template([VALUES, values])
    assert result.returncode != 0
    assert SCHEMA_REFUSAL in result.stderr
    assert "/redis" in result.stderr, result.stderr

    single = render([VALUES, values], sets=["inbox.replicaCount=1"])
    deployment = single.inbox()
    assert deployment is not None and deployment["spec"]["replicas"] == 1
    parsed = yaml.safe_load(single.one("ConfigMap", "demo-capgate-inbox")["data"]["inbox.yaml"])
    assert "redis" not in parsed  # one process: its private embedded redis-server
    (container,) = pod_spec(deployment)["containers"]
    assert "CAPGATE_REDIS_URL" not in {e["name"] for e in container["env"]}


def test_inbox_config_changes_roll_the_inbox_pods() -> None:
    def checksum(*sets: str) -> str:
        deployment = render([VALUES], sets=sets).inbox()
        assert deployment is not None
        annotations = deployment["spec"]["template"]["metadata"]["annotations"]
        return str(annotations["capgate.dev/inbox-checksum"])

    # The inbox reads its config once at start: no hot reload, so a change must restart it.
    assert checksum("inbox.config.history_limit=50") != checksum()


def test_inbox_is_off_by_default_and_refused_in_sidecar_mode() -> None:
    assert render([CHART / "ci" / "standalone.yaml"]).inbox() is None
    result = template([CHART / "ci" / "sidecar.yaml"], sets=["inbox.enabled=true"])
    assert result.returncode != 0
    assert SCHEMA_REFUSAL in result.stderr
    assert "at '/mode': value must be 'standalone'" in result.stderr, result.stderr


def test_inbox_needs_an_admin_listener(tmp_path: Path) -> None:
    (admin,) = yaml.safe_load(VALUES.read_text())["listeners"]["tcp"]
    caller = {k: v for k, v in admin.items() if k not in {"role", "on_behalf_of"}}
    values = tmp_path / "no-admin.yaml"
    values.write_text(yaml.safe_dump({"listeners": {"tcp": [caller]}}))
    result = template([VALUES, values])
    assert result.returncode != 0
    assert SCHEMA_REFUSAL in result.stderr
    assert "/listeners/tcp" in result.stderr, result.stderr
    result = template([VALUES], sets=["inbox.adminListener=agents"])
    assert result.returncode != 0
    assert "inbox.adminListener agents: no listeners.tcp entry" in result.stderr


REFUSED: dict[str, list[str]] = {
    "literal session secret": ["inbox.config.session.secret=" + "s" * 40],
    "literal service token key": ["inbox.config.admin.token.secret=" + "k" * 40],
    "admin address in values": ["inbox.config.admin.address=elsewhere:7444"],
    "listen in values": ["inbox.config.listen=0.0.0.0:9000"],
    "redis in values": ["inbox.config.redis.url=redis://elsewhere:6379/0"],
}


@pytest.mark.parametrize("sets", list(REFUSED.values()), ids=list(REFUSED))
def test_schema_refuses_inbox_secrets_and_chart_owned_keys(sets: list[str]) -> None:
    result = template([VALUES], sets=sets)
    assert result.returncode != 0
    assert SCHEMA_REFUSAL in result.stderr, result.stderr


def test_literal_approver_jwt_secret_is_refused(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    keys = [{"kid": "k", "alg": "HS256", "secret": "x" * 40}]
    values.write_text(yaml.safe_dump({"inbox": {"config": {"approvers": {"jwt": {"keys": keys}}}}}))
    result = template([VALUES, values])
    assert result.returncode != 0
    assert "secret" in result.stderr


def test_an_inbox_without_tls_or_a_plaintext_allowance_does_not_render(tmp_path: Path) -> None:
    # The inbox reaches the admin listener through the gateway's Service, another pod, and its
    # token decides on behalf of approvers: the chart refuses what the inbox would refuse at
    # start (ADR 0033), so a release fails at install instead of crash-looping.
    data = yaml.safe_load(VALUES.read_text())
    del data["inbox"]["config"]["admin"]["allow_plaintext"]
    values = tmp_path / "plaintext.yaml"
    values.write_text(yaml.safe_dump(data))
    result = template([values])
    assert result.returncode != 0
    assert "inbox.config.admin needs tls" in result.stderr, result.stderr
    secured = render([values], sets=["inbox.config.admin.tls.server_name=capgate-admin"])
    assert secured.inbox() is not None
