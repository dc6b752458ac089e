"""Renders `docs/errors.md` from the one error table: `python -m gateway.cli.errordocs
[--check]`."""

from __future__ import annotations

import sys
from pathlib import Path

from gateway.errors import TABLE

DOC = Path(__file__).resolve().parents[2] / "docs" / "errors.md"


def render() -> str:
    lines = [
        "# Error codes",
        "",
        "Generated from `gateway/errors.py` by `python -m gateway.cli.errordocs`; a test fails",
        "when it is stale. Governed failures come back inside `ExecutionResult` with RPC status",
        "OK; the proto enum spells each code with the `ERROR_CODE_` prefix, JSON, MCP and",
        "audit without.",
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
        "## Other public messages",
        "",
        "A code's envelope carries the message above, except in these cases; `{...}` marks what",
        "varies. No other message reaches a caller (a test reads every `CapabilityError` the",
        "gateway constructs with a message and compares it with this table).",
        "",
        "| code | public message | when |",
        "|---|---|---|",
    ]
    for code, spec in TABLE.items():
        lines += [f"| `{code.value}` | {o.text} | {o.when} |" for o in spec.others]
    lines += [
        "",
        "`EXECUTION_FAILED` is exposed, with the upstream's public message, when the upstream",
        "attaches a declared contract error (`capgate.v1.ContractError` or",
        "`google.rpc.ErrorInfo`);",
        "otherwise it is the generic message above and the cause stays in the logs (SI-9).",
        "A concealed denial (unexposed or hidden capability) is exactly the `CAPABILITY_NOT_FOUND`",
        "answer, without a duration (SI-8); the audit event keeps the true reason. Likewise",
        "another requester's approval is exactly the `APPROVAL_NOT_FOUND` answer of an unknown id;",
        "no not-found envelope carries a duration.",
        "The retryable column is the code's own value; an envelope whose `execution_state` is",
        "`UNKNOWN` (a timeout, a cancellation or a lost reply after the request went out) is",
        "retryable only when running the capability again cannot repeat an effect (side effect",
        "`none`/`read`, or declared `idempotent`): a client that follows `retryable` never",
        "repeats a write that may have happened.",
        "`RATE_LIMITED` carries `retry_after` (`CapabilityError` field 9, a Duration; MCP's",
        "`structuredContent.retry_after_s`): the earliest time from now at which the same",
        "call can pass the limit that refused it; nothing ran (docs/limits.md).",
        "`HOOK_DENIED` carries the denying hook's message; `HOOK_FAILED` (a hook's error, a missed",
        "deadline or an answer breaking the contract, with failure mode `closed`) keeps the hook",
        "and the cause in the audit event. From a pre-hook nothing ran and a retry is safe; from a",
        "post-hook the upstream ran (`executed_before_failure`, not retryable) and its output is",
        "withheld (docs/hooks.md).",
        "`UNAUTHENTICATED` in an envelope means the listener accepted the caller but the call",
        "has no usable actor: none well formed (stage 6), an anonymous actor reaching an approval",
        "gate, or an upstream that answered the gateway with gRPC UNAUTHENTICATED",
        "(`execution_state` COMPLETED: the upstream answered). A caller's bad credentials never",
        "get that far: they are a gRPC status, below.",
        "",
        "## gRPC statuses: calls refused before the pipeline",
        "",
        "These are transport answers, not envelopes: no execution id, no terminal audit event, and",
        "nothing ran. Client libraries raise them as errors (the Python client's `CapgateError`",
        "with `grpc_status` set).",
        "",
        "| status | where | when |",
        "|---|---|---|",
        "| `UNAUTHENTICATED` | every gRPC listener | the listener refused the credentials: a "
        "missing, malformed, expired or wrongly signed bearer JWT, a wrong issuer or audience, an "
        "mTLS peer it does not accept, or a trusted-local call naming no actor where anonymous "
        "callers are not allowed; the status detail says which (e.g. `token expired`), never the "
        "token. Over MCP the same refusal is HTTP 401 with "
        "`WWW-Authenticate`. |",
        "| `INVALID_ARGUMENT` | `ApprovalAdmin`, `PolicyAdmin` | a malformed request: an unknown "
        "approval status, a negative page size, an invalid page token, a missing approval id or "
        "verdict, an `on_behalf_of` human without id and issuer. |",
        "| `OUT_OF_RANGE` | `ApprovalAdmin.WatchApprovals` | the event to resume after was trimmed "
        "from the stream: list approvals again, then watch from the new position. |",
        "| `UNAVAILABLE` | `ApprovalAdmin.WatchApprovals` | the approval store went away while "
        "streaming: reconnect. |",
        "| `DEADLINE_EXCEEDED`, `CANCELLED` | every RPC | the caller's own deadline or "
        "cancellation, raised by the caller's own gRPC library (a capability's `timeout` is the "
        "`TIMEOUT` envelope above). |",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not DOC.exists() or DOC.read_text() != text:
            print("docs/errors.md is stale: run python -m gateway.cli.errordocs", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
