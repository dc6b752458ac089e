"""Fixtures for config tests: a descriptor set of our own and a small valid config to vary."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from google.protobuf import descriptor_pb2

SECRET = "s3cr3t-value-that-is-long-enough-0123456789"
ENV = {"JWT_SECRET": SECRET}


def _descriptor_set() -> bytes:
    """t.v1.Things with one unary and one server-streaming method."""
    file = descriptor_pb2.FileDescriptorProto(name="t/v1/things.proto", package="t.v1")
    file.message_type.add(name="Req")
    file.message_type.add(name="Res")
    service = file.service.add(name="Things")
    service.method.add(name="Get", input_type=".t.v1.Req", output_type=".t.v1.Res")
    service.method.add(
        name="Watch", input_type=".t.v1.Req", output_type=".t.v1.Res", server_streaming=True
    )
    return descriptor_pb2.FileDescriptorSet(file=[file]).SerializeToString()


BASE: dict[str, Any] = {
    "version": 1,
    "listeners": [
        {
            "name": "agents",
            "address": "127.0.0.1:7443",
            "surface": "agent",
            "auth": "jwt",
            "jwt": {
                "issuers": ["idp"],
                "audience": "capgate",
                "keys": [{"kid": "k1", "alg": "HS256", "secret": "{{ env.JWT_SECRET }}"}],
            },
        }
    ],
    "upstreams": {
        "things": {"address": "127.0.0.1:50051", "descriptor_set": "things.pb"},
        "proc": {"address": "127.0.0.1:50052", "kind": "procedure"},
    },
    "capabilities": [
        {
            "id": "things.get",
            "description": "Read one thing.",
            "upstream": "things",
            "method": "/t.v1.Things/Get",
            "side_effect": "read",
            "risk": "low",
            "expose": {"agent": True},
        },
        {
            "id": "things.make",
            "description": "Make a thing.",
            "upstream": "proc",
            "side_effect": "write",
            "risk": "medium",
            "input_schema": {"type": "object", "properties": {"name": {"type": "string"}}},
        },
    ],
}

Write = Callable[..., Path]


@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    (tmp_path / "things.pb").write_bytes(_descriptor_set())
    return tmp_path


@pytest.fixture
def base() -> dict[str, Any]:
    """A fresh deep copy of a small valid config, to modify per test."""
    return copy.deepcopy(BASE)


@pytest.fixture
def write(config_dir: Path) -> Write:
    """write(data_or_text, name="gateway.yaml") -> path of the written config file."""

    def _write(content: dict[str, Any] | str, name: str = "gateway.yaml") -> Path:
        path = config_dir / name
        text = content if isinstance(content, str) else yaml.safe_dump(content, sort_keys=False)
        path.write_text(text)
        return path

    return _write


@pytest.fixture
def env() -> dict[str, str]:
    """The environment the base config needs (its JWT secret comes from JWT_SECRET)."""
    return dict(ENV)
