"""The declared protobuf lower bound is the true one: every generated ``*_pb2.py`` a package ships
checks at import that the runtime is at least the protoc that generated it
(``ValidateProtobufRuntimeVersion``), so a ``protobuf>=X`` below that version installs a runtime
the package cannot import. The gateway's pyproject.toml and the Python client's must declare at
least the newest version their stubs check, and no lower."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]

_CHECK = re.compile(
    r"ValidateProtobufRuntimeVersion\(\s*_runtime_version\.Domain\.PUBLIC,\s*"
    r"(\d+),\s*(\d+),\s*(\d+),"
)


def _stub_floor(directory: Path) -> tuple[Version, list[Path]]:
    stubs = sorted(directory.rglob("*_pb2.py"))
    versions = []
    for stub in stubs:
        found = _CHECK.search(stub.read_text(encoding="utf-8"))
        assert found, f"{stub}: no runtime version check found (generator output changed?)"
        versions.append(Version(".".join(found.groups())))
    assert versions, f"no generated stubs under {directory}"
    return max(versions), stubs


def _declared_floor(pyproject: Path) -> Version:
    deps = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]
    (req,) = [Requirement(d) for d in deps if Requirement(d).name == "protobuf"]
    floors = [Version(s.version) for s in req.specifier if s.operator == ">="]
    assert len(floors) == 1, f"{pyproject}: protobuf needs exactly one >= bound, got {req}"
    return floors[0]


def test_gateway_declares_the_protobuf_its_stubs_require() -> None:
    floor, _ = _stub_floor(ROOT / "capgate")
    assert _declared_floor(ROOT / "pyproject.toml") == floor


def test_python_client_declares_the_protobuf_its_stubs_require() -> None:
    client = ROOT / "clients" / "python"
    floor, _ = _stub_floor(client / "capgate_client" / "_gen")
    assert _declared_floor(client / "pyproject.toml") == floor


def test_both_packages_generate_with_the_same_protoc() -> None:
    gateway, _ = _stub_floor(ROOT / "capgate")
    client, _ = _stub_floor(ROOT / "clients" / "python" / "capgate_client" / "_gen")
    assert gateway == client
