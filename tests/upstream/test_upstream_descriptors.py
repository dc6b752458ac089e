"""Descriptor loading: a descriptor set file and server reflection give the same methods;
streaming and unknown methods are load errors (DESIGN §12)."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor_pool import DescriptorPool
from upstreamkit import Orders

from gateway.upstream.descriptors import (
    load_descriptor_set,
    load_from_reflection,
    pool_from_files,
    resolve_method,
)
from gateway.upstream.errors import UpstreamConfigError
from gateway.upstream.schema import derive_schema

UNARY = ("GetOrder", "ListOrders", "RefundOrder", "CancelOrder")


def _proto(descriptor: object) -> descriptor_pb2.DescriptorProto:
    """The message's definition; json_name is left out because protoc writes it into
    descriptor sets while generated code (what reflection serves) omits it."""
    proto = descriptor_pb2.DescriptorProto()
    descriptor.CopyToProto(proto)  # type: ignore[attr-defined]
    for message in (proto, *proto.nested_type):
        for field in message.field:
            field.ClearField("json_name")
    return proto


@pytest.mark.integration
async def test_file_and_reflection_resolve_the_same_methods(
    orders: Orders, orders_pool: DescriptorPool
) -> None:
    reflected = await load_from_reflection(orders.channel(), ["orders.v1.Orders"])
    for name in UNARY:
        path = f"/orders.v1.Orders/{name}"
        from_file, from_server = resolve_method(orders_pool, path), resolve_method(reflected, path)
        assert from_file.full_method == from_server.full_method == path
        assert from_file.input.full_name == from_server.input.full_name
        assert _proto(from_file.input) == _proto(from_server.input)
        assert _proto(from_file.output) == _proto(from_server.output)
        assert derive_schema(from_file.input) == derive_schema(from_server.input)
        request = from_server.request_class(order_id="o-1") if name != "ListOrders" else None
        if request is not None:  # the classes are real message classes of the private pool
            assert from_file.request_class.FromString(request.SerializeToString()) == (
                from_file.request_class(order_id="o-1")
            )


@pytest.mark.integration
async def test_reflection_without_names_loads_every_listed_service(orders: Orders) -> None:
    pool = await load_from_reflection(orders.channel())
    assert resolve_method(pool, "/orders.v1.Orders/GetOrder").output.full_name == "orders.v1.Order"
    procedure = resolve_method(pool, "/capgate.v1.Procedure/Invoke")
    assert procedure.input.full_name == "capgate.v1.ProcedureInvokeRequest"
    # Imports come along: Order's created_at is a Timestamp from the upstream's own files.
    order = pool.FindMessageTypeByName("orders.v1.Order")
    assert order.fields_by_name["created_at"].message_type.full_name == "google.protobuf.Timestamp"


@pytest.mark.integration
async def test_reflection_of_an_unknown_service_is_a_load_error(orders: Orders) -> None:
    with pytest.raises(UpstreamConfigError, match=r"does not know orders\.v1\.Nope"):
        await load_from_reflection(orders.channel(), ["orders.v1.Nope"])


@pytest.mark.integration
async def test_an_upstream_without_reflection_says_to_configure_a_descriptor_set() -> None:
    server = grpc.aio.server()
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            with pytest.raises(UpstreamConfigError, match=r"UNIMPLEMENTED.*descriptor_set"):
                await load_from_reflection(channel, ["orders.v1.Orders"], timeout=5)
    finally:
        await server.stop(None)


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/orders.v1.Orders/WatchOrders", "server"),
        ("/kitchen.v1.Kitchen/Gather", "client"),
        ("/kitchen.v1.Kitchen/Chat", "bidirectional"),
    ],
)
def test_streaming_methods_are_refused_at_load(
    path: str, kind: str, orders_pool: DescriptorPool, kitchen_pool: DescriptorPool
) -> None:
    pool = orders_pool if path.startswith("/orders") else kitchen_pool
    with pytest.raises(UpstreamConfigError, match=f"{kind}-streaming.*only unary"):
        resolve_method(pool, path)


@pytest.mark.integration
async def test_streaming_is_refused_with_reflected_descriptors_too(orders: Orders) -> None:
    pool = await load_from_reflection(orders.channel(), ["orders.v1.Orders"])
    with pytest.raises(UpstreamConfigError, match="server-streaming"):
        resolve_method(pool, "/orders.v1.Orders/WatchOrders")


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/orders.v1.Nope/GetOrder", r"unknown service orders\.v1\.Nope"),
        ("/orders.v1.Orders/Nope", "has no method Nope"),
        ("orders.v1.Orders/GetOrder", "must have the form"),
        ("/orders.v1.Orders/", "must have the form"),
        ("/orders.v1.Orders/GetOrder/x", "must have the form"),
    ],
)
def test_unknown_or_malformed_methods_are_load_errors(
    path: str, message: str, orders_pool: DescriptorPool
) -> None:
    with pytest.raises(UpstreamConfigError, match=message):
        resolve_method(orders_pool, path)


def test_a_descriptor_set_without_its_imports_names_the_missing_file(tmp_path: Path) -> None:
    fds = descriptor_pb2.FileDescriptorSet.FromString(
        Path(__file__).parents[2].joinpath("examples/orders/orders.pb").read_bytes()
    )
    without = descriptor_pb2.FileDescriptorSet(
        file=[f for f in fds.file if f.name != "google/protobuf/timestamp.proto"]
    )
    path = tmp_path / "partial.pb"
    path.write_bytes(without.SerializeToString())
    with pytest.raises(UpstreamConfigError, match=r"timestamp\.proto.*--include_imports"):
        load_descriptor_set(path)


def test_files_load_in_dependency_order_whatever_the_set_order(kitchen_pb: Path) -> None:
    fds = descriptor_pb2.FileDescriptorSet.FromString(kitchen_pb.read_bytes())
    pool = pool_from_files(reversed(fds.file), source="test")
    assert resolve_method(pool, "/kitchen.v1.Kitchen/Cook").input.full_name == "kitchen.v1.Sink"


def test_unreadable_or_garbage_descriptor_sets_are_load_errors(tmp_path: Path) -> None:
    with pytest.raises(UpstreamConfigError, match="cannot read"):
        load_descriptor_set(tmp_path / "missing.pb")
    garbage = tmp_path / "garbage.pb"
    garbage.write_bytes(b"\xff\xff\xff not protobuf")
    with pytest.raises(UpstreamConfigError, match="not a FileDescriptorSet"):
        load_descriptor_set(garbage)


def test_each_upstream_gets_a_private_pool(orders_pool: DescriptorPool) -> None:
    again = load_descriptor_set(Path(__file__).parents[2] / "examples/orders/orders.pb")
    assert again is not orders_pool
    first = resolve_method(orders_pool, "/orders.v1.Orders/GetOrder").request_class
    second = resolve_method(again, "/orders.v1.Orders/GetOrder").request_class
    assert first is not second  # two upstreams may define the same names differently
