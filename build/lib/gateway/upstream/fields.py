"""Converters for single fields: scalars, enums, repeated fields and maps (used by
transcode.py; see its docstring and ADR 0004 for the JSON forms).

Each converter takes one argument. A failure raises `FieldError` without the value, and each
container prepends its path segment on the way out.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
from collections.abc import Callable
from typing import Any, Final

from google.protobuf.descriptor import FieldDescriptor

from gateway.upstream.wellknown import Decode, Encode, FieldError

__all__ = [
    "FLOAT32_MAX",
    "INT_RANGES",
    "enum_codec",
    "map_codec",
    "repeated_codec",
    "scalar_codec",
]

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


def scalar_codec(field: FieldDescriptor) -> tuple[Decode, Encode | None]:
    """Converters of a scalar field; an encoder of None means the value is already JSON."""
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


def repeated_codec(decode: Decode, encode: Encode | None) -> tuple[Decode, Encode]:
    """Converters of a repeated field from its element's converters (JSON array)."""

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


def map_codec(key_type: int, decode: Decode, encode: Encode | None) -> tuple[Decode, Encode]:
    """Converters of a map field (JSON object; integer and bool keys are their strings)."""
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


def enum_codec(field: FieldDescriptor) -> tuple[Decode, Encode | None]:
    """Converters of an enum field: value names in, names out (unknown numbers stay numbers)."""
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
