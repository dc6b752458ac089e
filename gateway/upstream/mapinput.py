"""Stage 11, before transcoding: a capability's `map_input` builds the upstream request from
the validated input, the actor and the request context (docs/cache.md#input-mappers, ADR 0024).

The expression names the request as `Request{field: value, ...}`. `Request` is a message type
made at load from the upstream's request schema (the grpc method's request message, derived
as for input schemas; a procedure upstream's `map_input_schema`): its top-level fields carry
the schema's scalar types (string, int, bool, and repeated ones), every other field is a
JSON value. The expression is type-checked once at load against that type, with `input`
typed by the capability's input schema and `actor`, `capability`, `request` and `surface`
as for policies, so a misspelt field or a string given for an integer is a load error at
file:line. At run time it is evaluated on plain values; the mapped value is then validated
against the request schema (a value that does not fit is EXECUTION_FAILED before anything is
sent) and is never logged, audited or put on a span: approvals and the audit input hash bind
the caller's validated input, not this value.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from typing import Any, Final

from cel_expr_python import cel
from google.protobuf import descriptor_pb2, struct_pb2
from google.protobuf.message import Message

from gateway.errors import CapabilityError, Code
from gateway.upstream.state import ExecutionState, with_state
from gateway.values.validation import SchemaValidator
from policy.backends.celexpr import call_variables
from policy.schematypes import CONTEXT_TYPES, TypeBuilder

__all__ = ["InputMapper", "MapInputError"]

_FD = descriptor_pb2.FieldDescriptorProto
_SCALARS: Final = {"string": _FD.TYPE_STRING, "integer": _FD.TYPE_INT64, "boolean": _FD.TYPE_BOOL}
_IDENTIFIER: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VALUE: Final = ".google.protobuf.Value"
_VARIABLES: Final = ("input", "actor", "capability", "request")
_REQUEST_PACKAGE: Final = re.compile(r"capgate\.map\.m\d+\.")
_INPUT_TYPE: Final = re.compile(r"capgate\.check\.t\d+\.Input")
_counter = itertools.count(1)  # one package per mapper: message names never collide


class MapInputError(ValueError):
    """`map_input` does not compile or does not build the upstream request (a load error)."""


def _scalar(schema: Any) -> str | None:
    if not isinstance(schema, Mapping):
        return None
    kind = schema.get("type")
    return kind if isinstance(kind, str) and kind in _SCALARS else None


def _request_type(builder: TypeBuilder, schema: Mapping[str, Any]) -> str:
    """Add the `Request` message of `schema` to the builder's pool; its package's name."""
    properties = schema.get("properties")
    if schema.get("type") != "object" or not isinstance(properties, Mapping) or not properties:
        raise MapInputError("the upstream request is not an object with named fields")
    package = f"capgate.map.m{next(_counter)}"
    proto = descriptor_pb2.FileDescriptorProto(
        name=f"capgate/map/{package}.proto", package=package, syntax="proto2"
    )
    proto.dependency.append("google/protobuf/struct.proto")
    message = proto.message_type.add(name="Request")
    for number, (name, sub) in enumerate(properties.items(), start=1):
        if not isinstance(name, str) or not _IDENTIFIER.match(name):
            raise MapInputError(f"request field {name!r} is not a CEL identifier")
        field = message.field.add(name=name, number=number, label=_FD.LABEL_OPTIONAL)
        kind = _scalar(sub)
        if kind is None and isinstance(sub, Mapping) and sub.get("type") == "array":
            kind = _scalar(sub.get("items"))
            if kind is not None:
                field.label = _FD.LABEL_REPEATED
        if kind is not None:
            field.type = _SCALARS[kind]
        else:
            field.type, field.type_name = _FD.TYPE_MESSAGE, _VALUE
    builder.pool.Add(proto)
    return package


class InputMapper:
    """One capability's compiled `map_input`; built once per snapshot."""

    __slots__ = ("_env", "_program", "_validator", "source")

    def __init__(
        self,
        source: str,
        *,
        request_schema: Mapping[str, Any],
        input_schema: Mapping[str, Any] | None,
    ) -> None:
        self.source = source
        builder = TypeBuilder()
        package = _request_type(builder, request_schema)
        input_type = builder.input_type(input_schema) if input_schema else None
        typed: dict[str, Any] = {n: cel.Type(CONTEXT_TYPES[n]) for n in _VARIABLES[1:]}
        typed["input"] = cel.Type(input_type) if input_type else cel.Type.DYN
        typed["surface"] = cel.Type.STRING
        checker = cel.NewEnv(builder.pool, variables=typed, container=package)
        try:
            checked = checker.compile(source)
        except RuntimeError as exc:
            raise MapInputError(f"map_input: {_first_line(exc)}") from None
        result = checked.return_type()
        if result.name() != f"{package}.Request":
            raise MapInputError(
                f"map_input must build the upstream request as Request{{...}}, not {_named(result)}"
            )
        dyn = dict.fromkeys(_VARIABLES, cel.Type.DYN)
        self._env = cel.NewEnv(
            builder.pool, variables={**dyn, "surface": cel.Type.STRING}, container=package
        )
        self._program = self._env.compile(source)
        self._validator = SchemaValidator(request_schema)

    def apply(self, bindings: Mapping[str, Any]) -> Any:
        """The upstream request for one call: `bindings` are the policy variables (input,
        actor, capability, request with `now` a datetime, surface). Any failure is
        EXECUTION_FAILED with nothing sent; no message carries a value."""
        activation = self._env.Activation(call_variables(bindings, (*_VARIABLES, "surface")))
        try:
            value = self._program.eval(activation)
        except RuntimeError:
            raise _failed("map_input evaluation failed") from None
        built = value.value()
        if not isinstance(built, Message):
            raise _failed("map_input evaluation failed")
        mapped = _json_of(built)
        validated, issues = self._validator.validate(mapped)
        if issues:
            raise _failed(
                f"map_input: the request does not fit its schema ({len(issues)} issue(s))"
            )
        return validated


def _failed(reason: str) -> CapabilityError:
    error = CapabilityError(Code.EXECUTION_FAILED, reason=reason)
    return with_state(error, ExecutionState.NOT_STARTED)


def _first_line(exc: BaseException) -> str:
    # One line: cel-cpp's caret drawing below the message is left out (as for output_expr).
    text = str(exc).removeprefix("INVALID_ARGUMENT: ")
    line = text.splitlines()[0] if text else "does not compile"
    return _INPUT_TYPE.sub("input", _REQUEST_PACKAGE.sub("", line))


def _named(kind: Any) -> str:
    name: str = kind.name()
    return name.lower() if name.isupper() else name


def _json_of(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field, value in message.ListFields():
        if field.type == _FD.TYPE_MESSAGE:
            out[field.name] = _json_value(value)
        elif field.is_repeated:
            out[field.name] = list(value)
        else:
            out[field.name] = value
    return out


def _json_value(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return {k: _json_value(v) for k, v in value.struct_value.fields.items()}
    if kind == "list_value":
        return [_json_value(v) for v in value.list_value.values]
    if kind == "number_value":
        number = value.number_value
        # JSON numbers travel as doubles here: integral ones go on as integers.
        return int(number) if number.is_integer() and abs(number) <= 2**53 else number
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    return None
