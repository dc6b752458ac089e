"""Learn an upstream's request/response types: from a descriptor set file or server reflection.

Both sources end in a private `DescriptorPool` per upstream (never the process-wide default
pool, so two upstreams may define the same message names differently). Methods are resolved
once at load (STYLE: compile once, evaluate many) into `MethodInfo`; a streaming or unknown
method is a load error (DESIGN §12: only unary upstream methods are accepted).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, message_factory
from google.protobuf.descriptor import Descriptor
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message import DecodeError, Message
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from gateway.upstream.errors import UpstreamConfigError, UpstreamUnreachable

__all__ = [
    "MethodInfo",
    "load_descriptor_set",
    "load_from_reflection",
    "pool_from_files",
    "proto3_optional_names",
    "real_oneofs",
    "resolve_method",
]

_STATUS_NAMES: dict[int, str] = {code.value[0]: code.name for code in grpc.StatusCode}


@dataclass(frozen=True, slots=True)
class MethodInfo:
    """A resolved unary method: its path, message descriptors and message classes."""

    full_method: str  # "/pkg.Service/Method"
    input: Descriptor
    output: Descriptor
    request_class: type[Message]
    response_class: type[Message]


def load_descriptor_set(path: str | Path) -> DescriptorPool:
    """Load a `FileDescriptorSet` (`protoc --descriptor_set_out --include_imports`)."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise UpstreamConfigError(f"cannot read descriptor set {path}: {err.strerror}") from err
    try:
        fds = descriptor_pb2.FileDescriptorSet.FromString(data)
    except DecodeError as err:
        raise UpstreamConfigError(f"{path} is not a FileDescriptorSet") from err
    return pool_from_files(fds.file, source=str(path))


def pool_from_files(
    files: Iterable[descriptor_pb2.FileDescriptorProto], *, source: str
) -> DescriptorPool:
    """Build a private pool, adding files after their dependencies (any input order)."""
    by_name: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    for file in files:
        known = by_name.get(file.name)
        if known is not None and known != file:
            raise UpstreamConfigError(f"{source}: two different definitions of {file.name}")
        by_name[file.name] = file
    pool = DescriptorPool()
    added: set[str] = set()

    def add(name: str, chain: tuple[str, ...]) -> None:
        if name in added:
            return
        if name in chain:
            raise UpstreamConfigError(f"{source}: import cycle through {name}")
        file = by_name.get(name)
        if file is None:
            needed_by = chain[-1] if chain else "?"
            raise UpstreamConfigError(
                f"{source}: {name} (imported by {needed_by}) is missing; "
                "build the descriptor set with --include_imports"
            )
        for dep in file.dependency:
            add(dep, (*chain, name))
        try:
            pool.Add(file)
        except (TypeError, ValueError) as err:
            raise UpstreamConfigError(f"{source}: cannot load {name}: {err}") from err
        added.add(name)

    for name in sorted(by_name):
        add(name, ())
    return pool


# What a failed reflection stream most likely means. An upstream without reflection answers
# UNIMPLEMENTED, but grpcio sometimes ends such a stream with INTERNAL instead (the server
# resets it while the client is still writing): both get the hint.
_REFLECTION_HINTS: dict[grpc.StatusCode, str] = {
    grpc.StatusCode.UNIMPLEMENTED: (
        "; the upstream has no server reflection: configure descriptor_set"
    ),
    grpc.StatusCode.INTERNAL: (
        "; the upstream may have no server reflection (grpcio reports that as INTERNAL at "
        "times): configure descriptor_set"
    ),
}


async def load_from_reflection(
    channel: grpc.aio.Channel,
    services: Iterable[str] | None = None,
    *,
    timeout: float = 5.0,  # noqa: ASYNC109 - the gRPC deadline of the reflection stream
) -> DescriptorPool:
    """Fetch the files defining `services` (default: every service the upstream lists) and
    all their imports by v1alpha server reflection."""
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    stream = stub.ServerReflectionInfo(timeout=timeout)
    files: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    try:
        # Explicitly named services must resolve; of a listing, only the ones that do count.
        required = services is not None
        wanted = set(services) if services is not None else await _list_services(stream)
        for service in sorted(wanted):
            if service not in _services_in(files.values()):
                request = reflection_pb2.ServerReflectionRequest(file_containing_symbol=service)
                await _ask(stream, files, request, service, required=required)
        missing = _missing_imports(files)
        while missing:
            for name in missing:
                request = reflection_pb2.ServerReflectionRequest(file_by_filename=name)
                await _ask(stream, files, request, name)
            missing = _missing_imports(files)
        await stream.done_writing()
    except grpc.aio.AioRpcError as err:
        unreachable = err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
        raise (UpstreamUnreachable if unreachable else UpstreamConfigError)(
            f"server reflection failed: {err.code().name}: {err.details()}"
            f"{_REFLECTION_HINTS.get(err.code(), '')}"
        ) from err
    finally:
        stream.cancel()
    return pool_from_files(files.values(), source="server reflection")


async def _read(stream: Any, subject: str) -> reflection_pb2.ServerReflectionResponse | None:
    """The next answer, None at the end of the stream. grpc.aio logs a message its deserializer
    cannot parse and hands back None: that is a broken upstream, said as a load problem."""
    response = await stream.read()
    if response is grpc.aio.EOF:
        return None
    if not isinstance(response, reflection_pb2.ServerReflectionResponse):
        raise UpstreamConfigError(
            f"server reflection answered {subject} with bytes that are not a "
            "ServerReflectionResponse"
        )
    return response


async def _list_services(stream: Any) -> set[str]:
    await stream.write(reflection_pb2.ServerReflectionRequest(list_services=""))
    response = await _read(stream, "the service list")
    if response is None or not response.HasField("list_services_response"):
        raise UpstreamConfigError("server reflection did not list the upstream's services")
    names = [svc.name for svc in response.list_services_response.service]
    # The reflection service describes itself; it is never a capability.
    return {name for name in names if not name.startswith("grpc.reflection.")}


async def _ask(
    stream: Any,
    files: dict[str, descriptor_pb2.FileDescriptorProto],
    request: reflection_pb2.ServerReflectionRequest,
    subject: str,
    *,
    required: bool = True,
) -> None:
    await stream.write(request)
    response = await _read(stream, subject)
    if response is None:
        raise UpstreamConfigError(f"server reflection closed the stream while asking for {subject}")
    if response.HasField("error_response"):
        if not required:
            return
        err = response.error_response
        raise UpstreamConfigError(
            f"server reflection does not know {subject}: "
            f"{_STATUS_NAMES.get(err.error_code, err.error_code)} {err.error_message}"
        )
    for raw in response.file_descriptor_response.file_descriptor_proto:
        file = descriptor_pb2.FileDescriptorProto.FromString(raw)
        files.setdefault(file.name, file)


def _services_in(files: Iterable[descriptor_pb2.FileDescriptorProto]) -> set[str]:
    return {
        f"{file.package}.{svc.name}" if file.package else svc.name
        for file in files
        for svc in file.service
    }


def _missing_imports(files: dict[str, descriptor_pb2.FileDescriptorProto]) -> list[str]:
    return sorted({dep for f in files.values() for dep in f.dependency if dep not in files})


def resolve_method(pool: DescriptorPool, full_method: str) -> MethodInfo:
    """Resolve "/pkg.Service/Method" to a unary `MethodInfo`; anything else is a load error."""
    parts = full_method.split("/")
    if len(parts) != 3 or parts[0] or not parts[1] or not parts[2]:
        raise UpstreamConfigError(
            f"method {full_method!r} must have the form /package.Service/Method"
        )
    service_name, method_name = parts[1], parts[2]
    try:
        service = pool.FindServiceByName(service_name)
    except KeyError:
        raise UpstreamConfigError(f"unknown service {service_name} (in {full_method})") from None
    method = service.methods_by_name.get(method_name)
    if method is None:
        raise UpstreamConfigError(f"service {service_name} has no method {method_name}")
    if method.client_streaming or method.server_streaming:
        kind = "client" if method.client_streaming else "server"
        if method.client_streaming and method.server_streaming:
            kind = "bidirectional"
        raise UpstreamConfigError(
            f"{full_method} is a {kind}-streaming method; only unary methods can be "
            "capabilities (DESIGN §12)"
        )
    return MethodInfo(
        full_method=full_method,
        input=method.input_type,
        output=method.output_type,
        request_class=message_factory.GetMessageClass(method.input_type),
        response_class=message_factory.GetMessageClass(method.output_type),
    )


def proto3_optional_names(descriptor: Descriptor) -> frozenset[str]:
    """Names of the proto3 `optional` fields of a message (read from its DescriptorProto:
    the runtime descriptor does not say whether a oneof is synthetic)."""
    proto = descriptor_pb2.DescriptorProto()
    descriptor.CopyToProto(proto)
    return frozenset(f.name for f in proto.field if f.proto3_optional)


def real_oneofs(descriptor: Descriptor) -> dict[str, str]:
    """Field name -> oneof name for members of real oneofs (proto3 `optional` fields live in
    synthetic one-member oneofs, which are not a choice and are left out)."""
    optional = proto3_optional_names(descriptor)
    return {
        field.name: field.containing_oneof.name
        for field in descriptor.fields
        if field.containing_oneof is not None and field.name not in optional
    }
