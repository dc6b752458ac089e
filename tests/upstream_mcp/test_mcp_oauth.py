"""OAuth client credentials towards an MCP upstream, through the real gateway: the token
endpoint (a real HTTP server on loopback) gets a client-credentials request with HTTP Basic
client authentication; the SDK's MCP server receives the token as a bearer; a token is reused
until it is about to expire; no token means nothing is sent (UPSTREAM_UNAVAILABLE,
NOT_STARTED)."""

from __future__ import annotations

import base64
import itertools
import tempfile
from pathlib import Path
from urllib.parse import parse_qs

import grpc
import orjson
import pytest

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, types_pb2
from examples.mcp_upstream.server import serve
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from gateway.upstream.oauth import renew_after
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import token
from tests.upstream_http.httpserver import Answer, HttpServer, Seen

pytestmark = pytest.mark.integration

CONFIG = """version: 1
listeners:
  - name: agents
    address: 127.0.0.1:0
    surface: agent
    auth: jwt
    jwt:
      issuers: [test-idp]
      audience: capgate
      keys:
        - {kid: hs1, alg: HS256, secret: "{{ env.TEST_JWT_SECRET }}"}
upstreams:
  desk:
    kind: mcp
    address: "{{ env.TEST_DESK_ADDR }}"
    mcp:
      protocol: "2026-07-28"
      oauth:
        token_url: "http://{{ env.TEST_TOKEN_ADDR }}/oauth/token"
        client_id: capgate-desk
        client_secret: "{{ env.TEST_CLIENT_SECRET }}"
        scope: tickets
capabilities:
  - id: desk.search
    description: Find tickets.
    upstream: desk
    tool: search_tickets
    side_effect: read
    risk: low
    expose: {agent: true}
audit:
  sinks: []
redis:
  url: "{{ env.TEST_REDIS_URL }}"
  key_prefix: capgate-test-mcp-oauth
"""


@pytest.mark.parametrize(
    ("expires_in", "fetches"),
    [
        (3600, 1),
        (0, 3),
        ("0", 3),  # a numeric string is read as the number (was: one hour)
        (20, 1),  # renewed after half its life, not on every call (was: 30 s before it)
        ("20", 1),
    ],
)
async def test_the_token_is_fetched_sent_and_reused_until_it_expires(
    redis_server: RedisProcess, expires_in: int | str, fetches: int
) -> None:
    numbers = itertools.count(1)
    tokens = HttpServer()

    def grant(seen: Seen) -> Answer:
        body = {"access_token": f"tok-{next(numbers)}", "expires_in": expires_in}
        return Answer(200, orjson.dumps(body), [("content-type", "application/json")])

    await tokens.start()
    tokens.handler = grant
    desk = await serve()
    run_dir = tempfile.mkdtemp(prefix="cg-oauth-")
    config = Path(run_dir) / "gateway.yaml"
    config.write_text(CONFIG)
    environ = gateway_environ("127.0.0.1:1", redis_server.url, run_dir) | {
        "TEST_DESK_ADDR": desk.address,
        "TEST_TOKEN_ADDR": tokens.address,
        "TEST_CLIENT_SECRET": "s3cret",
    }
    gw = await start(load_settings(config, environ=environ), extra_sinks=[MemorySink()])
    results = []
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}") as channel:
            stub = gateway_pb2_grpc.CapabilityGatewayStub(channel)
            for _ in range(2):
                results.append(
                    await stub.Invoke(
                        gateway_pb2.InvokeRequest(
                            capability_id="desk.search", input_json=b'{"query": "vpn"}'
                        ),
                        metadata=[("authorization", f"Bearer {token('alice')}")],
                        timeout=10,
                    )
                )
            tokens.handler = lambda seen: Answer(401, b'{"error": "invalid_client"}')
            refused = None
            if float(expires_in) == 0:  # the next call needs a new token, and gets none
                desk.calls.clear()
                refused = await stub.Invoke(
                    gateway_pb2.InvokeRequest(
                        capability_id="desk.search", input_json=b'{"query": "vpn"}'
                    ),
                    metadata=[("authorization", f"Bearer {token('alice')}")],
                    timeout=10,
                )
    finally:
        await gw.stop(0.5)
        await desk.stop()
        await tokens.stop()
    assert all(r.WhichOneof("outcome") == "completed" for r in results), results
    grants = [s for s in tokens.seen if s.target == "/oauth/token"]
    assert len(grants) == fetches + (1 if refused is not None else 0)
    first = grants[0]
    assert first.method == "POST"
    assert (
        first.header("authorization")
        == "Basic " + base64.b64encode(b"capgate-desk:s3cret").decode()
    )
    assert parse_qs(first.body.decode()) == {
        "grant_type": ["client_credentials"],
        "scope": ["tickets"],
    }
    sent = [h["authorization"] for h in desk.headers if h.get("mcp-method") == "tools/call"]
    expected = (
        ["Bearer tok-1", "Bearer tok-1"] if fetches == 1 else ["Bearer tok-2", "Bearer tok-3"]
    )
    assert sent[:2] == expected
    if refused is not None:
        code = types_pb2.ErrorCode.Name(refused.failed.code)
        assert code == "ERROR_CODE_UPSTREAM_UNAVAILABLE", refused
        assert refused.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
        assert desk.calls["search_tickets"] == 0
    assert all("s3cret" not in v for h in desk.headers for v in h.values())


@pytest.mark.parametrize(
    ("expires_in", "after"),
    [
        (3600, 3570.0),
        ("3600", 3570.0),
        (" 90 ", 60.0),
        (60, 30.0),
        (20, 10.0),
        (1, 0.5),
        (0, 0.0),
        (-5, 0.0),
        (10**12, 86370.0),  # at most a day
        (None, 3570.0),  # absent: one hour
        (True, 3570.0),  # not a number
        ("soon", 3570.0),
        ("1e9", 3570.0),
    ],
)
def test_renewal_is_clamped(expires_in: object, after: float) -> None:
    assert renew_after(expires_in) == after
