"""`kind: http` over TLS through the real gateway: the server certificate is checked against
the upstream's ca_file and server_name, and the client certificate is presented (mTLS); a
server the CA did not sign is never sent anything (UPSTREAM_UNAVAILABLE, NOT_STARTED)."""

from __future__ import annotations

import ssl
import tempfile
from pathlib import Path

import grpc
import orjson
import pytest

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, types_pb2
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import token
from tests.upstream.upstreamkit import Pki, make_pki
from tests.upstream_http.h2server import H2Server
from tests.upstream_http.httpserver import Answer, HttpServer

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
  secure:
    kind: http
    address: "{{ env.TEST_API_ADDR }}"
    tls: true
    ca_file: "{{ env.TEST_CA }}"
    client_cert_file: "{{ env.TEST_CLIENT_CERT }}"
    client_key_file: "{{ env.TEST_CLIENT_KEY }}"
    server_name: api.test
capabilities:
  - id: secure.read
    description: Over mTLS.
    upstream: secure
    http: {method: GET, path: /thing}
    side_effect: read
    risk: low
    expose: {agent: true}
    input_schema: {type: object}
audit:
  sinks: []
redis:
  url: "{{ env.TEST_REDIS_URL }}"
  key_prefix: capgate-test-http-tls
"""


def _server_context(serving: Pki, trusting: Pki) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(trusting.ca))
    context.load_cert_chain(str(serving.server_cert), str(serving.server_key))
    context.verify_mode = ssl.CERT_REQUIRED
    return context


async def _call(
    serving: Pki, gateway_pki: Pki, redis_url: str
) -> tuple[gateway_pb2.ExecutionResult, HttpServer]:
    server = await HttpServer().start(ssl=_server_context(serving, gateway_pki))
    server.reset(Answer(body=b'{"ok": true}'))
    run_dir = tempfile.mkdtemp(prefix="cg-tls-")
    config = Path(run_dir) / "gateway.yaml"
    config.write_text(CONFIG)
    environ = gateway_environ("127.0.0.1:1", redis_url, run_dir) | {
        "TEST_API_ADDR": server.address,
        "TEST_CA": str(gateway_pki.ca),
        "TEST_CLIENT_CERT": str(gateway_pki.client_cert),
        "TEST_CLIENT_KEY": str(gateway_pki.client_key),
    }
    gw = await start(load_settings(config, environ=environ), extra_sinks=[MemorySink()])
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}") as channel:
            result: gateway_pb2.ExecutionResult = await gateway_pb2_grpc.CapabilityGatewayStub(
                channel
            ).Invoke(
                gateway_pb2.InvokeRequest(capability_id="secure.read", input_json=b"{}"),
                metadata=[("authorization", f"Bearer {token('alice')}")],
                timeout=10,
            )
    finally:
        await gw.stop(0.5)
        await server.stop()
    return result, server


async def test_mtls_to_the_configured_server_name(
    tmp_path: Path, redis_server: RedisProcess
) -> None:
    pki = make_pki(tmp_path, "api.test")
    result, server = await _call(pki, pki, redis_server.url)
    assert result.WhichOneof("outcome") == "completed", result
    assert orjson.loads(result.completed.output_json) == {"ok": True}
    [seen] = server.seen
    assert seen.header("host") == "api.test"
    assert seen.peer_cert is not None  # the gateway presented its client certificate


async def test_a_server_the_ca_did_not_sign_gets_nothing(
    tmp_path: Path, redis_server: RedisProcess
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ours, theirs = make_pki(tmp_path / "a", "api.test"), make_pki(tmp_path / "b", "api.test")
    result, server = await _call(theirs, ours, redis_server.url)
    code = types_pb2.ErrorCode.Name(result.failed.code)
    assert code == "ERROR_CODE_UPSTREAM_UNAVAILABLE", result
    assert result.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
    assert server.seen == []


async def test_http2_is_spoken_where_the_server_offers_it(
    tmp_path: Path, redis_server: RedisProcess
) -> None:
    pki = make_pki(tmp_path, "api.test")
    server = await H2Server(_server_context(pki, pki), b'{"over": "h2"}').start()
    run_dir = tempfile.mkdtemp(prefix="cg-h2-")
    config = Path(run_dir) / "gateway.yaml"
    config.write_text(CONFIG)
    environ = gateway_environ("127.0.0.1:1", redis_server.url, run_dir) | {
        "TEST_API_ADDR": server.address,
        "TEST_CA": str(pki.ca),
        "TEST_CLIENT_CERT": str(pki.client_cert),
        "TEST_CLIENT_KEY": str(pki.client_key),
    }
    gw = await start(load_settings(config, environ=environ), extra_sinks=[MemorySink()])
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}") as channel:
            result: gateway_pb2.ExecutionResult = await gateway_pb2_grpc.CapabilityGatewayStub(
                channel
            ).Invoke(
                gateway_pb2.InvokeRequest(capability_id="secure.read", input_json=b"{}"),
                metadata=[("authorization", f"Bearer {token('alice')}")],
                timeout=10,
            )
    finally:
        await gw.stop(0.5)
        await server.stop()
    assert result.WhichOneof("outcome") == "completed", result
    assert orjson.loads(result.completed.output_json) == {"over": "h2"}
    assert server.alpn == ["h2"]
    [request] = server.requests
    assert (request[":method"], request[":path"], request[":authority"]) == (
        "GET",
        "/thing",
        "api.test",
    )
