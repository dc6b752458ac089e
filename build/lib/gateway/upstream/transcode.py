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

from typing import Any, Literal

from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from gateway.upstream.descriptors import real_oneofs
from gateway.upstream.errors import TranscodeError
from gateway.upstream.fields import enum_codec, map_codec, repeated_codec, scalar_codec
from gateway.upstream.wellknown import Decode, Encode, FieldError, wkt_codec

__all__ = ["MessageCodec"]

_F = FieldDescriptor


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
        wkt = wkt_codec(descriptor, scalar_codec)
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
            return map_codec(key.type, decode_value, encode_value)
        decode, encode = self._single(field)
        if field.is_repeated:
            return repeated_codec(decode, encode)
        return decode, encode

    def _single(self, field: FieldDescriptor) -> tuple[Decode, Encode | None]:
        if field.type in (_F.TYPE_MESSAGE, _F.TYPE_GROUP):
            return self._message_codec(field.message_type)
        if field.type == _F.TYPE_ENUM:
            return enum_codec(field)
        return scalar_codec(field)


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
