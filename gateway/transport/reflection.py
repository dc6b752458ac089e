"""Server reflection that shows each listener exactly the services it serves (DESIGN §12).

grpcio-reflection answers from the whole process-wide descriptor pool: a caller listener's
reflection described ApprovalAdmin, PolicyAdmin, Procedure and Approver (any file or symbol the
process ever imported), and a method name (`capgate.v1.CapabilityGateway.Invoke`, what
`grpcurl describe` asks for) was "Symbol not found" because the pool's lookup does not index
methods. This servicer is built once per listener from the descriptors of its own services:

- files: the files defining the served services and everything they import; each answered
  with the services it defines that this listener does not serve removed (admin.proto imports
  gateway.proto, whose CapabilityGateway the admin listener does not serve);
- symbols: those files' messages, fields, enums, enum values and extensions, and the served
  services and their methods; anything else is NOT_FOUND, as for a name that does not exist.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FileDescriptor
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

SERVICE_NAME = reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"].full_name


def _closure(files: Iterable[FileDescriptor]) -> dict[str, FileDescriptor]:
    """The files and everything they import, each once, dependencies first."""
    seen: dict[str, FileDescriptor] = {}

    def visit(file: FileDescriptor) -> None:
        if file.name in seen:
            return
        for dependency in file.dependencies:
            visit(dependency)
        seen[file.name] = file

    for file in files:
        visit(file)
    return seen


def _enum_symbols(enum: EnumDescriptor, scope: str) -> Iterable[str]:
    yield enum.full_name
    # Enum values are siblings of their enum in protobuf's scoping (C++ style).
    for value in enum.values:
        yield f"{scope}{value.name}" if scope else value.name


def _message_symbols(message: Descriptor) -> Iterable[str]:
    yield message.full_name
    for field in message.fields:
        yield field.full_name
    for oneof in message.oneofs:
        yield oneof.full_name
    for extension in message.extensions:
        yield extension.full_name
    for nested in message.nested_types:
        yield from _message_symbols(nested)
    for enum in message.enum_types:
        yield from _enum_symbols(enum, f"{message.full_name}.")


class ListenerReflection(reflection_pb2_grpc.ServerReflectionServicer):  # type: ignore[misc]  # generated base is untyped
    """`grpc.reflection.v1alpha.ServerReflection` over one listener's services."""

    def __init__(
        self, service_names: Sequence[str], pool: descriptor_pool.DescriptorPool | None = None
    ) -> None:
        pool = pool or descriptor_pool.Default()
        self._services = tuple(sorted(set(service_names)))
        served = [pool.FindServiceByName(name) for name in self._services]
        self._files = _closure(service.file for service in served)
        served_names = set(self._services)
        self._symbols: dict[str, str] = {}  # fully-qualified name -> file name
        for file in self._files.values():
            package = f"{file.package}." if file.package else ""
            names: list[str] = []
            for message in file.message_types_by_name.values():
                names.extend(_message_symbols(message))
            for enum in file.enum_types_by_name.values():
                names.extend(_enum_symbols(enum, package))
            for extension in file.extensions_by_name.values():
                names.append(extension.full_name)
            for service in file.services_by_name.values():
                if service.full_name in served_names:
                    names.append(service.full_name)
                    names.extend(method.full_name for method in service.methods)
            for name in names:
                self._symbols.setdefault(name, file.name)
        # Each file as this listener shows it: services it does not serve are left out.
        self._protos: dict[str, bytes] = {}
        for name, file in self._files.items():
            proto = descriptor_pb2.FileDescriptorProto()
            file.CopyToProto(proto)
            kept = [s for s in proto.service if f"{file.package}.{s.name}" in served_names]
            del proto.service[:]
            proto.service.extend(kept)
            self._protos[name] = proto.SerializeToString()
        self._pool = pool

    @property
    def services(self) -> tuple[str, ...]:
        return self._services

    async def ServerReflectionInfo(
        self, requests: AsyncIterator[reflection_pb2.ServerReflectionRequest], _context: Any
    ) -> AsyncIterator[reflection_pb2.ServerReflectionResponse]:
        async for request in requests:
            yield self.answer(request)

    def answer(
        self, request: reflection_pb2.ServerReflectionRequest
    ) -> reflection_pb2.ServerReflectionResponse:
        kind = request.WhichOneof("message_request")
        if kind == "list_services":
            return reflection_pb2.ServerReflectionResponse(
                original_request=request,
                list_services_response=reflection_pb2.ListServiceResponse(
                    service=[reflection_pb2.ServiceResponse(name=n) for n in self._services]
                ),
            )
        if kind == "file_by_filename":
            return self._file(request, request.file_by_filename)
        if kind == "file_containing_symbol":
            return self._file(request, self._symbols.get(request.file_containing_symbol))
        if kind == "file_containing_extension":
            ext = request.file_containing_extension
            return self._file(
                request, self._extension_file(ext.containing_type, ext.extension_number)
            )
        if kind == "all_extension_numbers_of_type":
            numbers = self._extension_numbers(request.all_extension_numbers_of_type)
            if numbers is None:
                return _error(request, grpc.StatusCode.NOT_FOUND)
            return reflection_pb2.ServerReflectionResponse(
                original_request=request,
                all_extension_numbers_response=reflection_pb2.ExtensionNumberResponse(
                    base_type_name=request.all_extension_numbers_of_type,
                    extension_number=numbers,
                ),
            )
        return _error(request, grpc.StatusCode.INVALID_ARGUMENT)

    def _file(
        self, request: reflection_pb2.ServerReflectionRequest, name: str | None
    ) -> reflection_pb2.ServerReflectionResponse:
        if name is None or name not in self._files:
            return _error(request, grpc.StatusCode.NOT_FOUND)
        wanted = _closure([self._files[name]])
        return reflection_pb2.ServerReflectionResponse(
            original_request=request,
            file_descriptor_response=reflection_pb2.FileDescriptorResponse(
                # The requested file first, as grpc's own servers answer.
                file_descriptor_proto=[self._protos[name]]
                + [self._protos[n] for n in wanted if n != name]
            ),
        )

    def _visible_message(self, name: str) -> Descriptor | None:
        if self._symbols.get(name) is None:
            return None
        try:
            message: Descriptor = self._pool.FindMessageTypeByName(name)
        except KeyError:
            return None
        return message

    def _extension_file(self, containing_type: str, number: int) -> str | None:
        message = self._visible_message(containing_type)
        if message is None:
            return None
        try:
            extension = self._pool.FindExtensionByNumber(message, number)
        except KeyError:
            return None
        return self._symbols.get(extension.full_name)

    def _extension_numbers(self, containing_type: str) -> list[int] | None:
        message = self._visible_message(containing_type)
        if message is None:
            return None
        return sorted(
            e.number for e in self._pool.FindAllExtensions(message) if e.full_name in self._symbols
        )


def _error(
    request: reflection_pb2.ServerReflectionRequest, code: grpc.StatusCode
) -> reflection_pb2.ServerReflectionResponse:
    number, text = code.value
    return reflection_pb2.ServerReflectionResponse(
        original_request=request,
        error_response=reflection_pb2.ErrorResponse(error_code=number, error_message=text),
    )


def enable(server: grpc.aio.Server, service_names: Sequence[str]) -> ListenerReflection:
    """Serve reflection of exactly `service_names` (reflection itself included) on `server`."""
    servicer = ListenerReflection([*service_names, SERVICE_NAME])
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
    return servicer
