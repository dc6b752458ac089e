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

__all__ = [
    "WRAPPERS",
    "Decode",
    "Encode",
    "FieldError",
    "wkt_codec",
]

# One-argument converters: a failure raises FieldError and each container on the way out
# prepends its path segment, so the happy path never builds path strings.
Decode = Callable[[Any], Any]
Encode = Callable[[Any], Any]
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
    """A value that does not fit; `message` never contains the value, `path` grows outwards."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.path = ""

    def at(self, segment: str) -> None:
        """Prepend the segment of the enclosing container (`.name` or `[3]`)."""
        self.path = segment + self.path


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
    def decode(value: Any) -> Message:
        if type(value) is not str:
            raise FieldError(f"expected {what} string")
        msg = cls()
        try:
            msg.FromJsonString(value)
        except ValueError:
            raise FieldError(f"expected {what} string") from None
        return msg

    def encode(msg: Any) -> str:
        try:
            text: str = msg.ToJsonString()
        except ValueError:
            raise FieldError(f"{what} out of range") from None
        return text

    return decode, encode


def _wrapper(
    cls: type[Message], decode_one: Decode, encode_one: Encode | None
) -> tuple[Decode, Encode]:
    def decode(value: Any) -> Message:
        return cls(value=decode_one(value))

    def encode(msg: Any) -> Any:
        return msg.value if encode_one is None else encode_one(msg.value)

    return decode, encode


def _value_codec(cls: type[Message]) -> tuple[Decode, Encode]:
    def decode(value: Any) -> Message:
        msg = cls()
        _fill_value(msg, value)
        return msg

    return decode, _read_value


def _struct_codec(cls: type[Message]) -> tuple[Decode, Encode]:
    def decode(value: Any) -> Message:
        if type(value) is not dict:
            raise FieldError("expected an object")
        msg = cls()
        _fill_struct(msg, value)
        return msg

    def encode(msg: Any) -> dict[str, Any]:
        return _read_struct(msg)

    return decode, encode


def _list_codec(cls: type[Message]) -> tuple[Decode, Encode]:
    def decode(value: Any) -> Message:
        if type(value) is not list:
            raise FieldError("expected an array")
        msg = cls()
        _fill_list(msg, value)
        return msg

    return decode, _read_list


def _fill_value(msg: Any, value: Any) -> None:
    kind = type(value)
    if value is None:
        msg.null_value = 0
    elif kind is bool:
        msg.bool_value = value
    elif kind is int:
        if not -_SAFE_INT <= value <= _SAFE_INT:
            raise FieldError("integer beyond ±2^53 cannot be carried by a Value")
        msg.number_value = value
    elif kind is float:
        msg.number_value = value
    elif kind is str:
        msg.string_value = value
    elif kind is dict:
        msg.struct_value.SetInParent()
        _fill_struct(msg.struct_value, value)
    elif kind is list:
        msg.list_value.SetInParent()
        _fill_list(msg.list_value, value)
    else:
        raise FieldError("expected a JSON value")


def _fill_struct(msg: Any, value: dict[str, Any]) -> None:
    key = ""
    try:
        for key, item in value.items():
            _fill_value(msg.fields[key], item)
    except FieldError as err:
        err.at(f".{key}")
        raise


def _fill_list(msg: Any, value: list[Any]) -> None:
    done = 0
    try:
        for item in value:
            _fill_value(msg.values.add(), item)
            done += 1
    except FieldError as err:
        err.at(f"[{done}]")
        raise


def _read_value(msg: Any) -> Any:
    kind = msg.WhichOneof("kind")
    if kind == "number_value":
        number: float = msg.number_value
        if not math.isfinite(number):
            raise FieldError("non-finite number has no JSON form")
        if number.is_integer() and -_SAFE_INT <= number <= _SAFE_INT:
            return int(number)
        return number
    if kind in ("string_value", "bool_value"):
        return getattr(msg, kind)
    if kind == "struct_value":
        return _read_struct(msg.struct_value)
    if kind == "list_value":
        return _read_list(msg.list_value)
    return None  # null_value or unset


def _read_struct(msg: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    key = ""
    try:
        for key, item in sorted(msg.fields.items()):
            out[key] = _read_value(item)
    except FieldError as err:
        err.at(f".{key}")
        raise
    return out


def _read_list(msg: Any) -> list[Any]:
    out: list[Any] = []
    try:
        for item in msg.values:
            out.append(_read_value(item))
    except FieldError as err:
        err.at(f"[{len(out)}]")
        raise
    return out


def _any_codec(cls: type[Message], descriptor: Descriptor) -> tuple[Decode, Encode]:
    # Any needs the packed type's descriptor; the proto3 JSON library resolves it from the
    # upstream's pool. Values inside keep proto3 JSON forms (64-bit integers as strings).
    pool = descriptor.file.pool

    def decode(value: Any) -> Message:
        if type(value) is not dict:
            raise FieldError("expected an object with @type")
        try:
            return json_format.ParseDict(value, cls(), descriptor_pool=pool)
        except json_format.ParseError:
            raise FieldError("invalid google.protobuf.Any") from None

    def encode(msg: Any) -> Any:
        try:
            return json_format.MessageToDict(
                msg, preserving_proto_field_name=True, descriptor_pool=pool
            )
        except (TypeError, KeyError):
            raise FieldError("google.protobuf.Any of an unknown type") from None

    return decode, encode
