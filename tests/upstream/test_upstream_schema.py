"""Derived input schemas: golden files for the example and test messages, and agreement with
the transcoder (a value the schema accepts transcodes; what it refuses, stage 5 refuses).

Regenerate the goldens with CAPGATE_UPDATE_GOLDENS=1 after an intended change.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import fastjsonschema
import orjson
import pytest
from google.protobuf.descriptor_pool import DescriptorPool
from upstreamkit import FULL_SINK

from gateway.upstream.schema import derive_schema
from gateway.upstream.transcode import MessageCodec

GOLDEN = Path(__file__).parent / "golden"
MESSAGES = [
    ("orders", "orders.v1.GetOrderRequest"),
    ("orders", "orders.v1.ListOrdersRequest"),
    ("orders", "orders.v1.RefundOrderRequest"),
    ("orders", "orders.v1.CancelOrderRequest"),
    ("orders", "orders.v1.Order"),
    ("kitchen", "kitchen.v1.Sink"),
    ("kitchen", "kitchen.v1.Node"),
]


@pytest.fixture
def pools(orders_pool: DescriptorPool, kitchen_pool: DescriptorPool) -> dict[str, DescriptorPool]:
    return {"orders": orders_pool, "kitchen": kitchen_pool}


def _dump(schema: dict[str, Any]) -> bytes:
    return orjson.dumps(schema, option=orjson.OPT_INDENT_2) + b"\n"


@pytest.mark.parametrize(("pool", "name"), MESSAGES)
def test_derived_schema_matches_its_golden_file(
    pools: dict[str, DescriptorPool], pool: str, name: str
) -> None:
    schema = derive_schema(pools[pool].FindMessageTypeByName(name))
    golden = GOLDEN / f"{name}.schema.json"
    if os.environ.get("CAPGATE_UPDATE_GOLDENS") == "1":
        golden.write_bytes(_dump(schema))
    assert _dump(schema) == golden.read_bytes(), f"stale golden {golden.name}"


def test_derivation_is_deterministic(kitchen_pool: DescriptorPool) -> None:
    sink = kitchen_pool.FindMessageTypeByName("kitchen.v1.Sink")
    assert _dump(derive_schema(sink)) == _dump(derive_schema(sink))


def test_the_refund_request_schema_is_what_a_model_needs(orders_pool: DescriptorPool) -> None:
    schema = derive_schema(orders_pool.FindMessageTypeByName("orders.v1.RefundOrderRequest"))
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert schema["additionalProperties"] is False
    assert schema["properties"] == {
        "order_id": {"type": "string"},
        "amount": {"type": "number"},
        "reason": {"type": "string"},
    }


def test_recursion_is_cut_to_anything_after_the_limit(kitchen_pool: DescriptorPool) -> None:
    node = kitchen_pool.FindMessageTypeByName("kitchen.v1.Node")
    schema = derive_schema(node, max_recursion=2)
    child = schema["properties"]["children"]["items"]
    assert child["properties"]["name"] == {"type": "string"}
    assert child["properties"]["parent"] == {}  # the third Node on this path
    shallow = derive_schema(node, max_depth=1)
    assert shallow["properties"]["parent"] == {}


def _validator(pool: DescriptorPool, name: str) -> Any:
    return fastjsonschema.compile(derive_schema(pool.FindMessageTypeByName(name)))


def test_a_value_the_schema_accepts_transcodes(kitchen_pool: DescriptorPool) -> None:
    validate = _validator(kitchen_pool, "kitchen.v1.Sink")
    value = {k: v for k, v in FULL_SINK.items() if k != "extra"}
    validate(value)
    MessageCodec(kitchen_pool.FindMessageTypeByName("kitchen.v1.Sink")).to_message(value)
    validate({"maybe": None, "big": None, "label": None, "anything": None})


@pytest.mark.parametrize(
    "value",
    [
        {"nope": 1},
        {"scalars": {"i32": 2**31}},
        {"scalars": {"u64": -1}},
        {"scalars": {"i64": 2**63}},
        {"scalars": {"fl": 1e39}},
        {"scalars": {"color": "PURPLE"}},
        {"scalars": {"flag": 1}},
        {"inner": {"values": [1.5]}},
        {"by_id": {"x": "y"}},
        {"by_code": {"-1": "COLOR_RED"}},
        {"by_flag": {"yes": 1}},
        {"as_text": "a", "as_inner": {}},
        {"at": "yesterday"},
        {"ttl": "5m"},
        {"attrs": [1]},
        {"list": {}},
        {"nothing": {"x": 1}},
    ],
)
def test_the_schema_refuses_what_the_transcoder_refuses(
    kitchen_pool: DescriptorPool, value: dict[str, Any]
) -> None:
    with pytest.raises(fastjsonschema.JsonSchemaValueException):
        _validator(kitchen_pool, "kitchen.v1.Sink")(value)
