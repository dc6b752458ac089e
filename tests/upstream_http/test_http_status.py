"""`kind: http` answers through the real gateway and a real HTTP server: the status table of
gateway/upstream/http.py, retries within SI-11 and the deadline (Retry-After honoured),
redirects (off, or same origin only), a dead and a silent upstream, strict output JSON."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, types_pb2
from gateway.errors import GENERIC_MESSAGE
from tests.gateway.harness import token
from tests.upstream_http.conftest import HttpEnv
from tests.upstream_http.httpserver import Answer

pytestmark = pytest.mark.integration

READ = {"folder": "f", "name": "n"}
WRITE = {"folder": "f", "content": "c"}


def _code(result: object) -> str:
    return types_pb2.ErrorCode.Name(result.failed.code)  # type: ignore[attr-defined]


def _json(status: int, value: object, *headers: tuple[str, str]) -> Answer:
    return Answer(status, orjson.dumps(value), [("content-type", "application/json"), *headers])


async def test_a_declared_contract_error_is_exposed_sanitised_and_bounded(env: HttpEnv) -> None:
    message = "Name\u202etaken:\r\n  " + "x" * 2000
    env.api.reset(_json(409, {"message": message}))
    result = await env.invoke("files.write", WRITE)
    assert _code(result) == "ERROR_CODE_EXECUTION_FAILED", result
    assert result.failed.expose_to_model
    text = result.failed.message
    assert text.startswith("Nametaken: xxx")
    assert len(text) == 500 and text.endswith("…")
    assert "\u202e" not in text and "\n" not in text
    assert result.execution_state == types_pb2.EXECUTION_STATE_COMPLETED
    assert len(env.api.seen) == 1


async def test_a_contract_error_of_a_text_body(env: HttpEnv) -> None:
    env.api.reset(Answer(404, b"no such file", [("content-type", "text/plain")]))
    result = await env.invoke("files.read", READ)
    assert (_code(result), result.failed.message) == ("ERROR_CODE_EXECUTION_FAILED", "no such file")
    assert result.failed.expose_to_model


@pytest.mark.parametrize(
    ("status", "code"),
    [(401, "ERROR_CODE_UNAUTHENTICATED"), (403, "ERROR_CODE_FORBIDDEN")],
)
async def test_a_refused_credential_maps_like_grpc(env: HttpEnv, status: int, code: str) -> None:
    """401/403 are UNAUTHENTICATED/FORBIDDEN with the table's message (as gRPC's
    UNAUTHENTICATED/PERMISSION_DENIED), COMPLETED; never retried, even for a read."""
    env.api.reset(_json(status, {"message": "secret internals at /srv/x"}), _json(200, {}))
    result = await env.invoke("files.read", READ)
    assert _code(result) == code, result
    assert "secret" not in result.failed.message
    assert result.execution_state == types_pb2.EXECUTION_STATE_COMPLETED
    assert len(env.api.seen) == 1


async def test_a_declared_403_stays_a_contract_error(env: HttpEnv) -> None:
    env.api.reset(_json(403, {"message": "Folder is archived"}))
    result = await env.invoke("files.guarded", {})
    assert _code(result) == "ERROR_CODE_EXECUTION_FAILED", result
    assert result.failed.message == "Folder is archived"
    assert result.failed.expose_to_model


@pytest.mark.parametrize("status", [400, 404, 500, 502])
async def test_other_failures_are_not_exposed(env: HttpEnv, status: int) -> None:
    env.api.reset(_json(status, {"message": "secret internals at /srv/x"}))
    result = await env.invoke("files.write", WRITE)  # declares only 409 and 422
    assert _code(result) == "ERROR_CODE_EXECUTION_FAILED", result
    assert result.failed.message == GENERIC_MESSAGE
    assert not result.failed.expose_to_model
    assert result.execution_state == types_pb2.EXECUTION_STATE_COMPLETED


@pytest.mark.parametrize("status", [429, 503])
async def test_a_retryable_status_is_retried_for_a_read(env: HttpEnv, status: int) -> None:
    env.api.reset(_json(status, {}, ("retry-after", "0")), _json(200, {"ok": True}))
    result = await env.invoke("files.read", READ)
    assert result.WhichOneof("outcome") == "completed", result
    assert result.attempts == 2
    assert len(env.api.seen) == 2
    # The same execution id on every attempt (one execution, two attempts).
    assert len({s.header("x-capgate-execution-id") for s in env.api.seen}) == 1


async def test_a_write_that_is_not_idempotent_is_never_retried(env: HttpEnv) -> None:
    env.api.reset(_json(503, {}), _json(200, {"id": "x"}))
    result = await env.invoke("files.write", WRITE)  # SI-11: retry config has no effect
    assert _code(result) == "ERROR_CODE_UPSTREAM_UNAVAILABLE", result
    assert result.failed.retryable and result.attempts == 1
    assert len(env.api.seen) == 1


async def test_retry_after_beyond_the_deadline_is_not_waited_for(env: HttpEnv) -> None:
    env.api.reset(_json(503, {}, ("retry-after", "3600")), _json(200, {}))
    result = await env.invoke("files.read", READ)
    assert _code(result) == "ERROR_CODE_UPSTREAM_UNAVAILABLE", result
    assert result.attempts == 1 and len(env.api.seen) == 1


async def test_retry_after_as_an_http_date_is_read_against_the_answers_date(env: HttpEnv) -> None:
    date = ("date", "Tue, 01 Dec 2026 10:00:00 GMT")
    later = ("retry-after", "Tue, 01 Dec 2026 11:00:00 GMT")  # one hour: past the deadline
    env.api.reset(_json(503, {}, date, later), _json(200, {}))
    result = await env.invoke("files.read", READ)
    assert _code(result) == "ERROR_CODE_UPSTREAM_UNAVAILABLE", result
    assert len(env.api.seen) == 1


async def test_output_is_strict_json_and_validated(env: HttpEnv) -> None:
    env.api.reset(Answer(200, b'{"id": "a", "id": "b"}'))
    result = await env.invoke("files.write", WRITE)
    assert _code(result) == "ERROR_CODE_OUTPUT_INVALID", result
    assert result.failed.executed_before_failure
    assert result.execution_state == types_pb2.EXECUTION_STATE_COMPLETED
    env.api.reset(_json(200, {"no_id": 1}))  # against output_schema
    result = await env.invoke("files.write", WRITE)
    assert _code(result) == "ERROR_CODE_OUTPUT_INVALID", result


async def test_a_dead_upstream_never_started(env: HttpEnv) -> None:
    result = await env.invoke("dead.read", {})
    assert _code(result) == "ERROR_CODE_UPSTREAM_UNAVAILABLE", result
    assert result.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED


async def test_a_silent_upstream_times_out_unknown(env: HttpEnv) -> None:
    env.api.reset(Answer(hang=True))
    result = await env.invoke("files.slow", {})
    assert result.WhichOneof("outcome") == "cancelled", result
    assert types_pb2.ErrorCode.Name(result.cancelled.code) == "ERROR_CODE_TIMEOUT"
    assert result.execution_state == types_pb2.EXECUTION_STATE_UNKNOWN
    assert len(env.api.seen) == 1


async def test_redirects_are_failures_unless_allowed(env: HttpEnv) -> None:
    env.api.reset(Answer(302, b"", [("location", "/elsewhere")]))
    result = await env.invoke("files.unmoved", {})
    assert _code(result) == "ERROR_CODE_EXECUTION_FAILED", result
    assert result.failed.message == GENERIC_MESSAGE
    assert [s.target for s in env.api.seen] == ["/api/v1/moved"]


async def test_same_origin_redirects_are_followed_up_to_the_limit(env: HttpEnv) -> None:
    env.api.reset(
        Answer(307, b"", [("location", "/step")]),
        Answer(308, b"", [("location", f"http://{env.api.address}/final")]),
        _json(200, {"done": True}),
    )
    result = await env.invoke("files.moved-idempotent", {"a": 1})
    assert result.WhichOneof("outcome") == "completed", result
    assert [(s.method, s.target, s.body) for s in env.api.seen] == [
        ("PUT", "/moved", b'{"a":1}'),
        ("PUT", "/step", b'{"a":1}'),
        ("PUT", "/final", b'{"a":1}'),
    ]
    env.api.reset(Answer(307, b"", [("location", "/again")]))
    result = await env.invoke("files.moved-idempotent", {})
    assert _code(result) == "ERROR_CODE_EXECUTION_FAILED", result
    assert len(env.api.seen) == 3  # the first request and max_redirects: 2


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_a_write_never_follows_a_redirect(env: HttpEnv, status: int) -> None:
    """A POST of a write is never re-sent (301/302 used to re-POST the body to Location)."""
    env.api.reset(Answer(status, b"", [("location", "/elsewhere")]), _json(200, {"ok": 1}))
    result = await env.invoke("files.moved", {"a": 1})
    assert _code(result) == "ERROR_CODE_EXECUTION_FAILED", result
    assert result.execution_state == types_pb2.EXECUTION_STATE_COMPLETED
    assert result.failed.message == GENERIC_MESSAGE
    assert [(s.method, s.target) for s in env.api.seen] == [("POST", "/moved")]


@pytest.mark.parametrize("status", [301, 302, 303])
async def test_a_read_follows_301_302_303_as_a_get_without_body(env: HttpEnv, status: int) -> None:
    env.api.reset(Answer(status, b"", [("location", "/found")]), _json(200, {"hits": 0}))
    result = await env.invoke("files.search", {"q": "x"})
    assert result.WhichOneof("outcome") == "completed", result
    assert [(s.method, s.target, s.body, s.header("content-type")) for s in env.api.seen] == [
        ("POST", "/search", b'{"q":"x"}', "application/json"),
        ("GET", "/found", b"", None),
    ]


@pytest.mark.parametrize("status", [301, 302, 303])
async def test_an_idempotent_write_does_not_follow_301_302_303(env: HttpEnv, status: int) -> None:
    env.api.reset(Answer(status, b"", [("location", "/found")]), _json(200, {"ok": 1}))
    result = await env.invoke("files.moved-idempotent", {"a": 1})
    assert _code(result) == "ERROR_CODE_EXECUTION_FAILED", result
    assert [(s.method, s.target) for s in env.api.seen] == [("PUT", "/moved")]


@pytest.mark.parametrize(
    ("location", "followed"),
    [
        ("/api/v1/there", True),
        ("/api/v1", True),
        ("there", True),  # relative: /api/v1/there
        ("/api/v2/there", False),
        ("/api/v1x/there", False),
        ("/admin", False),
        ("/api/v1/../../admin", False),
        ("/api/v1/%2e%2e/admin", False),
        ("/api/v1/%2E%2E/admin", False),
    ],
)
async def test_a_redirect_outside_the_base_path_is_refused(
    env: HttpEnv, location: str, followed: bool
) -> None:
    env.api.reset(Answer(302, b"", [("location", location)]), _json(200, {"ok": 1}))
    result = await env.invoke("files.moved-below", {})
    assert (result.WhichOneof("outcome") == "completed") is followed, result
    assert len(env.api.seen) == (2 if followed else 1)
    if not followed:
        assert _code(result) == "ERROR_CODE_EXECUTION_FAILED", result
        assert result.execution_state == types_pb2.EXECUTION_STATE_COMPLETED


@pytest.mark.parametrize(
    "location",
    ["http://{other}/x", "//{other}/x", "https://{api}/x", "http://localhost:{port}/x"],
)
async def test_a_redirect_to_another_origin_is_refused(env: HttpEnv, location: str) -> None:
    target = location.format(other=env.other.address, api=env.api.address, port=env.api.port)
    env.api.reset(Answer(302, b"", [("location", target)]))
    result = await env.invoke("files.search", {})
    assert _code(result) == "ERROR_CODE_EXECUTION_FAILED", result
    assert len(env.api.seen) == 1 and env.other.seen == []


async def test_a_caller_that_cancels_closes_the_upstream_request(env: HttpEnv) -> None:
    env.api.reset(Answer(hang=True))
    call = gateway_pb2_grpc.CapabilityGatewayStub(env.channel).Invoke(
        gateway_pb2.InvokeRequest(capability_id="files.slow", input_json=b"{}"),
        metadata=[("authorization", f"Bearer {token('alice')}")],
        timeout=10,
    )
    for _ in range(500):  # bounded: until the request reached the server
        if env.api.seen:
            break
        await asyncio.sleep(0.01)
    assert len(env.api.seen) == 1
    call.cancel()
    for _ in range(500):  # bounded: until the gateway closed that request's connection
        if env.api.closed:
            break
        await asyncio.sleep(0.01)
    assert env.api.closed == env.api.seen
