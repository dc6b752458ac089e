"""Renders `docs/errors.md` from the one error table (`python -m gateway.errordocs [--check]`)."""

from __future__ import annotations

import sys
from pathlib import Path

from gateway.errors import TABLE

DOC = Path(__file__).resolve().parent.parent / "docs" / "errors.md"


def render() -> str:
    lines = [
        "# Error codes",
        "",
        "Generated from `gateway/errors.py` by `python -m gateway.errordocs`; a test fails when it",
        "is stale. Governed failures come back inside `ExecutionResult` with RPC status OK; the",
        "proto enum spells each code with the `ERROR_CODE_` prefix, JSON, MCP and audit without.",
        "",
        "| code | stage | retryable | exposed to model | public message | terminal event "
        "| envelope |",
        "|---|---|---|---|---|---|---|",
    ]
    for code, spec in TABLE.items():
        lines.append(
            f"| `{code.value}` | {spec.stage} | {'yes' if spec.retryable else 'no'} | "
            f"{'yes' if spec.expose_to_model else 'no'} | {spec.message} | `{spec.event.value}` | "
            f"{spec.kind.value} |"
        )
    lines += [
        "",
        "`EXECUTION_FAILED` is exposed, with the upstream's public message, when the upstream",
        "attaches a declared contract error (`capgate.v1.ContractError` or",
        "`google.rpc.ErrorInfo`);",
        "otherwise it is the generic message above and the cause stays in the logs (SI-9).",
        "A concealed denial (unexposed or hidden capability) is exactly the `CAPABILITY_NOT_FOUND`",
        "answer, without a duration (SI-8); the audit event keeps the true reason.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not DOC.exists() or DOC.read_text() != text:
            print("docs/errors.md is stale: run python -m gateway.errordocs", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
