"""What an entry answers for of the input (ADR 0024 as amended by issue 29): the validated
input written with sorted keys as the upstream would be sent it. Inputs that differ only in
spelling or key order share an entry; a number written differently (2 and 2.0, both valid
against `type: integer`) does not: the call with 2.0 may go differently upstream (here its
input mapping fails), so the answer the upstream gave for 2 never stands in for it."""

from __future__ import annotations

from capgate.v1 import gateway_pb2, types_pb2
from tests.cache.test_cache_flow import completed_cache_field, output
from tests.gateway.harness import Env, token

LIST = "ListOrders"


async def _invoke(env: Env, raw: bytes) -> gateway_pb2.ExecutionResult:
    request = gateway_pb2.InvokeRequest(capability_id="orders.mine", input_json=raw)
    bearer = [("authorization", f"Bearer {token('alice', customer='c-2')}")]
    return await env.gateway().Invoke(request, metadata=bearer, timeout=10)


async def test_an_integer_and_the_same_number_as_a_float_are_two_entries(env: Env) -> None:
    first = await _invoke(env, b'{"size": 2}')
    output(first)
    assert await env.upstream_calls(LIST) == 1
    again = await _invoke(env, b'{ "size":2 }')  # another spelling of the same JSON
    output(again)
    assert await completed_cache_field(env, again) == "hit"
    # 2.0 passes `type: integer`; it is not the input the entry answers for: it fails as it
    # does uncached (its mapping to the int32 page_size), never the entry of 2.
    floated = await _invoke(env, b'{"size": 2.0}')
    assert floated.WhichOneof("outcome") == "failed", floated
    assert floated.failed.code == types_pb2.ERROR_CODE_EXECUTION_FAILED
    assert await env.upstream_calls(LIST) == 1
