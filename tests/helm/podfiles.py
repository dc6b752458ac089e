"""A rendered pod's files on local disk, so the gateway's own loader can read its config.

The config directory is laid out as kubelet mounts it (tests.helm.kubelet); the Secrets the
operator would create are stood in for by real key material of the right kind, placed where
the chart mounts them, with those absolute paths mapped under a temporary root.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import NameOID

from gateway.config.loader import load_settings
from gateway.config.settings import Settings
from gateway.inbox.config import load_inbox_settings
from gateway.inbox.settings import InboxSettings
from policy import PolicySet, load_policy_set
from tests.helm.chart import Manifest, Rendered, gateway_container, pod_spec, projected_files
from tests.helm.kubelet import ConfigMapVolume

# Where the chart mounts Secrets and emptyDirs; mapped under the test's directory.
MOUNT_PREFIXES = (
    "/etc/capgate-tls/",
    "/etc/capgate-secrets/",
    "/etc/capgate-actor-token/",
    "/run/capgate/",
)
_MOUNTED_PATH = re.compile(r"(?:/etc/capgate-(?:tls|secrets|actor-token)|/run/capgate)/[\w./-]+")


def _pem_key(key: ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _self_signed() -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "capgate.test")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def _jwks() -> bytes:
    public = ec.generate_private_key(ec.SECP256R1()).public_key().public_numbers()

    def b64(n: int) -> str:
        return base64.urlsafe_b64encode(n.to_bytes(32, "big")).rstrip(b"=").decode()

    key = {"kty": "EC", "crv": "P-256", "x": b64(public.x), "y": b64(public.y),
           "kid": "idp-1", "alg": "ES256", "use": "sig"}  # fmt: skip
    return json.dumps({"keys": [key]}).encode()


def stand_in(path: str) -> bytes:
    """Plausible contents for a mounted Secret file, chosen by its name."""
    cert, key = _self_signed()
    if path.endswith(".crt"):
        return cert
    if path.endswith("tls.key"):
        return key
    if path.endswith(".pem"):
        return _pem_key(ed25519.Ed25519PrivateKey.generate())
    if path.endswith(".json"):
        return _jwks()
    raise AssertionError(f"no stand-in for {path}")


def stand_in_env(pod: Manifest, container: Manifest | None = None) -> dict[str, str]:
    """A container's environment (default: the gateway's), Secret references replaced by
    stand-ins."""
    environ: dict[str, str] = {}
    for item in (container or gateway_container(pod))["env"]:
        ref = item.get("valueFrom", {}).get("secretKeyRef")
        if not ref:
            environ[item["name"]] = item["value"]
        elif item["name"] == "CAPGATE_REDIS_URL":
            environ[item["name"]] = "redis://:a-password@redis.data.svc:6379/0"
        else:  # 32 bytes or more, as the loader demands of secrets
            environ[item["name"]] = f"secret-{ref['name']}-{ref['key']}-0123456789abcdef"
    return environ


def load_rendered_config(
    rendered: Rendered, root: Path, extra: dict[str, Manifest] | None = None
) -> list[tuple[Settings, PolicySet | None]]:
    """Load each workload's config directory with the gateway's loader; compile its policies."""
    loaded: list[tuple[Settings, PolicySet | None]] = []
    for workload in rendered.workloads():
        pod = pod_spec(workload)
        base = root / workload["metadata"]["name"]
        files = projected_files(rendered, pod, extra=extra)
        for text in files.values():
            for path in _MOUNTED_PATH.findall(text):
                target = base / path.lstrip("/")
                if not target.exists() and not path.startswith("/run/"):
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(stand_in(path))
        for prefix in MOUNT_PREFIXES:
            files = {rel: text.replace(prefix, f"{base}{prefix}") for rel, text in files.items()}
        volume = ConfigMapVolume(base / "etc" / "capgate")
        volume.write(files)
        settings = load_settings(volume.root, environ=stand_in_env(pod))

        chart_config = yaml.safe_load(files["00-chart.yaml"])
        assert [listener.name for listener in settings.listeners] == [
            item["name"] for item in chart_config["listeners"]
        ]
        policy_files = [volume.root / rel for rel in files if rel.startswith("policies/")]
        assert bool(policy_files) == bool(settings.policy_paths)
        loaded.append((settings, load_policy_set(policy_files) if policy_files else None))
    return loaded


INBOX_SECRETS = "/etc/capgate-inbox-secrets/"
_INBOX_SECRET_PATH = re.compile(r"/etc/capgate-inbox-secrets/[\w./-]+")


def load_rendered_inbox_config(rendered: Rendered, root: Path) -> InboxSettings:
    """Load the inbox's config file, as its pod mounts it, with the inbox's own loader."""
    inbox = rendered.inbox()
    assert inbox is not None, "the values enable no inbox"
    pod = pod_spec(inbox)
    (container,) = pod["containers"]
    (config_flag,) = [a for a in container["args"] if a.startswith("--config=")]
    config_path = Path(config_flag.removeprefix("--config="))
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == str(config_path.parent))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    data = rendered.config_maps()[volume["configMap"]["name"]]["data"]
    text = data[config_path.name]
    for path in _INBOX_SECRET_PATH.findall(text):
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(stand_in(path))
    local = root / "etc" / "capgate-inbox" / config_path.name
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_text(text.replace(INBOX_SECRETS, f"{root}{INBOX_SECRETS}"))
    return load_inbox_settings(local, environ=stand_in_env(pod, container))
