"""Helpers for the upstream tests: compiling test protos, capabilities, a fake clock."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpc_tools import protoc

from gateway.errors import CapabilityError
from gateway.model import Capability, RetrySpec, SideEffect

DATA = Path(__file__).parent / "data"
ORDERS_PB = Path(__file__).parents[2] / "examples" / "orders" / "orders.pb"
I64_MAX, I64_MIN, U64_MAX = 2**63 - 1, -(2**63), 2**64 - 1

# One value of kitchen.v1.Sink using every field shape (see data/kitchen.proto).
FULL_SINK: dict[str, Any] = {
    "scalars": {
        "i32": -(2**31), "i64": I64_MIN, "u32": 2**32 - 1, "u64": U64_MAX, "s32": -7,
        "s64": I64_MAX, "f32": 7, "f64": 2**64 - 2, "sf32": -1, "sf64": -(2**53) - 1,
        "fl": 0.1, "db": 1e300, "flag": True, "text": "héllo ✓", "blob": "AAEC/w==",
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
    args = ["protoc", f"-I{DATA}", f"-I{include}", f"--descriptor_set_out={target}",
            "--include_imports", proto]
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
        id="orders.test", description="", upstream="orders", method="/orders.v1.Orders/GetOrder",
        input_schema=None, output_schema=None, side_effect=side_effect, idempotent=idempotent,
        retry=RetrySpec(max_attempts=max_attempts, initial_backoff_s=initial_backoff_s,
                        max_backoff_s=max_backoff_s, multiplier=multiplier),
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
        return {"clock": self.clock, "sleep": self.sleep, "on_retry": self.on_retry,
                "jitter": lambda: 1.0, **extra}
