"""Redaction by expression (stage 13): a capability's `redact.output_expr` is a CEL expression
over `output`, `actor` and `capability` whose value replaces the output. Compiled once at load;
an evaluation error withholds the output (OUTPUT_INVALID), never leaks the unredacted one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cel_expr_python import cel

from gateway.errors import CapabilityError, Code

_ENV = cel.NewEnv(
    variables={"output": cel.Type.DYN, "actor": cel.Type.DYN, "capability": cel.Type.DYN}
)


class OutputExprError(ValueError):
    """The expression does not compile (a load error)."""


class OutputExpr:
    __slots__ = ("_program", "source")

    def __init__(self, source: str):
        self.source = source
        try:
            self._program = _ENV.compile(source)
        except RuntimeError as exc:
            raise OutputExprError(f"redact.output_expr does not compile: {exc}") from None

    def apply(self, output: Any, *, actor: Mapping[str, Any], capability: Mapping[str, Any]) -> Any:
        try:
            value = self._program.eval(
                _ENV.Activation({"output": output, "actor": actor, "capability": capability})
            )
        except RuntimeError:
            value = None
        if value is None or value.type() == cel.Type.ERROR:
            # SI-10: when redaction cannot run, nothing leaves.
            raise CapabilityError(Code.OUTPUT_INVALID, executed=True, reason="output_expr failed")
        return value.plain_value()
