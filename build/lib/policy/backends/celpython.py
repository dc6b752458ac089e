"""The pure-Python backend (cel-python, package `celpy`), for evaluation only.

Load-time checking always uses cel-expr-python; this backend only parses (once, at load)
and evaluates. JSON values are converted to celpy's types with care: ints stay ints
(uint above 2^63 - 1, as cel-cpp does), floats stay doubles, datetimes become timestamps.
Known differences from cel-cpp are listed in docs/policies.md.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import celpy
from celpy import celtypes
from celpy.evaluation import CELEvalError

__all__ = ["CelPythonBackend", "to_cel"]

_INT64 = 2**63
_UINT64 = 2**64
logging.getLogger("celpy").setLevel(logging.WARNING)


def to_cel(value: Any) -> Any:
    """celpy's value for a JSON-like Python value; OverflowError past 64 bits."""
    if value is None:
        return None
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        if -_INT64 <= value < _INT64:
            return celtypes.IntType(value)
        if _INT64 <= value < _UINT64:
            return celtypes.UintType(value)
        raise OverflowError("integer out of the 64-bit range")
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    if isinstance(value, Mapping):
        return celtypes.MapType({to_cel(k): to_cel(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return celtypes.ListType([to_cel(v) for v in value])
    if isinstance(value, datetime):
        return celtypes.TimestampType(value)
    if isinstance(value, timedelta):
        return celtypes.DurationType(value)
    if isinstance(value, bytes):
        return celtypes.BytesType(value)
    raise TypeError(f"unsupported value type {type(value).__name__}")


class _Activation(dict[str, Any]):
    """celpy's variables, remembering which could not be converted and why."""

    def __init__(self) -> None:
        super().__init__()
        self.unconvertible: dict[str, str] = {}

    def explain(self, error: str) -> str:
        for name, reason in self.unconvertible.items():
            if f"'{name}'" in error:
                return reason
        return error


class CelPythonBackend:
    """cel-python's interpreter; roughly a hundred times slower than cel-expr-python."""

    name = "cel-python"

    def __init__(self) -> None:
        self._env = celpy.Environment()

    def compile(self, source: str) -> Any:
        try:
            return self._env.program(self._env.compile(source))
        except Exception as exc:  # celpy raises several parser error types
            raise ValueError(f"cel-python cannot parse this expression: {exc}") from None

    def activation(self, bindings: dict[str, Any]) -> Any:
        activation = _Activation()
        for name, value in bindings.items():
            try:
                activation[name] = to_cel(value)
            except (OverflowError, TypeError) as exc:
                # Leave it unbound: only programs that read it fail, as with cel-cpp,
                # which converts each variable on first use.
                activation.unconvertible[name] = (
                    "integer value out of range"
                    if isinstance(exc, OverflowError)
                    else "non-CEL value type"
                )
        return activation

    def run(self, program: Any, activation: _Activation) -> bool | str:
        try:
            result = program.evaluate(activation)
        except CELEvalError as exc:
            return activation.explain(str(exc.args[0]) if exc.args else "evaluation error")
        except Exception as exc:  # interpreter boundary: any fault fails closed (SI-7)
            return f"evaluation error ({type(exc).__name__})"
        if isinstance(result, CELEvalError):
            return activation.explain(str(result.args[0]) if result.args else "evaluation error")
        if isinstance(result, celtypes.BoolType):
            return bool(result)
        return f"result is {type(result).__name__}, not bool"
