"""Issue 14 item 12: each listener's server reflection shows exactly its own services, and
method lookups work (`grpcurl describe capgate.v1.CapabilityGateway.Invoke`). Through the real
gateway's listeners, with grpc_reflection's own client and with grpcurl."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest
from google.protobuf import descriptor_pool
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from capgate.v1 import admin_pb2, gateway_pb2, procedure_pb2
from gateway.transport.reflection import ListenerReflection
from tests.gateway.harness import Env

pytestmark = [pytest.mark.integration]
ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")

HEALTH = "grpc.health.v1.Health"
REFLECTION = "grpc.reflection.v1alpha.ServerReflection"
GATEWAY = "capgate.v1.CapabilityGateway"
ADMIN = ("capgate.v1.ApprovalAdmin", "capgate.v1.PolicyAdmin", "capgate.v1.CacheAdmin")
# What each listener of tests/gateway/gateway.yaml serves, and nothing else.
SERVED = {
    "agents": {HEALTH, REFLECTION, GATEWAY},
    "local": {HEALTH, REFLECTION, GATEWAY},
    "admin": {HEALTH, REFLECTION, *ADMIN},
}
EVERY_CAPGATE_SERVICE = {
    GATEWAY,
    *ADMIN,
    procedure_pb2.DESCRIPTOR.services_by_name["Procedure"].full_name,
    procedure_pb2.DESCRIPTOR.services_by_name["Approver"].full_name,
}


def _target(env: Env, listener: str) -> str:
    return f"unix:{env.socket_path}" if listener == "local" else f"127.0.0.1:{env.port(listener)}"


async def _in_thread(
    env: Env, listener: str, work: Callable[[ProtoReflectionDescriptorDatabase], T]
) -> T:
    """grpc_reflection's client is synchronous: run it off the loop that serves the gateway."""

    def run() -> T:
        with grpc.insecure_channel(_target(env, listener)) as channel:
            return work(ProtoReflectionDescriptorDatabase(channel))

    return await asyncio.to_thread(run)


@pytest.mark.parametrize("listener", sorted(SERVED))
async def test_each_listener_reflects_exactly_its_own_services(env: Env, listener: str) -> None:
    served = SERVED[listener]

    def probe(db: ProtoReflectionDescriptorDatabase) -> dict[str, Any]:
        found: dict[str, Any] = {"list": set(db.get_services())}
        pool = descriptor_pool.DescriptorPool(db)
        # Every method of every served service resolves, by its own fully-qualified name too.
        for name in sorted(served):
            service = pool.FindServiceByName(name)
            for method in service.methods:
                file = db.FindFileContainingSymbol(method.full_name)
                assert file.name == service.file.name, method.full_name
        found["methods"] = {m.full_name for n in served for m in pool.FindServiceByName(n).methods}
        hidden: dict[str, bool] = {}
        for name in sorted(EVERY_CAPGATE_SERVICE - served):
            try:
                db.FindFileContainingSymbol(name)
                hidden[name] = False
            except KeyError:
                hidden[name] = True
        found["hidden"] = hidden
        # A file that defines only services this listener does not serve is not there.
        try:
            db.FindFileByName("capgate/v1/procedure.proto")
            found["procedure_file"] = True
        except KeyError:
            found["procedure_file"] = False
        # The files it does answer carry no service it does not serve.
        files = {f.name: f for f in map(db.FindFileByName, _served_files(db, served))}
        found["file_services"] = {
            f"{f.package}.{s.name}" for f in files.values() for s in f.service
        }
        return found

    found = await _in_thread(env, listener, probe)
    assert found["list"] == served
    assert found["hidden"] and all(found["hidden"].values()), found["hidden"]
    assert not found["procedure_file"]
    assert found["file_services"] <= served
    if GATEWAY in served:
        assert "capgate.v1.CapabilityGateway.Invoke" in found["methods"]


def _served_files(db: ProtoReflectionDescriptorDatabase, served: set[str]) -> list[str]:
    return sorted({db.FindFileContainingSymbol(name).name for name in served})


async def test_messages_enums_and_fields_resolve_and_unknown_names_do_not(env: Env) -> None:
    def probe(db: ProtoReflectionDescriptorDatabase) -> dict[str, str | None]:
        names = [
            "capgate.v1.InvokeRequest",
            "capgate.v1.InvokeRequest.capability_id",
            "capgate.v1.ExecutionResult",
            "capgate.v1.ExecutionState",
            "capgate.v1.EXECUTION_STATE_UNKNOWN",
            "google.protobuf.Duration",
            "capgate.v1.ExplainRequest",  # admin-only message
            "capgate.v1.NoSuchThing",
            "capgate.v1.CapabilityGateway.NoSuchMethod",
        ]
        out: dict[str, str | None] = {}
        for name in names:
            fresh = ProtoReflectionDescriptorDatabase(channel)  # no answers cached on the client
            try:
                out[name] = fresh.FindFileContainingSymbol(name).name
            except KeyError:
                out[name] = None
        return out

    with grpc.insecure_channel(_target(env, "agents")) as channel:
        found = await asyncio.to_thread(probe, ProtoReflectionDescriptorDatabase(channel))
    gateway_file = gateway_pb2.DESCRIPTOR.name
    assert found["capgate.v1.InvokeRequest"] == gateway_file
    assert found["capgate.v1.InvokeRequest.capability_id"] == gateway_file
    assert found["capgate.v1.ExecutionState"] == "capgate/v1/types.proto"
    assert found["capgate.v1.EXECUTION_STATE_UNKNOWN"] == "capgate/v1/types.proto"
    assert found["google.protobuf.Duration"] == "google/protobuf/duration.proto"
    assert found["capgate.v1.ExplainRequest"] is None
    assert found["capgate.v1.NoSuchThing"] is None
    assert found["capgate.v1.CapabilityGateway.NoSuchMethod"] is None


def test_the_admin_listener_sees_gateway_messages_but_not_the_gateway_service() -> None:
    """admin.proto imports gateway.proto: its messages are there, its service is not."""
    reflection = ListenerReflection([*ADMIN, REFLECTION])
    from grpc_reflection.v1alpha import reflection_pb2  # noqa: PLC0415 - test-local

    answer = reflection.answer(
        reflection_pb2.ServerReflectionRequest(file_containing_symbol="capgate.v1.PolicyAdmin")
    )
    protos = list(answer.file_descriptor_response.file_descriptor_proto)
    from google.protobuf import descriptor_pb2  # noqa: PLC0415 - test-local

    files = {}
    for raw in protos:
        proto = descriptor_pb2.FileDescriptorProto.FromString(raw)
        files[proto.name] = proto
    assert protos and descriptor_pb2.FileDescriptorProto.FromString(protos[0]).name == (
        admin_pb2.DESCRIPTOR.name
    )
    assert gateway_pb2.DESCRIPTOR.name in files
    assert [s.name for s in files[gateway_pb2.DESCRIPTOR.name].service] == []
    assert {s.name for s in files[admin_pb2.DESCRIPTOR.name].service} == {
        "ApprovalAdmin",
        "PolicyAdmin",
        "CacheAdmin",
    }


# grpcurl, built by scripts/grpcurl.sh through the Go module proxy when absent (bounded).
_INSTALL_TIMEOUT_S = 900


@pytest.fixture(scope="module")
def grpcurl() -> str:
    done = subprocess.run(
        ["bash", str(ROOT / "scripts/grpcurl.sh")],
        capture_output=True,
        text=True,
        timeout=_INSTALL_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"scripts/grpcurl.sh failed:\n{done.stderr[-2000:]}"
    path = done.stdout.strip().splitlines()[-1]
    assert os.access(path, os.X_OK), path
    return path


async def _grpcurl(binary: str, env: Env, listener: str, *args: str) -> tuple[int, str, str]:
    where = (
        [f"unix://{env.socket_path}"]
        if listener == "local"
        else [f"127.0.0.1:{env.port(listener)}"]
    )
    proc = await asyncio.create_subprocess_exec(
        binary,
        "-plaintext",
        "-max-time",
        "20",
        *where,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    return proc.returncode or 0, out.decode(), err.decode()


# The first grpcurl test may build grpcurl (scripts/grpcurl.sh) in its setup.
@pytest.mark.timeout(_INSTALL_TIMEOUT_S + 120)
@pytest.mark.parametrize("listener", sorted(SERVED))
async def test_grpcurl_lists_and_describes_each_listener(
    grpcurl: str, env: Env, listener: str
) -> None:
    served = SERVED[listener]
    code, out, err = await _grpcurl(grpcurl, env, listener, "list")
    assert code == 0, err
    assert set(out.split()) == served
    for service in sorted(served - {HEALTH, REFLECTION}):
        code, out, err = await _grpcurl(grpcurl, env, listener, "describe", service)
        assert code == 0, err
        assert f"service {service.rsplit('.', 1)[1]} {{" in out
        code, out, err = await _grpcurl(grpcurl, env, listener, "list", service)
        assert code == 0, err
        methods = out.split()
        assert methods
        for method in methods:  # what failed before: "Symbol not found"
            code, out, err = await _grpcurl(grpcurl, env, listener, "describe", method)
            assert code == 0, f"describe {method}: {err}"
            assert f"rpc {method.rsplit('.', 1)[1]} (" in out
    for service in sorted(EVERY_CAPGATE_SERVICE - served):
        code, out, err = await _grpcurl(grpcurl, env, listener, "describe", service)
        assert code != 0, f"{listener} describes {service}:\n{out}"


@pytest.mark.timeout(_INSTALL_TIMEOUT_S + 120)
async def test_grpcurl_describes_a_request_message(grpcurl: str, env: Env) -> None:
    code, out, err = await _grpcurl(grpcurl, env, "agents", "describe", "capgate.v1.InvokeRequest")
    assert code == 0, err
    assert "message InvokeRequest {" in out and "capability_id" in out
