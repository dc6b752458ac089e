"""What the chart writes is a config the gateway accepts: every CI values file, rendered,
projected into a directory the way kubelet mounts it, loads with the gateway's own loader and
its policies compile. A chart that renders valid Kubernetes YAML but a config the gateway
refuses would crash-loop every pod."""

from __future__ import annotations

import base64
import datetime as dt
import json
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import NameOID

from gateway.config.loader import load_settings
from policy import load_policy_set
from tests.helm.chart import CI_VALUES, gateway_container, pod_spec, projected_files, render
from tests.helm.kubelet import ConfigMapVolume

pytestmark = pytest.mark.integration

# The absolute paths the chart mounts Secrets and emptyDirs at; the test maps them under tmp.
MOUNT_PREFIXES = ("/etc/capgate-tls/", "/etc/capgate-secrets/", "/etc/capgate-actor-token/",
                  "/run/capgate/")
# ConfigMaps a values file references but leaves to the operator (extraConfigMaps).
OPERATOR_CONFIG_MAPS = {
    "shop-policies": {
        "kind": "ConfigMap",
        "metadata": {"name": "shop-policies"},
        "data": {
            "refunds.yaml": yaml.safe_dump({"policies": [{
                "name": "refund-limit",
                "match": {"capabilities": ["orders.*"]},
                "rules": [{"when": "has(input.amount) && input.amount > 1000", "effect": "deny",
                           "message": "Refunds over 1000 go through finance."}],
            }]}),
        },
    },
}


def _pem_key(key: ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _self_signed(name: str) -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def _jwks() -> str:
    public = ec.generate_private_key(ec.SECP256R1()).public_key().public_numbers()

    def b64(n: int) -> str:
        return base64.urlsafe_b64encode(n.to_bytes(32, "big")).rstrip(b"=").decode()

    key = {"kty": "EC", "crv": "P-256", "x": b64(public.x), "y": b64(public.y), "kid": "idp-1",
           "alg": "ES256", "use": "sig"}
    return json.dumps({"keys": [key]})


def _secret_files(root: Path) -> None:
    """The files the standalone values mount from Secrets, with real key material."""
    for listener in ("agents", "approvers"):
        cert, key = _self_signed(listener)
        d = root / "etc/capgate-tls" / listener
        d.mkdir(parents=True)
        (d / "tls.crt").write_bytes(cert)
        (d / "tls.key").write_bytes(key)
        (d / "ca.crt").write_bytes(cert)
    idp = root / "etc/capgate-secrets/idp"
    idp.mkdir(parents=True)
    (idp / "jwks.json").write_text(_jwks())
    orders = root / "etc/capgate-secrets/orders-tls"
    orders.mkdir(parents=True)
    cert, key = _self_signed("orders")
    for name, data in (("ca.crt", cert), ("tls.crt", cert), ("tls.key", key)):
        (orders / name).write_bytes(data)
    actor = root / "etc/capgate-actor-token"
    actor.mkdir(parents=True)
    (actor / "key.pem").write_bytes(_pem_key(ed25519.Ed25519PrivateKey.generate()))


@pytest.mark.parametrize("values", CI_VALUES, ids=[p.stem for p in CI_VALUES])
def test_rendered_config_loads_in_the_gateway_and_its_policies_compile(
    values: Path, tmp_path: Path
) -> None:
    rendered = render([values])
    _secret_files(tmp_path)
    for workload in rendered.workloads():
        pod = pod_spec(workload)
        files = projected_files(rendered, pod, extra=OPERATOR_CONFIG_MAPS)
        for prefix in MOUNT_PREFIXES:
            files = {rel: text.replace(prefix, f"{tmp_path}{prefix}") for rel, text in files.items()}
        volume = ConfigMapVolume(tmp_path / "etc" / "capgate" / workload["metadata"]["name"])
        volume.write(files)

        environ = {}
        for item in gateway_container(pod)["env"]:
            ref = item.get("valueFrom", {}).get("secretKeyRef")
            if not ref:
                environ[item["name"]] = item["value"]
            elif item["name"] == "CAPGATE_REDIS_URL":
                environ[item["name"]] = "redis://:a-password@redis.data.svc:6379/0"
            else:  # stand-ins for the Secrets the operator creates: 32+ bytes, as required
                environ[item["name"]] = f"secret-{ref['name']}-{ref['key']}-0123456789abcdef"
        settings = load_settings(volume.root, environ=environ)

        config = yaml.safe_load(files["00-chart.yaml"])
        assert [listener.name for listener in settings.listeners] == [
            item["name"] for item in config["listeners"]]
        policy_files = [volume.root / rel for rel in files if rel.startswith("policies/")]
        assert bool(policy_files) == bool(settings.policy_paths)
        if policy_files:
            policies = load_policy_set(policy_files)
            assert policies.policy_names
