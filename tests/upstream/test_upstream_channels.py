"""Pooled channels: one per upstream, reused; receive limit and keepalive; TLS and mTLS with
a server name override; unix sockets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from google.protobuf.descriptor_pool import DescriptorPool
from upstreamkit import Orders, Pki, make_pki

from examples.orders.server import serve as serve_orders
from gateway.errors import CapabilityError, Code
from gateway.upstream.call import grpc_call
from gateway.upstream.channels import ChannelPool, channel_credentials, channel_options
from gateway.upstream.descriptors import resolve_method
from gateway.upstream.errors import UpstreamConfigError
from gateway.upstream.spec import Upstream

GET = "/orders.v1.Orders/GetOrder"


def test_options_carry_the_reply_limit_keepalive_and_name_override() -> None:
    up = Upstream(
        name="o",
        address="x:1",
        max_response_bytes=1234,
        keepalive_s=20,
        server_name="orders.internal",
    )
    options = dict(channel_options(up))
    assert options["grpc.max_receive_message_length"] == 1234
    assert options["grpc.keepalive_time_ms"] == 20_000
    assert options["grpc.keepalive_permit_without_calls"] == 0
    assert options["grpc.ssl_target_name_override"] == "orders.internal"
    assert "grpc.keepalive_time_ms" not in dict(
        channel_options(Upstream(name="o", address="x:1", keepalive_s=0))
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"ca_file": "ca.pem"}, "tls is false"),
        ({"tls": True, "client_cert_file": "c.pem"}, "go together"),
        ({"tls": True, "ca_file": "/nonexistent/ca.pem"}, "cannot read /nonexistent/ca.pem"),
    ],
)
def test_tls_misconfiguration_is_a_load_error(fields: dict[str, object], message: str) -> None:
    with pytest.raises(UpstreamConfigError, match=message):
        channel_credentials(Upstream(name="o", address="x:1", **fields))  # type: ignore[arg-type]


async def test_the_pool_reuses_a_channel_until_its_settings_change() -> None:
    pool = ChannelPool()
    up = Upstream(name="o", address="127.0.0.1:1")
    first = pool.channel(up)
    assert pool.channel(Upstream(name="o", address="127.0.0.1:1")) is first
    changed = pool.channel(Upstream(name="o", address="127.0.0.1:2"))
    assert changed is not first
    assert len(pool) == 1
    await pool.close()
    assert len(pool) == 0


async def test_building_a_pool_with_a_bad_tls_file_opens_nothing() -> None:
    good = Upstream(name="a", address="127.0.0.1:1")
    bad = Upstream(name="b", address="127.0.0.1:2", tls=True, ca_file="/nonexistent")
    with pytest.raises(UpstreamConfigError):
        ChannelPool({"a": good, "b": bad})


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"), "orders.internal")


@pytest.fixture(scope="module")
async def tls_orders(pki: Pki) -> AsyncIterator[int]:
    """The example upstream behind mTLS: it requires a client certificate from the CA."""
    credentials = grpc.ssl_server_credentials(
        [(pki.server_key.read_bytes(), pki.server_cert.read_bytes())],
        root_certificates=pki.ca.read_bytes(),
        require_client_auth=True,
    )
    server, port = await serve_orders("127.0.0.1:0", credentials=credentials)
    yield port
    await server.stop(None)


@pytest.mark.integration
async def test_mtls_with_a_server_name_override(
    pki: Pki, tls_orders: int, orders_pool: DescriptorPool
) -> None:
    up = Upstream(
        name="orders",
        address=f"127.0.0.1:{tls_orders}",
        tls=True,
        ca_file=str(pki.ca),
        client_cert_file=str(pki.client_cert),
        client_key_file=str(pki.client_key),
        server_name="orders.internal",
    )
    without_cert = Upstream(
        name="anon",
        address=up.address,
        tls=True,
        ca_file=str(pki.ca),
        server_name="orders.internal",
    )
    pool = ChannelPool({"orders": up, "anon": without_cert})
    method = resolve_method(orders_pool, GET)
    try:
        order = await grpc_call(pool.channel(up), method, upstream=up)(
            {"order_id": "o-1001"}, timeout=5
        )
        assert order["order_id"] == "o-1001"
        with pytest.raises(CapabilityError) as caught:  # the server demands a client cert
            await grpc_call(pool.channel(without_cert), method, upstream=without_cert)(
                {"order_id": "o-1001"}, timeout=5
            )
        assert caught.value.code is Code.UPSTREAM_UNAVAILABLE
    finally:
        await pool.close()


@pytest.mark.integration
async def test_a_unix_socket_upstream(tmp_path: Path, orders_pool: DescriptorPool) -> None:
    path = tmp_path / "orders.sock"
    server, _ = await serve_orders(f"unix://{path}")
    up = Upstream(name="orders", address=f"unix://{path}")
    pool = ChannelPool()
    try:
        call = grpc_call(pool.channel(up), resolve_method(orders_pool, GET), upstream=up)
        assert (await call({"order_id": "o-1002"}, timeout=5))["note"] == "leave at the door"
    finally:
        await pool.close()
        await server.stop(None)


@pytest.mark.integration
async def test_one_channel_serves_concurrent_calls(
    orders: Orders, orders_pool: DescriptorPool
) -> None:
    up = orders.upstream()
    call = grpc_call(orders.pool.channel(up), resolve_method(orders_pool, GET), upstream=up)
    replies = await asyncio.gather(*(call({"order_id": "o-1001"}, timeout=5) for _ in range(20)))
    assert {r["order_id"] for r in replies} == {"o-1001"}
    assert orders.state.recorder.calls[GET] == 20
