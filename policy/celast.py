"""What we read from a checked CEL expression: the regexes given to `matches()` as literals.

cel-expr-python hands back the checked AST only as serialized protobuf
(`google.protobuf.Any` wrapping `cel.expr.CheckedExpr`). We need one fact from it, so
rather than ship the cel.expr protos we walk the wire format for the few fields
involved (field numbers from cel-spec's `checked.proto` and `syntax.proto`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["ExprFacts", "read_facts", "read_paths"]

# cel.expr.Expr oneof members that hold sub-expressions, by field number.
_EXPR_ID, _CONST, _IDENT, _SELECT = 2, 3, 4, 5
_CALL, _LIST, _STRUCT, _COMPREHENSION = 6, 7, 8, 9
_STRING_VALUE = 6  # Constant.string_value
_CALL_TARGET, _CALL_FUNCTION, _CALL_ARGS = 1, 2, 3
_COMPREHENSION_EXPRS = {2, 4, 5, 6, 7}  # iter_range, accu_init, loop_condition, loop_step, result
_STRUCT_ENTRY_EXPRS = {3, 4}  # map_key, value


@dataclass(slots=True)
class ExprFacts:
    """Each `matches()` pattern given as a literal, with its offset in the source."""

    patterns: list[tuple[str, int]] = field(default_factory=list)


def read_facts(serialized: bytes) -> ExprFacts:
    """Facts about a compiled expression, from `Expression.serialize()` output."""
    top = _singular(_bytes(_singular(serialized).get(2)))  # Any.value → CheckedExpr
    positions = _positions(_bytes(top.get(5)))  # CheckedExpr.source_info
    facts = ExprFacts()
    _walk(_bytes(top.get(4)), positions, facts)  # CheckedExpr.expr
    return facts


def read_paths(serialized: bytes) -> frozenset[tuple[str, ...]]:
    """Every variable an expression reads, as the longest field path it selects: `actor.id`
    -> ("actor", "id"); `actor.attributes["t"]` -> ("actor", "attributes") (an index is not
    a field select, so the path stops there: the whole map is read). A path is what the
    expression may depend on and nothing less; comprehension variables appear too (a caller
    that does not know a name treats it conservatively)."""
    top = _singular(_bytes(_singular(serialized).get(2)))  # Any.value → CheckedExpr
    paths: set[tuple[str, ...]] = set()
    _paths(_bytes(top.get(4)), paths)
    return frozenset(paths)


def _chain(expr: bytes) -> tuple[str, ...] | None:
    """`a.b.c` as ("a", "b", "c") when `expr` is an identifier with field selects on it."""
    fields = _singular(expr)
    ident = fields.get(_IDENT)
    if isinstance(ident, bytes):
        return (_text(_bytes(_singular(ident).get(1))),)
    select = fields.get(_SELECT)
    if isinstance(select, bytes):
        parts = _singular(select)
        inner = _chain(_bytes(parts.get(1)))
        if inner is not None:
            return (*inner, _text(_bytes(parts.get(2))))
    return None


def _paths(expr: bytes, paths: set[tuple[str, ...]]) -> None:
    chain = _chain(expr)
    if chain is not None:
        paths.add(chain)
        return
    for number, value in _fields(expr):
        if not isinstance(value, bytes):
            continue
        if number == _SELECT:
            _paths(_bytes(_singular(value).get(1)), paths)
        elif number == _CALL:
            for sub, item in _fields(value):
                if sub in (_CALL_TARGET, _CALL_ARGS) and isinstance(item, bytes):
                    _paths(item, paths)
        elif number == _LIST:
            for sub, item in _fields(value):
                if sub == 1 and isinstance(item, bytes):
                    _paths(item, paths)
        elif number == _STRUCT:
            for sub, entry in _fields(value):
                if sub == 2 and isinstance(entry, bytes):
                    for part, item in _fields(entry):
                        if part in _STRUCT_ENTRY_EXPRS and isinstance(item, bytes):
                            _paths(item, paths)
        elif number == _COMPREHENSION:
            for sub, item in _fields(value):
                if sub in _COMPREHENSION_EXPRS and isinstance(item, bytes):
                    _paths(item, paths)


def _walk(expr: bytes, positions: dict[int, int], facts: ExprFacts) -> None:
    for number, value in _fields(expr):
        if not isinstance(value, bytes):
            continue
        if number == _SELECT:
            _walk(_bytes(_singular(value).get(1)), positions, facts)
        elif number == _CALL:
            _call(value, positions, facts)
        elif number == _LIST:
            for sub, item in _fields(value):
                if sub == 1 and isinstance(item, bytes):
                    _walk(item, positions, facts)
        elif number == _STRUCT:
            for sub, entry in _fields(value):
                if sub == 2 and isinstance(entry, bytes):
                    for part, item in _fields(entry):
                        if part in _STRUCT_ENTRY_EXPRS and isinstance(item, bytes):
                            _walk(item, positions, facts)
        elif number == _COMPREHENSION:
            for sub, item in _fields(value):
                if sub in _COMPREHENSION_EXPRS and isinstance(item, bytes):
                    _walk(item, positions, facts)


def _call(call: bytes, positions: dict[int, int], facts: ExprFacts) -> None:
    parts = list(_fields(call))
    function = next(
        (_text(v) for f, v in parts if f == _CALL_FUNCTION and isinstance(v, bytes)), ""
    )
    target = [v for f, v in parts if f == _CALL_TARGET and isinstance(v, bytes)]
    args = [v for f, v in parts if f == _CALL_ARGS and isinstance(v, bytes)]
    if function == "matches":
        operands = target + args
        if len(operands) == 2:
            literal = _string_literal(operands[1])
            if literal is not None:
                facts.patterns.append((literal[0], positions.get(literal[1], 0)))
    for sub in target + args:
        _walk(sub, positions, facts)


def _string_literal(expr: bytes) -> tuple[str, int] | None:
    """The literal text and expression id when `expr` is a string constant."""
    parts = _singular(expr)
    constant, expr_id = parts.get(_CONST), parts.get(_EXPR_ID, 0)
    if not isinstance(constant, bytes) or not isinstance(expr_id, int):
        return None
    value = _singular(constant).get(_STRING_VALUE)
    return (_text(value), expr_id) if isinstance(value, bytes) else None


def _positions(source_info: bytes) -> dict[int, int]:
    out: dict[int, int] = {}
    for number, entry in _fields(source_info):
        if number == 4 and isinstance(entry, bytes):  # SourceInfo.positions map entry
            pair = _singular(entry)
            key, value = pair.get(1, 0), pair.get(2, 0)
            if isinstance(key, int) and isinstance(value, int):
                out[key] = value
    return out


def _text(value: int | bytes) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else ""


def _bytes(value: int | bytes | None) -> bytes:
    return value if isinstance(value, bytes) else b""


def _singular(data: bytes) -> dict[int, int | bytes]:
    """A message's fields by number (for non-repeated fields)."""
    return dict(_fields(data))


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) pairs of one protobuf message; fixed-width values as bytes."""
    i, n = 0, len(data)
    while i < n:
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
            yield number, value
        elif wire == 2:
            size, i = _varint(data, i)
            yield number, data[i : i + size]
            i += size
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            yield number, data[i : i + width]
            i += width
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


def _varint(data: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, i
