"""Derive a capability's input JSON Schema from its protobuf request message (DESIGN §8).

Draft-07 keywords only (what fastjsonschema compiles), matching exactly what transcode.py
accepts, so a value that passes stage 5 transcodes without surprise:

- field names are proto names, `additionalProperties: false`; proto3 has no required fields;
- integers carry their exact range (int64 included); float/double are numbers; bytes are
  base64 strings; enums are their value names;
- repeated → array, map → object (with `propertyNames` for integer and bool keys);
- a scalar with explicit presence (proto3 `optional`, oneof member) and the wrapper types also
  accept null (= not set); at most one member of a real oneof may be present;
- Timestamp → date-time string, Duration → "1.5s" string, Struct → object, Value → anything,
  ListValue → array, FieldMask → string, Any → object with "@type";
- nested messages are inlined; a recursive type is expanded `max_recursion` times on a path
  and the whole tree at most `max_depth` levels, then it is `{}` (the transcoder still checks).

The output is deterministic: declaration order, no sets, golden-tested.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from gateway.upstream.descriptors import proto3_optional_names, real_oneofs
from gateway.upstream.fields import FLOAT32_MAX, INT_RANGES
from gateway.upstream.wellknown import WRAPPERS

__all__ = [
    "DRAFT",
    "derive_schema",
]

DRAFT: Final = "http://json-schema.org/draft-07/schema#"
_F = FieldDescriptor
_DURATION: Final = r"^-?[0-9]+(\.[0-9]{1,9})?s$"
_WKT: Final[dict[str, dict[str, Any]]] = {
    "google.protobuf.Timestamp": {"type": "string", "format": "date-time"},
    "google.protobuf.Duration": {"type": "string", "pattern": _DURATION},
    "google.protobuf.FieldMask": {"type": "string"},
    "google.protobuf.Struct": {"type": "object"},
    "google.protobuf.Value": {},
    "google.protobuf.ListValue": {"type": "array"},
    "google.protobuf.Empty": {"type": "object", "additionalProperties": False},
    "google.protobuf.Any": {
        "type": "object",
        "properties": {"@type": {"type": "string"}},
        "required": ["@type"],
    },
}


def derive_schema(
    descriptor: Descriptor, *, max_depth: int = 32, max_recursion: int = 2
) -> dict[str, Any]:
    """The JSON Schema of `descriptor`'s JSON form, with `$schema` and a title."""
    body = _Deriver(max_depth, max_recursion).message(descriptor, ())
    return {"$schema": DRAFT, "title": descriptor.full_name, **body}


class _Deriver:
    def __init__(self, max_depth: int, max_recursion: int) -> None:
        self._max_depth = max_depth
        self._max_recursion = max_recursion

    def message(self, descriptor: Descriptor, path: tuple[str, ...]) -> dict[str, Any]:
        name = descriptor.full_name
        if name in _WKT:
            return copy.deepcopy(_WKT[name])
        if name in WRAPPERS:
            return _nullable(self.scalar(descriptor.fields_by_name["value"]))
        if len(path) >= self._max_depth or path.count(name) >= self._max_recursion:
            return {}  # recursion guard: anything here, the transcoder still checks it
        path = (*path, name)
        optional = proto3_optional_names(descriptor)
        oneofs = real_oneofs(descriptor)
        properties: dict[str, Any] = {}
        required: list[str] = []
        for field in descriptor.fields:
            schema = self.field(field, path)
            if field.name in optional or field.name in oneofs:
                schema = _nullable(schema)
            properties[field.name] = schema
            if field.is_required:  # proto2 only
                required.append(field.name)
        out: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            out["required"] = required
        exclusive = _oneof_exclusions(descriptor, oneofs)
        if exclusive:
            out["dependencies"] = exclusive
        out["additionalProperties"] = False
        return out

    def field(self, field: FieldDescriptor, path: tuple[str, ...]) -> dict[str, Any]:
        entry = field.message_type
        if field.is_repeated and entry is not None and entry.GetOptions().map_entry:
            key = entry.fields_by_name["key"]
            out: dict[str, Any] = {
                "type": "object",
                "additionalProperties": self.single(entry.fields_by_name["value"], path),
            }
            if key.type == _F.TYPE_BOOL:
                out["propertyNames"] = {"enum": ["true", "false"]}
            elif key.type in INT_RANGES:
                unsigned = INT_RANGES[key.type][0] == 0
                out["propertyNames"] = {
                    "pattern": "^(0|[1-9][0-9]*)$" if unsigned else "^-?(0|[1-9][0-9]*)$"
                }
            return out
        single = self.single(field, path)
        if field.is_repeated:
            return {"type": "array", "items": single}
        return single

    def single(self, field: FieldDescriptor, path: tuple[str, ...]) -> dict[str, Any]:
        if field.type in (_F.TYPE_MESSAGE, _F.TYPE_GROUP):
            return self.message(field.message_type, path)
        if field.type == _F.TYPE_ENUM:
            if field.enum_type.full_name == "google.protobuf.NullValue":
                return {"type": "null"}
            return {"type": "string", "enum": [value.name for value in field.enum_type.values]}
        return self.scalar(field)

    @staticmethod
    def scalar(field: FieldDescriptor) -> dict[str, Any]:
        kind = field.type
        if kind in INT_RANGES:
            low, high = INT_RANGES[kind]
            return {"type": "integer", "minimum": low, "maximum": high}
        if kind == _F.TYPE_FLOAT:
            return {"type": "number", "minimum": -FLOAT32_MAX, "maximum": FLOAT32_MAX}
        if kind == _F.TYPE_DOUBLE:
            return {"type": "number"}
        if kind == _F.TYPE_BOOL:
            return {"type": "boolean"}
        if kind == _F.TYPE_BYTES:
            return {"type": "string", "contentEncoding": "base64"}
        return {"type": "string"}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """Also accept null (= not set). `{}` already accepts it."""
    if not schema or schema.get("type") == "null":
        return schema
    out = dict(schema)
    kind = out.get("type")
    if isinstance(kind, str):
        out["type"] = [kind, "null"]
    if "enum" in out:
        out["enum"] = [*out["enum"], None]
    return out


def _oneof_exclusions(descriptor: Descriptor, oneofs: dict[str, str]) -> dict[str, Any]:
    """draft-07 `dependencies`: a present oneof member forbids its siblings."""
    members: dict[str, list[str]] = {}
    for field in descriptor.fields:
        if field.name in oneofs:
            members.setdefault(oneofs[field.name], []).append(field.name)
    out: dict[str, Any] = {}
    for names in members.values():
        if len(names) < 2:
            continue
        for name in names:
            others = [{"required": [other]} for other in names if other != name]
            out[name] = {"not": {"anyOf": others}}
    return out
