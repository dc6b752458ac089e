"""A compressing upstream (nginx with `gzip on` compresses whenever the client accepts it):
capgate asks for `accept-encoding: identity`, because it reads the body raw and counts those
bytes against max_response_bytes; the real server below gzips whenever it is allowed to."""

from __future__ import annotations

import gzip

import orjson
import pytest

from capgate.v1 import types_pb2
from tests.upstream_http.conftest import HttpEnv
from tests.upstream_http.httpserver import Answer, Handler, Seen

pytestmark = pytest.mark.integration


def gzipping(body: bytes) -> Handler:
    """A handler answering `body`, gzip-encoded whenever the request accepts gzip."""

    def handle(seen: Seen) -> Answer:
        accepted = (seen.header("accept-encoding") or "").lower()
        headers = [("content-type", "application/json")]
        if "gzip" in accepted or "*" in accepted:
            return Answer(200, gzip.compress(body), [*headers, ("content-encoding", "gzip")])
        return Answer(200, body, headers)

    return handle


async def test_a_compressing_upstream_answers_identity_and_the_call_completes(
    env: HttpEnv,
) -> None:
    env.api.handler = gzipping(b'{"id": "file-1"}')
    result = await env.invoke("files.write", {"folder": "f", "content": "c"})
    assert result.WhichOneof("outcome") == "completed", result
    assert orjson.loads(result.completed.output_json) == {"id": "file-1"}
    assert result.execution_state == types_pb2.EXECUTION_STATE_COMPLETED
    [seen] = env.api.seen
    assert seen.header("accept-encoding") == "identity"
