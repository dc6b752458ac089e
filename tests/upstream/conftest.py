"""Fixtures for the upstream tests: the example upstream on a loopback port, in-process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from google.protobuf.descriptor_pool import DescriptorPool
from upstreamkit import ORDERS_PB, Orders, compile_descriptor_set

from examples.orders.server import State, serve
from gateway.upstream.channels import ChannelPool
from gateway.upstream.descriptors import load_descriptor_set


@pytest.fixture(scope="module")
async def orders_server() -> AsyncIterator[Orders]:
    state = State()
    server, port = await serve("127.0.0.1:0", state=state)
    pool = ChannelPool()
    yield Orders(state, port, pool)
    await pool.close()
    await server.stop(None)


@pytest.fixture
def orders(orders_server: Orders) -> Orders:
    """The module's server, reset: each test starts from the seed book and zero counters."""
    orders_server.state.reset()
    return orders_server


@pytest.fixture(scope="session")
def orders_pool() -> DescriptorPool:
    return load_descriptor_set(ORDERS_PB)


@pytest.fixture(scope="session")
def kitchen_pb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_descriptor_set("kitchen.proto", tmp_path_factory.mktemp("kitchen"))


@pytest.fixture(scope="session")
def kitchen_pool(kitchen_pb: Path) -> DescriptorPool:
    return load_descriptor_set(kitchen_pb)
