"""Helpers for the capgate_client tests: the golden vectors, the shared stack, the upstream log."""

from __future__ import annotations

import base64
import datetime
import json
import os
from pathlib import Path
from typing import Any

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.x509.oid import NameOID

from examples.orders import orders_pb2, orders_pb2_grpc

ROOT = Path(__file__).resolve().parents[2]
VECTORS = json.loads((ROOT / "tests/vectors/actor_token/vectors.json").read_text())
STACK_PATH = Path(os.environ.get("CAPGATE_STACK") or ROOT / ".run" / "stack.json")
NO_STACK = (
    f"no shared stack at {STACK_PATH}: run `python scripts/stack.py start` "
    "(`make test` does)"
)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def mint(claims: dict[str, Any], *, alg: str = "EdDSA") -> str:
    """An actor token signed with the golden vectors' test key of `alg`."""
    jwk = next(k for k in VECTORS["jwks"]["keys"] if k["alg"] == alg)
    key = serialization.load_pem_private_key(
        VECTORS["private_keys_pem"][jwk["kid"]].encode(), password=None
    )
    header = {"alg": alg, "kid": jwk["kid"], "typ": "capgate-actor+jwt"}
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    if isinstance(key, ed25519.Ed25519PrivateKey):
        signature = key.sign(signing_input.encode())
    else:
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    return f"{signing_input}.{_b64(signature)}"


async def upstream_log(address: str) -> list[orders_pb2.CallRecord]:
    """What the example upstream saw (orders.v1.Control/GetStats)."""
    async with grpc.aio.insecure_channel(address) as channel:
        stats = await orders_pb2_grpc.ControlStub(channel).GetStats(orders_pb2.GetStatsRequest())
    return list(stats.log)


def make_tls() -> tuple[bytes, bytes, bytes]:
    """(CA PEM, server certificate PEM, server key PEM) for the name "capgate.test"."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "capgate test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "capgate.test")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("capgate.test")]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return ca.public_bytes(pem), leaf.public_bytes(pem), key_pem
