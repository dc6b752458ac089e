"""JSON ⇄ protobuf transcoding: exact round trips, the proto3 JSON mapping's forms, and
errors that name the path but never the value (DESIGN §12)."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest
from google.protobuf import json_format
from google.protobuf.descriptor_pool import DescriptorPool
from upstreamkit import FULL_SINK, I64_MAX, I64_MIN, U64_MAX

from examples.orders.book import order_json, seed_orders
from gateway.errors import Code
from gateway.upstream.errors import TranscodeError
from gateway.upstream.state import ExecutionState, state_of
from gateway.upstream.transcode import MessageCodec

SENTINEL = "SENTINEL-7f3a"


def codec(pool: DescriptorPool, name: str, **kw: Any) -> MessageCodec:
    return MessageCodec(pool.FindMessageTypeByName(name), **kw)


def roundtrip(c: MessageCodec, value: dict[str, Any]) -> Any:
    # Through the wire bytes, as the upstream would see and answer them.
    message = c.to_message(value)
    return c.to_json(c.message_class.FromString(message.SerializeToString()))


def test_every_field_shape_round_trips_exactly(kitchen_pool: DescriptorPool) -> None:
    c = codec(kitchen_pool, "kitchen.v1.Sink")
    out = roundtrip(c, FULL_SINK)
    for key, expected in FULL_SINK.items():
        assert out[key] == expected, key
    # Exact ints, not floats or strings: orjson writes them as JSON integers.
    assert orjson.loads(orjson.dumps(out))["scalars"]["u64"] == U64_MAX
    assert type(out["attrs"]["n"]) is int
    assert type(out["attrs"]["x"]) is float


def test_int64_stays_an_exact_integer_where_proto3_json_writes_a_string(
    kitchen_pool: DescriptorPool,
) -> None:
    c = codec(kitchen_pool, "kitchen.v1.Inner")
    message = c.to_message({"values": [2**53 + 1, I64_MAX, I64_MIN]})
    assert json_format.MessageToDict(message)["values"][0] == "9007199254740993"
    assert c.to_json(message)["values"] == [2**53 + 1, I64_MAX, I64_MIN]


def test_defaults_are_printed_and_presence_fields_only_when_set(
    kitchen_pool: DescriptorPool,
) -> None:
    c = codec(kitchen_pool, "kitchen.v1.Sink")
    out = c.to_json(c.to_message({}))
    assert out["colors"] == []
    assert out["by_id"] == {}
    assert out["blobs"] == []
    for presence in ("scalars", "inner", "maybe", "as_text", "at", "big", "anything"):
        assert presence not in out
    scalars = codec(kitchen_pool, "kitchen.v1.Scalars").to_json(
        codec(kitchen_pool, "kitchen.v1.Scalars").message_class()
    )
    assert scalars["i64"] == 0
    assert scalars["color"] == "COLOR_UNSPECIFIED"
    assert scalars["blob"] == ""
    sparse = codec(kitchen_pool, "kitchen.v1.Scalars", include_defaults=False)
    assert sparse.to_json(sparse.to_message({"i32": 5, "text": ""})) == {"i32": 5}


def test_float32_prints_the_shortest_decimal_and_nan_has_no_json_form(
    kitchen_pool: DescriptorPool,
) -> None:
    c = codec(kitchen_pool, "kitchen.v1.Scalars")
    assert c.to_json(c.to_message({"fl": 0.1}))["fl"] == 0.1
    assert c.to_json(c.to_message({"fl": 3.4028234663852886e38}))["fl"] == 3.4028235e38
    with pytest.raises(TranscodeError) as caught:
        c.to_json(c.message_class(db=math.nan))
    assert caught.value.path == "$.db"
    assert caught.value.direction == "response"


def test_null_means_not_set_and_a_value_field_keeps_it(kitchen_pool: DescriptorPool) -> None:
    c = codec(kitchen_pool, "kitchen.v1.Sink")
    message = c.to_message({"inner": None, "big": None, "maybe": None, "anything": None})
    assert not message.HasField("inner")
    assert not message.HasField("big")
    assert not message.HasField("maybe")
    assert message.HasField("anything")
    assert c.to_json(message)["anything"] is None


def test_bytes_accept_url_safe_and_unpadded_base64(kitchen_pool: DescriptorPool) -> None:
    c = codec(kitchen_pool, "kitchen.v1.Scalars")
    assert c.to_message({"blob": "_-8"}).blob == b"\xff\xef"
    assert c.to_json(c.to_message({"blob": "_-8"}))["blob"] == "/+8="


def test_integral_floats_are_integers_as_json_schema_says(kitchen_pool: DescriptorPool) -> None:
    c = codec(kitchen_pool, "kitchen.v1.Scalars")
    assert c.to_message({"i64": 5.0, "u32": 1e3}).i64 == 5
    with pytest.raises(TranscodeError, match="expected an integer"):
        c.to_message({"i64": 5.5})


@pytest.mark.parametrize(
    ("value", "path", "message"),
    [
        ({"nope": SENTINEL}, "$.nope", "unknown field"),
        ({"inner": {"name": "a", SENTINEL: 1}}, f"$.inner.{SENTINEL}", "unknown field"),
        ({"scalars": {"i32": 2**31}}, "$.scalars.i32", "out of range"),
        ({"scalars": {"u64": -1}}, "$.scalars.u64", "out of range"),
        ({"scalars": {"i64": 2**63}}, "$.scalars.i64", "out of range"),
        ({"scalars": {"flag": 1}}, "$.scalars.flag", "expected a boolean"),
        ({"scalars": {"i32": True}}, "$.scalars.i32", "expected an integer"),
        ({"scalars": {"db": "1.5"}}, "$.scalars.db", "expected a number"),
        ({"scalars": {"fl": 1e39}}, "$.scalars.fl", "32-bit float"),
        ({"scalars": {"text": 5}}, "$.scalars.text", "expected a string"),
        ({"scalars": {"blob": f"{SENTINEL}!"}}, "$.scalars.blob", "base64"),
        ({"scalars": {"color": SENTINEL}}, "$.scalars.color", "kitchen.v1.Color names"),
        ({"scalars": {"color": 1}}, "$.scalars.color", "kitchen.v1.Color names"),
        (
            {"inners": [{"name": "ok"}, {"values": [1, SENTINEL]}]},
            "$.inners[1].values[1]",
            "expected an integer",
        ),
        ({"inners": {"name": "x"}}, "$.inners", "expected an array"),
        ({"by_id": {SENTINEL: "x"}}, f"$.by_id.{SENTINEL}", "map key must be an integer"),
        ({"by_code": {"-1": "COLOR_RED"}}, "$.by_code.-1", "map key must be an integer"),
        ({"by_flag": {"yes": 1}}, "$.by_flag.yes", "true or false"),
        ({"by_name": {"k": {"values": "x"}}}, "$.by_name.k.values", "expected an array"),
        ({"as_text": "a", "as_number": 1}, "$.as_number", "only one field of 'choice'"),
        ({"at": SENTINEL}, "$.at", "RFC 3339"),
        ({"ttl": "5 minutes"}, "$.ttl", "duration"),
        ({"attrs": [1]}, "$.attrs", "expected an object"),
        ({"attrs": {"deep": {"n": 2**53 + 1}}}, "$.attrs.deep.n", "±2^53"),
        ({"list": [1, [2**60]]}, "$.list[1][0]", "±2^53"),
        ({"big": "12"}, "$.big", "expected an integer"),
        ({"nothing": {"x": 1}}, "$.nothing.x", "unknown field"),
        ([1, 2], "$", "expected an object"),
    ],
)
def test_request_errors_name_the_path_and_never_the_value(
    kitchen_pool: DescriptorPool, value: Any, path: str, message: str
) -> None:
    c = codec(kitchen_pool, "kitchen.v1.Sink")
    with pytest.raises(TranscodeError) as caught:
        c.to_message(value)
    err = caught.value
    assert (err.direction, err.path) == ("request", path)
    assert message in err.message
    assert SENTINEL not in err.message


def test_request_errors_become_input_invalid_and_response_errors_output_invalid(
    kitchen_pool: DescriptorPool,
) -> None:
    c = codec(kitchen_pool, "kitchen.v1.Sink")
    with pytest.raises(TranscodeError) as caught:
        c.to_message({"nope": 1})
    request_error = caught.value.to_capability_error()
    assert request_error.code is Code.INPUT_INVALID
    assert not request_error.executed
    assert [(i.path, i.message) for i in request_error.issues] == [("$.nope", "unknown field")]
    assert state_of(request_error) is ExecutionState.NOT_STARTED
    response_error = TranscodeError("response", "$.db", "non-finite").to_capability_error()
    assert response_error.code is Code.OUTPUT_INVALID
    assert response_error.executed
    assert state_of(response_error) is ExecutionState.COMPLETED
    assert not response_error.exposed
    assert response_error.public_message == "The operation failed."


def test_open_enums_keep_unknown_numbers(kitchen_pool: DescriptorPool) -> None:
    c = codec(kitchen_pool, "kitchen.v1.Scalars")
    assert c.to_json(c.message_class(color=9))["color"] == 9


def test_recursive_messages_transcode_at_any_depth(kitchen_pool: DescriptorPool) -> None:
    c = codec(kitchen_pool, "kitchen.v1.Node", include_defaults=False)
    value: dict[str, Any] = {"name": "leaf"}
    for depth in range(40):
        value = {"name": f"n{depth}", "children": [value], "parent": {"name": "p"}}
    assert roundtrip(c, value) == value


def test_any_uses_the_upstreams_own_pool(kitchen_pool: DescriptorPool) -> None:
    c = codec(kitchen_pool, "kitchen.v1.Sink")
    extra = {"@type": "type.googleapis.com/kitchen.v1.Inner", "name": "packed", "values": ["5"]}
    assert roundtrip(c, {"extra": extra})["extra"] == extra
    with pytest.raises(TranscodeError, match=r"\$\.extra"):
        c.to_message({"extra": {"@type": "type.googleapis.com/kitchen.v1.Missing"}})


def test_the_orders_reply_is_the_same_json_as_the_json_native_contract(
    orders_pool: DescriptorPool,
) -> None:
    c = codec(orders_pool, "orders.v1.Order")
    for order in seed_orders().values():
        reply = c.message_class.FromString(order.SerializeToString())
        assert c.to_json(reply) == order_json(order)
