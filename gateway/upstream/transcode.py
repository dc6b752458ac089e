"""JSON value ⇄ protobuf message for one message type, prepared once at load.

A hand-written path instead of `json_format.ParseDict`/`MessageToDict` (ADR 0004: about 4x
faster on a 1 KB message, see docs/upstreams.md). Semantics are the proto3 JSON mapping with
the gateway's choices:

- field names are the proto names (snake_case); an unknown field is an error;
- 64-bit integers are JSON integers both ways (proto3 JSON writes strings), so replies stay
  exact and validate against derived schemas; integral floats (1.0) are accepted for integer
  fields because JSON Schema calls them integers;
- enums are value names; bytes are base64 (standard or URL-safe in, standard out);
- null means "not set" (a Value field stores it as null_value);
- non-finite doubles in a reply have no JSON form and are an error;
- error messages and paths never carry the offending value (DESIGN §12).

Nested messages are built as keyword dicts and handed to one constructor call at the top, so
there is no per-level message copy.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
from collections.abc import Callable
from typing import Any, Final, Literal

from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from gateway.upstream.descriptors import real_oneofs
from gateway.upstream.errors import TranscodeError
from gateway.upstream.wellknown import Decode, Encode, FieldError, wkt_codec

_F = FieldDescriptor
INT_RANGES: Final[dict[int, tuple[int, int]]] = {
    **dict.fromkeys((_F.TYPE_INT32, _F.TYPE_SINT32, _F.TYPE_SFIXED32), (-(2**31), 2**31 - 1)),
    **dict.fromkeys((_F.TYPE_UINT32, _F.TYPE_FIXED32), (0, 2**32 - 1)),
    **dict.fromkeys((_F.TYPE_INT64, _F.TYPE_SINT64, _F.TYPE_SFIXED64), (-(2**63), 2**63 - 1)),
    **dict.fromkeys((_F.TYPE_UINT64, _F.TYPE_FIXED64), (0, 2**64 - 1)),
}
FLOAT32_MAX: Final = 3.4028234663852886e38
_INT_KEY = re.compile(r"-?(0|[1-9][0-9]*)")
_URLSAFE = str.maketrans("-_", "+/")


class _Plan:
    """Prepared fields of one message type (filled after creation, so recursion works)."""

    __slots__ = ("by_name", "encoders", "fields")

    def __init__(self) -> None:
        # name -> (decode, null is a value, real oneof name)
        self.fields: dict[str, tuple[Decode, bool, str | None]] = {}
        # (name, encode or None for identity, has presence)
        self.encoders: list[tuple[str, Encode | None, bool]] = []
        self.by_name: dict[str, Encode | None] = {}


class MessageCodec:
    """Transcoder for one message type; build once per method at load, then share."""

    def __init__(self, descriptor: Descriptor, *, include_defaults: bool = True) -> None:
        self.descriptor = descriptor
        self.message_class: type[Message] = message_factory.GetMessageClass(descriptor)
        self._include_defaults = include_defaults
        self._plans: dict[str, _Plan] = {}
        self._decode, self._encode = self._message_codec(descriptor)

    def to_message(
        self, value: Any, *, direction: Literal["request", "response"] = "request"
    ) -> Message:
        """Build the message from a JSON value; `TranscodeError` when it does not fit."""
        try:
            built = self._decode(value)
            if isinstance(built, dict):
                return self.message_class(**built)
            message: Message = built
            return message
        except FieldError as err:
            raise TranscodeError(direction, "$" + err.path, err.message) from None
        except (TypeError, ValueError):  # the runtime refused something our checks let pass
            raise TranscodeError(direction, "$", "value not accepted by the message type") from None

    def to_json(
        self, message: Message, *, direction: Literal["request", "response"] = "response"
    ) -> Any:
        """The JSON value of `message` (a dict for ordinary messages)."""
        try:
            return self._encode(message)
        except FieldError as err:
            raise TranscodeError(direction, "$" + err.path, err.message) from None

    # -- preparation -----------------------------------------------------------------------

    def _message_codec(self, descriptor: Descriptor) -> tuple[Decode, Encode]:
        wkt = wkt_codec(descriptor, self._scalar_codec)
        if wkt is not None:
            return wkt
        plan = self._plans.get(descriptor.full_name)
        if plan is None:
            plan = self._plans[descriptor.full_name] = _Plan()
            self._fill(plan, descriptor)
        return _decode_message(plan), _encode_message(plan, self._include_defaults)

    def _fill(self, plan: _Plan, descriptor: Descriptor) -> None:
        oneofs = real_oneofs(descriptor)
        for field in descriptor.fields:
            decode, encode = self._field_codec(field)
            null_is_value = (
                not field.is_repeated
                and field.message_type is not None
                and field.message_type.full_name == "google.protobuf.Value"
            )
            plan.fields[field.name] = (decode, null_is_value, oneofs.get(field.name))
            presence = field.has_presence and not field.is_repeated
            plan.encoders.append((field.name, encode, presence))
            plan.by_name[field.name] = encode

    def _field_codec(self, field: FieldDescriptor) -> tuple[Decode, Encode | None]:
        entry = field.message_type
        if field.is_repeated and entry is not None and entry.GetOptions().map_entry:
            key = entry.fields_by_name["key"]
            decode_value, encode_value = self._single(entry.fields_by_name["value"])
            return _map_codec(key.type, decode_value, encode_value)
        decode, encode = self._single(field)
        if field.is_repeated:
            return _repeated_codec(decode, encode)
        return decode, encode

    def _single(self, field: FieldDescriptor) -> tuple[Decode, Encode | None]:
        if field.type in (_F.TYPE_MESSAGE, _F.TYPE_GROUP):
            return self._message_codec(field.message_type)
        if field.type == _F.TYPE_ENUM:
            return _enum_codec(field)
        return self._scalar_codec(field)

    def _scalar_codec(self, field: FieldDescriptor) -> tuple[Decode, Encode | None]:
        kind = field.type
        if kind in INT_RANGES:
            return _int_decoder(*INT_RANGES[kind]), None
        if kind == _F.TYPE_DOUBLE:
            return _decode_double, _encode_double
        if kind == _F.TYPE_FLOAT:
            return _decode_float32, _encode_float32
        if kind == _F.TYPE_BOOL:
            return _typed(bool, "expected a boolean"), None
        if kind == _F.TYPE_STRING:
            return _typed(str, "expected a string"), None
        if kind == _F.TYPE_BYTES:
            return _decode_bytes, _encode_bytes
        raise TypeError(f"unsupported field type {kind} of {field.full_name}")


# -- messages and containers -----------------------------------------------------------------


def _decode_message(plan: _Plan) -> Decode:
    fields = plan.fields

    def decode(value: Any) -> dict[str, Any]:
        if type(value) is not dict:
            raise FieldError("expected an object")
        kwargs: dict[str, Any] = {}
        chosen: set[str] | None = None
        key = ""
        try:
            for key, item in value.items():
                spec = fields.get(key)
                if spec is None:
                    raise FieldError("unknown field")
                field_decode, null_is_value, oneof = spec
                if item is None and not null_is_value:
                    continue  # proto3 JSON: null is the default
                if oneof is not None:
                    chosen = set() if chosen is None else chosen
                    if oneof in chosen:
                        raise FieldError(f"only one field of '{oneof}' may be set")
                    chosen.add(oneof)
                kwargs[key] = field_decode(item)
        except FieldError as err:
            err.at(f".{key}")
            raise
        return kwargs

    return decode


def _encode_message(plan: _Plan, include_defaults: bool) -> Encode:
    encoders, by_name = plan.encoders, plan.by_name

    def encode_all(msg: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        name = ""
        try:
            for name, encode, presence in encoders:
                if presence and not msg.HasField(name):
                    continue
                value = getattr(msg, name)
                out[name] = value if encode is None else encode(value)
        except FieldError as err:
            err.at(f".{name}")
            raise
        return out

    def encode_set(msg: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        name = ""
        try:
            for field, value in msg.ListFields():
                name = field.name
                if name in by_name:  # extensions are not part of the JSON form
                    encode = by_name[name]
                    out[name] = value if encode is None else encode(value)
        except FieldError as err:
            err.at(f".{name}")
            raise
        return out

    return encode_all if include_defaults else encode_set


def _repeated_codec(decode: Decode, encode: Encode | None) -> tuple[Decode, Encode]:
    def decode_list(value: Any) -> list[Any]:
        if type(value) is not list:
            raise FieldError("expected an array")
        out: list[Any] = []
        try:
            for item in value:
                out.append(decode(item))
        except FieldError as err:
            err.at(f"[{len(out)}]")
            raise
        return out

    def encode_list(value: Any) -> list[Any]:
        if encode is None:
            return list(value)
        out: list[Any] = []
        try:
            for item in value:
                out.append(encode(item))
        except FieldError as err:
            err.at(f"[{len(out)}]")
            raise
        return out

    return decode_list, encode_list


def _map_codec(key_type: int, decode: Decode, encode: Encode | None) -> tuple[Decode, Encode]:
    decode_key: Callable[[str], Any]
    encode_key: Callable[[Any], str]
    if key_type == _F.TYPE_STRING:
        decode_key, encode_key = _same, _same
    elif key_type == _F.TYPE_BOOL:
        decode_key, encode_key = _decode_bool_key, _encode_bool_key
    else:
        decode_key, encode_key = _int_key_decoder(*INT_RANGES[key_type]), str

    def decode_map(value: Any) -> dict[Any, Any]:
        if type(value) is not dict:
            raise FieldError("expected an object")
        out: dict[Any, Any] = {}
        key = ""
        try:
            for key, item in value.items():
                out[decode_key(key)] = decode(item)
        except FieldError as err:
            err.at(f".{key}")
            raise
        return out

    def encode_map(value: Any) -> dict[str, Any]:
        if encode is None:
            return {encode_key(key): item for key, item in value.items()}
        out: dict[str, Any] = {}
        key = ""
        try:
            for key, item in value.items():
                out[encode_key(key)] = encode(item)
        except FieldError as err:
            err.at(f".{key}")
            raise
        return out

    return decode_map, encode_map


def _same(key: str) -> str:
    return key


def _decode_bool_key(key: str) -> bool:
    if key not in ("true", "false"):
        raise FieldError("map key must be true or false")
    return key == "true"


def _encode_bool_key(key: bool) -> str:
    return "true" if key else "false"


def _int_key_decoder(low: int, high: int) -> Callable[[str], int]:
    def decode(key: str) -> int:
        if not _INT_KEY.fullmatch(key) or not low <= int(key) <= high:
            raise FieldError(f"map key must be an integer in [{low}, {high}]")
        return int(key)

    return decode


# -- scalars -----------------------------------------------------------------------------------


def _typed(kind: type, message: str) -> Decode:
    def decode(value: Any) -> Any:
        if type(value) is not kind:
            raise FieldError(message)
        return value

    return decode


def _int_decoder(low: int, high: int) -> Decode:
    def decode(value: Any) -> int:
        kind = type(value)
        if kind is float and value.is_integer():
            value = int(value)
        elif kind is not int:
            raise FieldError("expected an integer")
        if not low <= value <= high:
            raise FieldError(f"integer out of range [{low}, {high}]")
        result: int = value
        return result

    return decode


def _decode_double(value: Any) -> float:
    kind = type(value)
    if kind is float:
        result: float = value
        return result
    if kind is int:
        try:
            return float(value)
        except OverflowError:
            raise FieldError("number out of range") from None
    raise FieldError("expected a number")


def _decode_float32(value: Any) -> float:
    number = _decode_double(value)
    if abs(number) > FLOAT32_MAX:
        raise FieldError("number out of range for a 32-bit float")
    return number


def _encode_double(value: float) -> float:
    if not math.isfinite(value):
        raise FieldError("non-finite number has no JSON form")
    return value


def _encode_float32(value: float) -> float:
    # The field holds a 32-bit float widened to double (0.1f reads 0.10000000149011612);
    # print the shortest decimal that reads back to the same float32, as proto3 JSON does.
    _encode_double(value)
    packed = struct.pack("<f", value)
    for digits in range(6, 10):
        short = float(f"{value:.{digits}g}")
        if struct.pack("<f", short) == packed:
            return short
    return value


def _decode_bytes(value: Any) -> bytes:
    if type(value) is not str:
        raise FieldError("expected a base64 string")
    text = value.translate(_URLSAFE)
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise FieldError("expected a base64 string") from None


def _encode_bytes(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def _enum_codec(field: FieldDescriptor) -> tuple[Decode, Encode | None]:
    enum = field.enum_type
    if enum.full_name == "google.protobuf.NullValue":
        return (lambda _value: 0), (lambda _value: None)
    numbers: dict[str, int] = {value.name: value.number for value in enum.values}
    names: dict[int, str] = {}
    for value in enum.values:
        names.setdefault(value.number, value.name)  # first name wins for aliases

    def decode(value: Any) -> int:
        number = numbers.get(value) if type(value) is str else None
        if number is None:
            raise FieldError(f"expected one of the {enum.full_name} names")
        return number

    def encode(value: int) -> str | int:
        name: str | int = names.get(value, value)
        return name  # an unknown number (open enum) stays a number

    return decode, encode
