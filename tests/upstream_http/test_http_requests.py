"""`kind: http` through the real gateway and a real HTTP server: what goes out (URL, headers,
body) and No SSRF by construction — a value can neither change the host nor add a path
segment, a query or a fragment; the request the server actually received is asserted."""

from __future__ import annotations

from urllib.parse import unquote

import orjson
import pytest

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, types_pb2
from gateway.upstream.httpclient import HttpClients
from gateway.upstream.spec import Upstream
from tests.gateway.harness import token
from tests.upstream_http.conftest import HttpEnv
from tests.upstream_http.httpserver import Answer

pytestmark = pytest.mark.integration


def _code(result: object) -> str:
    return types_pb2.ErrorCode.Name(result.failed.code)  # type: ignore[attr-defined]


async def test_path_query_and_headers_go_out_as_configured(env: HttpEnv) -> None:
    env.api.reset(Answer(body=b'{"text": "hello"}'))
    result = await env.invoke(
        "files.read", {"folder": "docs", "name": "a b.txt", "version": 3, "raw": True}
    )
    assert result.WhichOneof("outcome") == "completed", result
    assert orjson.loads(result.completed.output_json) == {"text": "hello"}
    assert result.execution_state == types_pb2.EXECUTION_STATE_COMPLETED
    [seen] = env.api.seen
    assert (seen.method, seen.target) == (
        "GET",
        "/api/v1/folders/docs/files/a%20b.txt?version=3&raw=true",
    )
    assert seen.header("host") == env.api.address
    assert seen.header("authorization") == "Bearer static-upstream-credential"
    assert seen.header("x-capgate-execution-id") == result.execution_id
    assert seen.header("x-capgate-actor-token")  # the gateway-signed actor token (§12)
    assert seen.body == b""


async def test_the_body_is_the_input_without_what_the_url_took(env: HttpEnv) -> None:
    env.api.reset(Answer(body=b'{"id": "f-1"}'))
    result = await env.invoke("files.write", {"folder": "docs", "content": "x"})
    assert result.WhichOneof("outcome") == "completed", result
    [seen] = env.api.seen
    assert (seen.method, seen.target) == ("PUT", "/api/v1/folders/docs/files")
    assert orjson.loads(seen.body) == {"content": "x"}
    assert seen.header("content-type") == "application/json"


HOSTILE = [
    "../admin",
    "%2e%2e",
    "%2E%2E%2Fadmin",
    "//evil.example",
    "@evil.example",
    "user:pass@evil.example",
    "evil.example:80",
    "http://evil.example/",
    "?x=1",
    "#frag",
    "a/b",
    "a\\b",
    "a\r\nHost: evil.example",
    "\u2025",  # two-dot leader
    "\uff0e\uff0e",  # fullwidth full stops
    "\u3002\u3002",  # ideographic full stops
    "..;",
    " ..",
    "\x00",
]


@pytest.mark.parametrize("value", HOSTILE)
async def test_a_value_fills_exactly_one_segment_of_the_configured_host(
    env: HttpEnv, value: str
) -> None:
    env.api.reset(Answer(body=b"{}"))
    result = await env.invoke("files.read", {"folder": value, "name": "n", "version": 1})
    if "\x00" in value:  # refused at the door (policies would read it only up to the NUL)
        assert result.failed.code == types_pb2.ERROR_CODE_INPUT_INVALID, result
        assert env.api.seen == [] and env.other.seen == []
        return
    assert result.WhichOneof("outcome") == "completed", result
    [seen] = env.api.seen
    assert env.other.seen == []
    assert seen.header("host") == env.api.address
    path, _, query = seen.target.partition("?")
    assert query == "version=1"
    segments = path.split("/")
    assert segments[:4] == ["", "api", "v1", "folders"]
    assert segments[5:] == ["files", "n"]  # the value took exactly one segment
    segment = segments[4]
    # Only unreserved characters and %XX escapes: nothing a server splits, decodes to a
    # dot segment or reads as another part of the URL.
    assert all(c.isalnum() or c in "-._~%" for c in segment), segment
    assert segment not in ("", ".", "..")
    assert unquote(segment) == value


@pytest.mark.parametrize("value", ["..", ".", ""])
async def test_dot_segments_and_empty_segments_are_refused_before_sending(
    env: HttpEnv, value: str
) -> None:
    result = await env.invoke("files.read", {"folder": value, "name": "n"})
    assert _code(result) == "ERROR_CODE_INPUT_INVALID", result
    assert [i.path for i in result.failed.issues] == ["$.folder"]
    assert result.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
    assert env.api.seen == []


async def test_a_query_value_cannot_add_parameters(env: HttpEnv) -> None:
    env.api.reset(Answer(body=b"{}"))
    result = await env.invoke("files.read", {"folder": "f", "name": "x&admin=1#?"})
    assert result.WhichOneof("outcome") == "completed", result
    [seen] = env.api.seen
    assert seen.target == "/api/v1/folders/f/files/x%26admin%3D1%23%3F"


async def test_an_input_key_named_like_a_url_part_is_not_a_url_part(env: HttpEnv) -> None:
    # additionalProperties: false refuses it; the host is config, never input.
    result = await env.invoke("files.read", {"folder": "f", "name": "n", "host": "evil"})
    assert _code(result) == "ERROR_CODE_INPUT_INVALID", result
    assert env.api.seen == []


async def test_map_input_builds_the_value_the_request_is_built_from(env: HttpEnv) -> None:
    env.api.reset(Answer(body=b'{"ok": true}'))
    result = await env.invoke("files.mine", {"name": "../../etc"})
    assert result.WhichOneof("outcome") == "completed", result
    [seen] = env.api.seen
    assert seen.target == "/api/v1/folders/alice/files/..%2F..%2Fetc"


async def test_a_cached_read_reaches_the_server_once(env: HttpEnv) -> None:
    env.api.reset(Answer(body=b'{"n": 1}'))
    first = await env.invoke("files.cached", {})
    second = await env.invoke("files.cached", {})
    assert first.completed.output_json == second.completed.output_json, (first, second)
    assert (first.attempts, second.attempts) == (1, 0)
    assert len(env.api.seen) == 1


async def test_a_lone_surrogate_is_refused_not_sent(env: HttpEnv) -> None:
    raw = b'{"folder": "\\ud800", "name": "n"}'
    result = await gateway_pb2_grpc.CapabilityGatewayStub(env.channel).Invoke(
        gateway_pb2.InvokeRequest(capability_id="files.read", input_json=raw),
        metadata=[("authorization", f"Bearer {token('alice')}")],
        timeout=10,
    )
    assert result.WhichOneof("outcome") == "failed", result
    assert _code(result) == "ERROR_CODE_INPUT_INVALID", result
    # The parser refuses it before any stage (gateway/upstream/http.py would too).
    assert [(i.path, i.message) for i in result.failed.issues] == [("$", "input is not valid JSON")]
    assert result.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
    assert env.api.seen == []


async def test_clients_are_pooled_per_upstream_and_kept_while_settings_stay() -> None:
    clients = HttpClients()
    up = Upstream(name="api", address="127.0.0.1:1", kind="http")
    first = clients.client(up)
    assert clients.client(Upstream(name="api", address="127.0.0.1:1", kind="http")) is first
    changed = clients.client(Upstream(name="api", address="127.0.0.1:2", kind="http"))
    assert changed is not first
    await clients.close()
    assert first.is_closed and changed.is_closed  # the retired one too
