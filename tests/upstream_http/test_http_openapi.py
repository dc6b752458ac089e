"""`capgate config openapi`: capabilities drafted from an OpenAPI 3 document load as they are
printed (hidden until exposed), map what can be mapped safely and list what cannot; an
exposed draft calls the real HTTP server with the request its operation describes."""

from __future__ import annotations

import io
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import grpc
import orjson
import pytest
import yaml

from capgate.v1 import gateway_pb2, gateway_pb2_grpc
from gateway.audit.sinks import MemorySink
from gateway.cli.config import main as config_main
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import token
from tests.upstream_http.httpserver import Answer, HttpServer

pytestmark = pytest.mark.integration

SPEC = Path(__file__).parent / "data" / "files-openapi.yaml"
HEAD = """version: 1
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
  api: {kind: http, address: "{{ env.TEST_API_ADDR }}"}
audit:
  sinks: []
redis:
  url: "{{ env.TEST_REDIS_URL }}"
  key_prefix: capgate-test-openapi
"""


def _draft() -> tuple[list[dict[str, object]], str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        assert config_main(["openapi", str(SPEC), "--upstream", "api"]) == 0
    return yaml.safe_load(out.getvalue())["capabilities"], err.getvalue()


def test_what_maps_is_drafted_hidden_and_what_does_not_is_listed() -> None:
    capabilities, skipped = _draft()
    assert [(c["id"], c["side_effect"], c["expose"]) for c in capabilities] == [
        ("api.get_file", "read", {}),
        ("api.delete_file", "destructive", {}),
        ("api.create_file", "write", {}),
    ]
    assert capabilities[0]["http"] == {
        "method": "GET",
        "path": "/folders/{folder}/files/{name}",
        "query": ["version"],
    }
    assert skipped.splitlines() == [
        "skipped GET /files/{id}.json: a path placeholder is not a whole segment, or a segment "
        "is empty",
        "skipped GET /search: query parameter tags is not a scalar",
        "skipped GET /me: header parameter X-Token: only path and query are mapped",
    ]


async def test_an_exposed_draft_calls_the_operation(redis_server: RedisProcess) -> None:
    capabilities, _ = _draft()
    for capability in capabilities:
        capability["expose"] = {"agent": True}
    run_dir = tempfile.mkdtemp(prefix="cg-oa-")
    config = Path(run_dir) / "gateway.yaml"
    config.write_text(HEAD + yaml.safe_dump({"capabilities": capabilities}))
    server = await HttpServer().start()
    server.reset(Answer(body=b'{"name": "n.txt", "text": "hi"}'))
    environ = gateway_environ("127.0.0.1:1", redis_server.url, run_dir)
    environ["TEST_API_ADDR"] = server.address
    gw = await start(load_settings(config, environ=environ), extra_sinks=[MemorySink()])
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}") as channel:
            value = {"folder": "docs", "name": "n.txt", "text": "hi"}
            result = await gateway_pb2_grpc.CapabilityGatewayStub(channel).Invoke(
                gateway_pb2.InvokeRequest(
                    capability_id="api.create_file", input_json=orjson.dumps(value)
                ),
                metadata=[("authorization", f"Bearer {token('alice')}")],
                timeout=10,
            )
    finally:
        await gw.stop(0.5)
        await server.stop()
    assert result.WhichOneof("outcome") == "completed", result
    [seen] = server.seen
    assert (seen.method, seen.target) == ("POST", "/folders/docs/files")
    assert orjson.loads(seen.body) == {"name": "n.txt", "text": "hi"}
