"""The default backend: Google's cel-cpp through cel-expr-python.

Programs are compiled against `dyn` declarations (the type check already happened in
`policy.checker`), so the request's plain JSON values bind without conversion. The
activation converts each variable lazily on first use and caches it, which is why one
activation is shared by all programs of a request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from cel_expr_python import cel
from google.protobuf.timestamp_pb2 import Timestamp

from policy.celsource import CONST_VAR

__all__ = ["CelExprBackend", "call_variables", "timestamp"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_VARIABLES = ("actor", "capability", "request", "input", "approval", "limits", "hooks", CONST_VAR)


def timestamp(moment: datetime) -> Timestamp:
    """A protobuf Timestamp, the only form cel-cpp accepts for timestamps inside maps."""
    delta = moment - _EPOCH
    return Timestamp(seconds=delta.days * 86_400 + delta.seconds, nanos=delta.microseconds * 1000)


def call_variables(bindings: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """The variables `names` of one call's policy bindings as a gateway expression's
    activation takes them (the cache scope key, map_input): `request` copied with its `now`
    as a Timestamp; the bindings themselves are left as they are."""
    values = {name: bindings[name] for name in names}
    if "request" in values:
        request = dict(values["request"])
        request["now"] = timestamp(request["now"])
        values["request"] = request
    return values


class CelExprBackend:
    """cel-expr-python: compile once, evaluate with a shared activation."""

    name = "cel-expr-python"

    def __init__(self) -> None:
        declared = dict.fromkeys(_VARIABLES, cel.Type.DYN)
        self._env = cel.NewEnv(variables={**declared, "surface": cel.Type.STRING})
        self._error = cel.Type.ERROR

    def compile(self, source: str) -> Any:
        try:
            return self._env.compile(source)
        except RuntimeError as exc:
            raise ValueError(str(exc)) from None

    def activation(self, bindings: dict[str, Any]) -> Any:
        request = bindings["request"]
        request["now"] = timestamp(request["now"])
        approval = bindings.get("approval")
        if approval is not None and approval["decided_at"] is not None:
            approval["decided_at"] = timestamp(approval["decided_at"])
        return self._env.Activation(bindings)

    def run(self, program: Any, activation: Any) -> bool | str:
        try:
            result = program.eval(activation)
        except RuntimeError as exc:  # the iteration budget raises instead of returning
            return str(exc)
        value = result.value()
        if value is True or value is False:
            return bool(value)
        if result.type() == self._error:
            return str(value)
        return f"result is {result.type().name()}, not bool"
