"""What a `kind: http` or `kind: mcp` transport failure says about the upstream having run
(docs/errors.md): a protocol error raised by the real httpx transport after the request's
headers went out is UNKNOWN (the server may have acted on them), never NOT_STARTED; one table
(gateway.upstream.httpclient.transport_errors) maps both kinds."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gateway.errors import CapabilityError, Code
from gateway.model import HttpRoute
from gateway.upstream.http import HttpCall
from gateway.upstream.httpclient import HttpClients, SentTracker
from gateway.upstream.httpspec import HttpUpstream, parse_template
from gateway.upstream.mcpclient import McpClient
from gateway.upstream.mcpspec import McpUpstream
from gateway.upstream.spec import Upstream
from gateway.upstream.state import ExecutionState, state_of
from tests.upstream_http.httpserver import Answer, HttpServer

pytestmark = pytest.mark.integration


@pytest.fixture
async def api() -> AsyncIterator[HttpServer]:
    server = await HttpServer().start()
    yield server
    await server.stop()


async def _call(api: HttpServer, headers: tuple[tuple[str, str], ...]) -> CapabilityError:
    upstream = Upstream(
        name="api", address=api.address, kind="http", http=HttpUpstream(headers=headers)
    )
    route = HttpRoute(method="POST", path=parse_template("/notes"), template="/notes", body="input")
    clients = HttpClients()
    try:
        call = HttpCall(clients.client(upstream), upstream, route)
        with pytest.raises(CapabilityError) as caught:
            await call({"text": "hello"}, timeout=5)
    finally:
        await clients.close()
    return caught.value


async def test_a_protocol_error_after_the_headers_went_out_is_unknown(api: HttpServer) -> None:
    # A declared length the body never reaches: h11 refuses at the end of the body, after the
    # request line and headers were written to the socket.
    api.reset(Answer(hang=True))
    error = await _call(api, (("content-length", "100000"),))
    assert error.code is Code.EXECUTION_FAILED
    assert "LocalProtocolError" in error.reason
    assert state_of(error) is ExecutionState.UNKNOWN


async def test_a_protocol_error_before_anything_is_sent_is_not_started(api: HttpServer) -> None:
    error = await _call(api, (("x bad", "1"),))  # refused by h11 before a byte is written
    assert state_of(error) is ExecutionState.NOT_STARTED
    assert api.seen == []


async def test_an_mcp_upstream_maps_the_same_protocol_error(api: HttpServer) -> None:
    # The session's first message (initialize, its own request) fails after its headers
    # went out; the tools/list the caller asked for never did: NOT_STARTED, mapped, not h11's
    # own exception escaping the upstream layer.
    api.reset(Answer(hang=True))
    spec = McpUpstream(headers=(("content-length", "100000"),))
    upstream = Upstream(name="tools", address=api.address, kind="mcp", mcp=spec)
    clients = HttpClients()
    sent = SentTracker()
    try:
        with pytest.raises(CapabilityError) as caught:
            await McpClient(clients.client(upstream), upstream).list_tools(sent=sent)
    finally:
        await clients.close()
    assert caught.value.code is Code.EXECUTION_FAILED
    assert "LocalProtocolError" in caught.value.reason
    assert state_of(caught.value) is ExecutionState.NOT_STARTED
    assert not sent.sent
