"""The chart's MCP listener (listeners.mcp): it renders into the gateway config as an MCP
Streamable HTTP listener the gateway's loader accepts, its port is on the container, the
Service and in the NetworkPolicy, the kubelet probes stay on the gRPC probe port, and the values
schema refuses what the gateway would refuse at start (or what would leak a secret)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helm.chart import (
    CHART,
    Rendered,
    chart_config,
    gateway_container,
    pod_spec,
    render,
    template,
    validate_manifests,
)
from tests.helm.podfiles import load_rendered_config

pytestmark = pytest.mark.integration

VALUES = CHART / "ci" / "standalone-mcp-inbox.yaml"
SIDECAR = CHART / "ci" / "sidecar.yaml"
SCHEMA_REFUSAL = "values don't meet the specifications of the schema"


def _mcp(**overrides: Any) -> str:
    """A --set-json for an enabled MCP listener on top of the sidecar CI values."""
    listener: dict[str, Any] = {
        "enabled": True,
        "port": 7445,
        "allowedHosts": ["orders.shop.svc:7445"],
        "jwt": {
            "issuers": ["https://idp.example.com"],
            "audience": "capgate-mcp",
            "keys": [{"kid": "k1", "alg": "HS256", "secret": "{{ env.CAPGATE_JWT_SECRET }}"}],
        },
        **overrides,
    }
    return f"listeners.mcp={json.dumps(listener)}"


def _mcp_listener(rendered: Rendered) -> dict[str, Any]:
    listeners: list[dict[str, Any]] = chart_config(rendered)["listeners"]
    (listener,) = [item for item in listeners if item["name"] == "mcp"]
    return listener


def test_mcp_listener_renders_as_a_jwt_mcp_listener_the_gateway_loads(tmp_path: Path) -> None:
    rendered = render([VALUES])
    listener = _mcp_listener(rendered)
    assert listener["address"] == "0.0.0.0:7445"
    assert (listener["protocol"], listener["auth"], listener["surface"]) == ("mcp", "jwt", "mcp")
    assert "role" not in listener  # the caller role: MCP listeners never serve ApprovalAdmin
    assert listener["mcp"]["resource_url"] == "https://mcp.example.com/mcp"
    assert listener["mcp"]["allowed_hosts"] == ["demo-capgate.default.svc:7445"]
    assert listener["mcp"]["allowed_origins"] == ["https://chat.example.com"]
    assert listener["mcp"]["tool_names"] == {"orders.get": "get_order"}
    # Tokens must be issued for this resource: without jwt.audience it is the resource URL.
    assert listener["jwt"]["audience"] == "https://mcp.example.com/mcp"
    assert listener["tls"] == {
        "cert_file": "/etc/capgate-tls/mcp/tls.crt",
        "key_file": "/etc/capgate-tls/mcp/tls.key",
    }

    (settings, _policies), *others = load_rendered_config(rendered, tmp_path)
    assert not others
    loaded = next(item for item in settings.listeners if item.name == "mcp")
    assert loaded.protocol == "mcp"
    assert loaded.mcp is not None
    assert loaded.mcp.session_idle_timeout_s == 1800
    assert loaded.jwt is not None
    assert loaded.jwt.audience == "https://mcp.example.com/mcp"
    assert loaded.tls is not None and loaded.tls.client_ca_file is None


def test_mcp_port_is_on_the_container_service_and_network_policy() -> None:
    rendered = render([VALUES])
    validate_manifests(rendered.docs)
    (workload,) = rendered.workloads()
    gateway = gateway_container(pod_spec(workload))
    assert {"name": "mcp", "containerPort": 7445, "protocol": "TCP"} in gateway["ports"]
    mounts = {m["mountPath"]: m for m in gateway["volumeMounts"]}
    assert mounts["/etc/capgate-tls/mcp"]["readOnly"] is True

    service = rendered.one("Service", "demo-capgate")
    port = next(p for p in service["spec"]["ports"] if p["name"] == "mcp")
    assert (port["port"], port["targetPort"], port["appProtocol"]) == (7445, "mcp", "http")
    # Sessions live in Redis: any replica serves any session, so the Service has no affinity.
    assert "sessionAffinity" not in service["spec"]

    policy = rendered.one("NetworkPolicy", "demo-capgate")
    agents = policy["spec"]["ingress"][0]
    assert {"port": 7445, "protocol": "TCP"} in agents["ports"]
    assert agents["from"] == [
        {"namespaceSelector": {"matchLabels": {"capgate.dev/agents": "true"}}}
    ]


def test_probes_stay_on_the_grpc_probe_listener_when_mcp_is_on() -> None:
    rendered = render([VALUES])
    gateway = gateway_container(pod_spec(rendered.one("Deployment", "demo-capgate")))
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert set(gateway[probe]) - {"periodSeconds", "timeoutSeconds", "failureThreshold"} == {
            "grpc"
        }
        assert gateway[probe]["grpc"]["port"] == 8086


def test_sidecar_mode_serves_mcp_on_the_pod_without_a_service(tmp_path: Path) -> None:
    rendered = render([SIDECAR], set_json=[_mcp()])
    validate_manifests(rendered.docs)
    assert not rendered.of_kind("Service")
    gateway = gateway_container(pod_spec(rendered.one("Deployment")))
    assert {"name": "mcp", "containerPort": 7445, "protocol": "TCP"} in gateway["ports"]
    listener = _mcp_listener(rendered)
    assert listener["jwt"]["audience"] == "capgate-mcp"  # an explicit audience wins
    assert "tls" not in listener
    assert "resource_url" not in listener["mcp"]  # unset keys keep the gateway's defaults
    (settings, _), *_ = load_rendered_config(rendered, tmp_path)
    assert [item.protocol for item in settings.listeners] == ["grpc", "grpc", "grpc", "mcp"]


def test_mcp_listener_is_off_by_default() -> None:
    rendered = render([SIDECAR])
    assert all(item.get("protocol") != "mcp" for item in chart_config(rendered)["listeners"])
    gateway = gateway_container(pod_spec(rendered.one("Deployment")))
    assert "mcp" not in {p["name"] for p in gateway["ports"]}


REFUSED: dict[str, dict[str, Any]] = {
    "no host allow-list beyond loopback": {"allowedHosts": []},
    "no audience and no resource url": {
        "jwt": {"issuers": ["https://idp.example.com"], "jwks_file": "/etc/jwks.json"}
    },
    "no jwt block": {"jwt": None},
    "literal jwt secret": {
        "jwt": {"issuers": ["i"], "audience": "a", "keys": [{"kid": "k", "secret": "x" * 40}]}
    },
    "client certificates": {"tls": {"secretName": "mcp-tls", "clientCA": True}},
    "another auth mode": {"auth": "none"},
    "reserved name": {"name": "probe"},
    "probe surface": {"surface": "probe"},
}


@pytest.mark.parametrize("overrides", list(REFUSED.values()), ids=list(REFUSED))
def test_schema_refuses_mcp_listeners_the_gateway_would_refuse(overrides: dict[str, Any]) -> None:
    values = json.loads(_mcp().partition("=")[2])
    values.update(overrides)
    values = {k: v for k, v in values.items() if v is not None}
    result = template([SIDECAR], set_json=[f"listeners.mcp={json.dumps(values)}"])
    assert result.returncode != 0
    assert SCHEMA_REFUSAL in result.stderr, result.stderr
    assert template([SIDECAR], set_json=[_mcp()]).returncode == 0, "the baseline must pass"


def test_client_ip_affinity_is_gone_and_a_values_file_asking_for_it_is_told() -> None:
    # MCP sessions live in Redis (any replica serves any session): the chart has no
    # service.sessionAffinity any more, and the schema names a stale key rather than ignore it.
    result = template([VALUES], set_json=['service={"sessionAffinity": "ClientIP"}'])
    assert result.returncode != 0
    assert SCHEMA_REFUSAL in result.stderr, result.stderr
    assert "sessionAffinity" in result.stderr
    assert template([VALUES]).returncode == 0, "the baseline must pass"


def test_mcp_on_a_grpc_tcp_listener_is_refused() -> None:
    # listeners.tcp entries are gRPC: their Service port says grpc and they carry no mcp block.
    listener = {"name": "models", "port": 7446, "surface": "mcp", "auth": "jwt", "protocol": "mcp"}
    result = template([SIDECAR], set_json=[f"listeners.tcp=[{json.dumps(listener)}]"])
    assert result.returncode != 0
    assert SCHEMA_REFUSAL in result.stderr
    listener["protocol"] = "grpc"
    assert template([SIDECAR], set_json=[f"listeners.tcp=[{json.dumps(listener)}]"]).returncode == 0


def test_mcp_port_or_name_taken_by_another_listener_is_refused() -> None:
    result = template([SIDECAR], set_json=[_mcp(port=7444)])
    assert result.returncode != 0
    assert "port 7444 is already used by admin" in result.stderr
    result = template([SIDECAR], set_json=[_mcp(name="admin")])
    assert result.returncode != 0
    assert "the name admin is used twice" in result.stderr
