"""Protobuf message types for the type checker, made from JSON Schemas at load time.

cel-cpp's checker knows field names only of message types, so we describe each
capability's input schema (and the context variables, and the constants) as proto2
messages in a private descriptor pool. These types exist only for checking: requests
are evaluated against plain values with `dyn` declarations, so nothing is converted on
the request path.

Mapping: string → string, integer → int64, boolean → bool (nullable ones → wrapper
types, which admit `== null`); number → dyn (JSON numbers arrive as ints or doubles);
arrays → repeated element type; objects with identifier-named properties → a nested
message; other objects → map(string, dyn); anything else (anyOf, mixed types) → dyn.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, struct_pb2, timestamp_pb2, wrappers_pb2

__all__ = ["CONTEXT_TYPES", "TypeBuilder"]

_FD = descriptor_pb2.FieldDescriptorProto
_PACKAGE = "capgate.check"
_VALUE = ".google.protobuf.Value"
_STRUCT = ".google.protobuf.Struct"
_SCALARS = {"string": _FD.TYPE_STRING, "integer": _FD.TYPE_INT64, "boolean": _FD.TYPE_BOOL}
_WRAPPERS = {
    "string": ".google.protobuf.StringValue",
    "integer": ".google.protobuf.Int64Value",
    "boolean": ".google.protobuf.BoolValue",
}
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Words CEL reserves: a property so named cannot be selected with `input.<name>`.
_CEL_RESERVED = frozenset(
    {
        *("true", "false", "null", "in", "as", "break", "const", "continue", "else", "for"),
        *("function", "if", "import", "let", "loop", "package", "namespace", "return", "var"),
        *("void", "while"),
    }
)
_MAX_DEPTH = 24

CONTEXT_TYPES = {
    "actor": f"{_PACKAGE}.Actor",
    "capability": f"{_PACKAGE}.Capability",
    "request": f"{_PACKAGE}.Request",
    "approval": f"{_PACKAGE}.Approval",
}
"""CEL variable → message type describing it (see docs/policies.md)."""


class TypeBuilder:
    """One descriptor pool holding the context types plus each input and constants type."""

    def __init__(self) -> None:
        self.pool = descriptor_pool.DescriptorPool()
        for module in (struct_pb2, timestamp_pb2, wrappers_pb2):
            proto = descriptor_pb2.FileDescriptorProto()
            module.DESCRIPTOR.CopyToProto(proto)
            self.pool.Add(proto)
        self.labels: dict[str, str] = {}
        """Message full name → the CEL path it describes (`input.customer`)."""
        self._files = 0
        self._add_context()

    def input_type(self, schema: Mapping[str, Any]) -> str | None:
        """The message describing `input` under `schema`, or None when it is `dyn`."""
        if self._kind(schema, schema, 0) != "message":
            return None
        try:
            return self._add_root("Input", "input", schema)
        except (TypeError, ValueError):  # a schema protobuf cannot describe: check as dyn
            return None

    def record_type(self, name: str, label: str, schema: Mapping[str, Any]) -> str:
        """The message describing the object `schema`, for the CEL path `label` (`hooks`)."""
        return self._add_root(name, label, schema)

    def constants_type(self, values: Mapping[str, Any]) -> str:
        """The message describing `const` for these constant values."""
        schema = {"type": "object", "properties": {k: _infer(v) for k, v in values.items()}}
        return self._add_root("Constants", "const", schema)

    def limits_type(self, names: Sequence[str]) -> str:
        """The message describing `limits` (execution phase): one field per gateway limit,
        each with `remaining` and `max` (docs/limits.md)."""
        state = {
            "type": "object",
            "additionalProperties": False,
            "properties": {"remaining": {"type": "number"}, "max": {"type": "number"}},
        }
        props = dict.fromkeys(names, state)
        schema = {"type": "object", "additionalProperties": False, "properties": props}
        return self._add_root("Limits", "limits", schema)

    def _add_root(self, name: str, label: str, schema: Mapping[str, Any]) -> str:
        self._files += 1
        package = f"{_PACKAGE}.t{self._files}"
        proto = descriptor_pb2.FileDescriptorProto(
            name=f"capgate/check/t{self._files}.proto", package=package, syntax="proto2"
        )
        proto.dependency.extend(["google/protobuf/struct.proto", "google/protobuf/wrappers.proto"])
        message = proto.message_type.add(name=name)
        full = f"{package}.{name}"
        self._fill(message, full, label, schema, root=schema, depth=0)
        self.pool.Add(proto)
        return full

    def _fill(
        self,
        message: descriptor_pb2.DescriptorProto,
        full: str,
        label: str,
        schema: Mapping[str, Any],
        *,
        root: Mapping[str, Any],
        depth: int,
    ) -> None:
        self.labels[full] = label
        for number, (name, raw) in enumerate(_properties(schema).items(), start=1):
            sub = _resolve(raw, root)
            field = message.field.add(name=name, number=number, label=_FD.LABEL_OPTIONAL)
            kind = self._kind(sub, root, depth + 1)
            if kind == "array":
                field.label = _FD.LABEL_REPEATED
                sub = _resolve(sub.get("items", {}), root)
                kind = self._kind(sub, root, depth + 1)
                kind = kind if kind in {"message", *_SCALARS} else "dyn"
                path = f"{label}.{name}[]"
            else:
                path = f"{label}.{name}"
            if kind == "message":
                # Field and nested type names share a scope; property names are CEL
                # identifiers, which never end in a double underscore.
                nested_name = f"T{number}__"
                nested = message.nested_type.add(name=nested_name)
                field.type, field.type_name = _FD.TYPE_MESSAGE, f".{full}.{nested_name}"
                self._fill(nested, f"{full}.{nested_name}", path, sub, root=root, depth=depth + 1)
            elif kind in _SCALARS:
                field.type = _SCALARS[kind]
            else:
                field.type = _FD.TYPE_MESSAGE
                wrapper = _WRAPPERS.get(kind.removeprefix("nullable-"), _VALUE)
                field.type_name = _STRUCT if kind == "map" else wrapper

    def _kind(self, schema: Any, root: Mapping[str, Any], depth: int) -> str:
        """message | map | array | string | integer | boolean | nullable-<scalar> | dyn."""
        if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
            return "dyn"
        types = _types(schema)
        nullable = "null" in types
        types.discard("null")
        if len(types) != 1:
            return "dyn"
        (kind,) = types
        if kind in _SCALARS:
            return f"nullable-{kind}" if nullable else kind
        if nullable or kind not in {"object", "array"}:
            return "dyn"
        if kind == "array":
            return "array"
        names = list(_properties(schema))
        closed = isinstance(schema.get("additionalProperties", True), bool)
        plain = all(_IDENTIFIER.match(n) and n not in _CEL_RESERVED for n in names)
        if names and closed and plain and "patternProperties" not in schema:
            return "message"
        return "map"

    def _add_context(self) -> None:
        proto = descriptor_pb2.FileDescriptorProto(
            name="capgate/check/context.proto", package=_PACKAGE, syntax="proto2"
        )
        proto.dependency.extend(["google/protobuf/struct.proto", "google/protobuf/timestamp.proto"])
        string, repeated = _FD.TYPE_STRING, _FD.LABEL_REPEATED
        _message(
            proto,
            "Actor",
            [
                ("id", string),
                ("kind", string),
                ("issuer", string),
                ("roles", string, repeated),
                ("attributes", _STRUCT),
            ],
        )
        _message(
            proto,
            "Capability",
            [("id", string), ("tags", string, repeated), ("side_effect", string), ("risk", string)],
        )
        request = _message(
            proto, "Request", [("now", ".google.protobuf.Timestamp"), ("correlation_id", string)]
        )
        entry = request.nested_type.add(name="MetadataEntry")
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, type=string, label=_FD.LABEL_OPTIONAL)
        entry.field.add(name="value", number=2, type=string, label=_FD.LABEL_OPTIONAL)
        request.field.add(
            name="metadata",
            number=3,
            type=_FD.TYPE_MESSAGE,
            label=repeated,
            type_name=f".{_PACKAGE}.Request.MetadataEntry",
        )
        _message(
            proto, "Approver", [("id", string), ("issuer", string), ("roles", string, repeated)]
        )
        _message(
            proto,
            "Approval",
            [
                ("id", string),
                ("approver", f".{_PACKAGE}.Approver"),
                ("decided_at", ".google.protobuf.Timestamp"),
                ("reasons", string, repeated),
                ("grant", _FD.TYPE_BOOL),
            ],
        )
        self.pool.Add(proto)
        for variable, full in CONTEXT_TYPES.items():
            self.labels[full] = variable
        self.labels[f"{_PACKAGE}.Approver"] = "approval.approver"


def _message(
    proto: descriptor_pb2.FileDescriptorProto, name: str, fields: list[tuple[Any, ...]]
) -> descriptor_pb2.DescriptorProto:
    message = proto.message_type.add(name=name)
    for number, (field_name, kind, *label) in enumerate(fields, start=1):
        field = message.field.add(name=field_name, number=number)
        field.label = label[0] if label else _FD.LABEL_OPTIONAL
        if isinstance(kind, str):
            field.type, field.type_name = _FD.TYPE_MESSAGE, kind
        else:
            field.type = kind
    return message


def _properties(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    properties = schema.get("properties")
    return properties if isinstance(properties, Mapping) else {}


def _types(schema: Mapping[str, Any]) -> set[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {t for t in declared if isinstance(t, str)}
    if "properties" in schema:
        return {"object"}
    if "items" in schema:
        return {"array"}
    values = schema["enum"] if "enum" in schema else [schema["const"]] if "const" in schema else []
    return {_json_type(v) for v in values} if values else set()


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return {str: "string", float: "number", list: "array", dict: "object"}.get(type(value), "any")


def _resolve(schema: Any, root: Mapping[str, Any], hops: int = 0) -> Any:
    """Follow local `$ref`s (`#/$defs/...`); anything unresolvable becomes `{}` (dyn)."""
    if not isinstance(schema, Mapping) or "$ref" not in schema:
        return schema
    ref = schema["$ref"]
    if hops > 16 or not isinstance(ref, str) or not ref.startswith("#"):
        return {}
    target: Any = root
    for part in filter(None, ref[1:].split("/")):
        key = part.replace("~1", "/").replace("~0", "~")
        target = target.get(key) if isinstance(target, Mapping) else None
    return _resolve(target, root, hops + 1) if target is not None else {}


def _infer(value: Any) -> dict[str, Any]:
    """A JSON Schema describing a constant's YAML value."""
    if isinstance(value, dict):
        return {"type": "object", "properties": {str(k): _infer(v) for k, v in value.items()}}
    if isinstance(value, list):
        kinds = {_json_type(v) for v in value}
        scalar = len(kinds) == 1 and next(iter(kinds)) in _SCALARS
        return {"type": "array", "items": {"type": kinds.pop()} if scalar else {}}
    kind = _json_type(value)
    return {"type": kind} if kind in _SCALARS else {}
