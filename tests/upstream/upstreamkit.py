"""Helpers for the upstream tests: compiling test protos, capabilities, a fake clock."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from grpc_tools import protoc

from examples.orders.server import State
from gateway.errors import CapabilityError
from gateway.model import Capability, RetrySpec, SideEffect
from gateway.upstream.channels import ChannelPool
from gateway.upstream.spec import Upstream

DATA = Path(__file__).parent / "data"
ORDERS_PB = Path(__file__).parents[2] / "examples" / "orders" / "orders.pb"
I64_MAX, I64_MIN, U64_MAX = 2**63 - 1, -(2**63), 2**64 - 1

# One value of kitchen.v1.Sink using every field shape (see data/kitchen.proto).
FULL_SINK: dict[str, Any] = {
    "scalars": {
        "i32": -(2**31),
        "i64": I64_MIN,
        "u32": 2**32 - 1,
        "u64": U64_MAX,
        "s32": -7,
        "s64": I64_MAX,
        "f32": 7,
        "f64": 2**64 - 2,
        "sf32": -1,
        "sf64": -(2**53) - 1,
        "fl": 0.1,
        "db": 1e300,
        "flag": True,
        "text": "héllo ✓",
        "blob": "AAEC/w==",
        "color": "COLOR_GREEN",
    },
    "inner": {"name": "a", "values": [2**53 + 1, -1]},
    "inners": [{"name": "x", "values": []}, {"name": "y", "values": [1]}],
    "colors": ["COLOR_RED", "COLOR_UNSPECIFIED"],
    "by_name": {"k": {"name": "v", "values": [3]}},
    "by_id": {"-9223372036854775808": "min", "42": "answer"},
    "by_flag": {"true": 1, "false": 0},
    "by_code": {"7": "COLOR_RED"},
    "maybe": "",
    "as_number": 2**60,
    "at": "2024-05-01T12:00:00.250Z",
    "ttl": "1.500s",
    "attrs": {"n": 250, "x": 1.5, "s": "t", "b": False, "z": None, "l": [1, "a"], "o": {"k": 2}},
    "anything": [1, {"a": None}],
    "list": [True, 3],
    "big": I64_MAX,
    "label": "wrapped",
    "enabled": False,
    "mask": "scalars.i32,inner.name",
    "nothing": {},
    "blobs": ["", "/w=="],
}


def compile_descriptor_set(proto: str, out: Path) -> Path:
    """protoc --descriptor_set_out --include_imports, as an operator would run it."""
    include = Path(protoc.__file__).parent / "_proto"
    target = out / (Path(proto).stem + ".pb")
    args = [
        "protoc",
        f"-I{DATA}",
        f"-I{include}",
        f"--descriptor_set_out={target}",
        "--include_imports",
        proto,
    ]
    assert protoc.main(args) == 0, "protoc failed"
    return target


def capability(
    *,
    side_effect: SideEffect = "read",
    idempotent: bool = False,
    max_attempts: int = 0,
    initial_backoff_s: float = 0.1,
    max_backoff_s: float = 1.0,
    multiplier: float = 2.0,
) -> Capability:
    return Capability(
        id="orders.test",
        description="",
        upstream="orders",
        method="/orders.v1.Orders/GetOrder",
        input_schema=None,
        output_schema=None,
        side_effect=side_effect,
        idempotent=idempotent,
        retry=RetrySpec(
            max_attempts=max_attempts,
            initial_backoff_s=initial_backoff_s,
            max_backoff_s=max_backoff_s,
            multiplier=multiplier,
        ),
    )


@dataclass
class FakeTime:
    """An injected monotonic clock; `sleep` advances it instead of waiting (STYLE 5)."""

    now: float = 1000.0
    slept: list[float] = field(default_factory=list)
    retries: list[tuple[int, CapabilityError]] = field(default_factory=list)

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    async def on_retry(self, attempt: int, error: CapabilityError) -> None:
        self.retries.append((attempt, error))

    def kwargs(self, **extra: Any) -> dict[str, Any]:
        return {
            "clock": self.clock,
            "sleep": self.sleep,
            "on_retry": self.on_retry,
            "jitter": lambda: 1.0,
            **extra,
        }


@dataclass
class Pki:
    """A throwaway CA with one server and one client certificate (PEM files)."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_pki(out: Path, server_name: str) -> Pki:
    now = datetime.datetime.now(datetime.UTC)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def cert(
        subject: str, key: Any, issuer: str, issuer_key: Any, *, ca: bool, san: str | None = None
    ) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(subject))
            .issuer_name(name(issuer))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if san:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName(san)]), critical=False
            )
        return builder.sign(issuer_key, hashes.SHA256())

    def write(path: Path, data: bytes) -> Path:
        path.write_bytes(data)
        return path

    def pem_key(key: Any) -> bytes:
        return key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    ca_key, server_key, client_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    ca = cert("test-ca", ca_key, "test-ca", ca_key, ca=True)
    server = cert(server_name, server_key, "test-ca", ca_key, ca=False, san=server_name)
    client = cert("capgate", client_key, "test-ca", ca_key, ca=False, san="capgate")
    pem = serialization.Encoding.PEM
    return Pki(
        ca=write(out / "ca.pem", ca.public_bytes(pem)),
        server_cert=write(out / "server.pem", server.public_bytes(pem)),
        server_key=write(out / "server.key", pem_key(server_key)),
        client_cert=write(out / "client.pem", client.public_bytes(pem)),
        client_key=write(out / "client.key", pem_key(client_key)),
    )


@dataclass
class Orders:
    """The running example upstream and a pooled channel to it."""

    state: State
    port: int
    pool: ChannelPool

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def upstream(self, kind: str = "grpc", **overrides: object) -> Upstream:
        return Upstream(name=f"orders-{kind}", address=self.address, kind=kind, **overrides)  # type: ignore[arg-type]

    def channel(self, kind: str = "grpc") -> grpc.aio.Channel:
        return self.pool.channel(self.upstream(kind))
