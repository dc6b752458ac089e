"""JSON forms of protobuf's well-known types (the proto3 JSON mapping), used by transcode.py.

Each well-known message becomes a JSON scalar or value instead of an object: Timestamp and
Duration are strings, wrappers are nullable scalars, Struct/Value/ListValue are any JSON. The
message classes come from the field's own pool (a private upstream pool has its own Timestamp
class; an instance of the default pool's class would be refused by its parent).

Value numbers are doubles on the wire: integers beyond ±2^53 are refused on the way in rather
than silently rounded, and integral doubles come back as JSON integers (250.0 → 250) so that
CEL comparisons and approval hashes see the number the caller meant (DESIGN §2).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

Decode = Callable[[Any, str], Any]
Encode = Callable[[Any, str], Any]
ScalarCodec = Callable[[FieldDescriptor], tuple[Decode, Encode | None]]

_SAFE_INT: Final = 2**53
WRAPPERS: Final = frozenset(
    f"google.protobuf.{name}Value"
    for name in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")
)
_STRING_FORMS: Final = {
    "google.protobuf.Timestamp": "an RFC 3339 timestamp",
    "google.protobuf.Duration": "a duration",
    "google.protobuf.FieldMask": "a field mask",
}


class FieldError(Exception):
    """A value that does not fit at `path`; `message` never contains the value."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(path, message)
        self.path = path
        self.message = message


def wkt_codec(descriptor: Descriptor, scalar: ScalarCodec) -> tuple[Decode, Encode] | None:
    """Decode/encode functions for a well-known message type, or None for ordinary messages."""
    name = descriptor.full_name
    cls = message_factory.GetMessageClass(descriptor)
    string_form = _STRING_FORMS.get(name)
    if string_form is not None:
        return _string_form(cls, string_form)
    if name in WRAPPERS:
        return _wrapper(cls, *scalar(descriptor.fields_by_name["value"]))
    if name == "google.protobuf.Value":
        return _value_codec(cls)
    if name == "google.protobuf.Struct":
        return _struct_codec(cls)
    if name == "google.protobuf.ListValue":
        return _list_codec(cls)
    if name == "google.protobuf.Any":
        return _any_codec(cls, descriptor)
    return None


def _string_form(cls: type[Message], what: str) -> tuple[Decode, Encode]:
    def decode(value: Any, path: str) -> Message:
        if type(value) is not str:
            raise FieldError(path, f"expected {what} string")
        msg = cls()
        try:
            msg.FromJsonString(value)  # type: ignore[attr-defined]
        except ValueError:
            raise FieldError(path, f"expected {what} string") from None
        return msg

    def encode(msg: Any, path: str) -> str:
        try:
            text: str = msg.ToJsonString()
        except ValueError:
            raise FieldError(path, f"{what} out of range") from None
        return text

    return decode, encode


def _wrapper(cls: type[Message], decode_one: Decode, encode_one: Encode | None) -> tuple[
    Decode, Encode
]:
    def decode(value: Any, path: str) -> Message:
        return cls(value=decode_one(value, path))

    def encode(msg: Any, path: str) -> Any:
        return msg.value if encode_one is None else encode_one(msg.value, path)

    return decode, encode


def _value_codec(cls: type[Message]) -> tuple[Decode, Encode]:
    def decode(value: Any, path: str) -> Message:
        msg = cls()
        _fill_value(msg, value, path)
        return msg

    return decode, _read_value


def _struct_codec(cls: type[Message]) -> tuple[Decode, Encode]:
    def decode(value: Any, path: str) -> Message:
        if type(value) is not dict:
            raise FieldError(path, "expected an object")
        msg = cls()
        _fill_struct(msg, value, path)
        return msg

    def encode(msg: Any, path: str) -> dict[str, Any]:
        return {k: _read_value(v, f"{path}.{k}") for k, v in sorted(msg.fields.items())}

    return decode, encode


def _list_codec(cls: type[Message]) -> tuple[Decode, Encode]:
    def decode(value: Any, path: str) -> Message:
        if type(value) is not list:
            raise FieldError(path, "expected an array")
        msg = cls()
        _fill_list(msg, value, path)
        return msg

    def encode(msg: Any, path: str) -> list[Any]:
        return [_read_value(v, f"{path}[{i}]") for i, v in enumerate(msg.values)]

    return decode, encode


def _fill_value(msg: Any, value: Any, path: str) -> None:
    kind = type(value)
    if value is None:
        msg.null_value = 0
    elif kind is bool:
        msg.bool_value = value
    elif kind is int:
        if not -_SAFE_INT <= value <= _SAFE_INT:
            raise FieldError(path, "integer beyond ±2^53 cannot be carried by a Value")
        msg.number_value = value
    elif kind is float:
        msg.number_value = value
    elif kind is str:
        msg.string_value = value
    elif kind is dict:
        msg.struct_value.SetInParent()
        _fill_struct(msg.struct_value, value, path)
    elif kind is list:
        msg.list_value.SetInParent()
        _fill_list(msg.list_value, value, path)
    else:
        raise FieldError(path, "expected a JSON value")


def _fill_struct(msg: Any, value: dict[str, Any], path: str) -> None:
    for key, item in value.items():
        _fill_value(msg.fields[key], item, f"{path}.{key}")


def _fill_list(msg: Any, value: list[Any], path: str) -> None:
    for i, item in enumerate(value):
        _fill_value(msg.values.add(), item, f"{path}[{i}]")


def _read_value(msg: Any, path: str) -> Any:
    kind = msg.WhichOneof("kind")
    if kind == "number_value":
        number: float = msg.number_value
        if not math.isfinite(number):
            raise FieldError(path, "non-finite number has no JSON form")
        if number.is_integer() and -_SAFE_INT <= number <= _SAFE_INT:
            return int(number)
        return number
    if kind == "string_value" or kind == "bool_value":
        return getattr(msg, kind)
    if kind == "struct_value":
        return {k: _read_value(v, f"{path}.{k}") for k, v in sorted(msg.struct_value.fields.items())}
    if kind == "list_value":
        return [_read_value(v, f"{path}[{i}]") for i, v in enumerate(msg.list_value.values)]
    return None  # null_value or unset


def _any_codec(cls: type[Message], descriptor: Descriptor) -> tuple[Decode, Encode]:
    # Any needs the packed type's descriptor; the proto3 JSON library resolves it from the
    # upstream's pool. Values inside keep proto3 JSON forms (64-bit integers as strings).
    pool = descriptor.file.pool

    def decode(value: Any, path: str) -> Message:
        if type(value) is not dict:
            raise FieldError(path, "expected an object with @type")
        try:
            return json_format.ParseDict(value, cls(), descriptor_pool=pool)
        except json_format.ParseError:
            raise FieldError(path, "invalid google.protobuf.Any") from None

    def encode(msg: Any, path: str) -> Any:
        try:
            return json_format.MessageToDict(
                msg, preserving_proto_field_name=True, descriptor_pool=pool
            )
        except (TypeError, KeyError):
            raise FieldError(path, "google.protobuf.Any of an unknown type") from None

    return decode, encode
