"""The `capgate` command line: one entry point, one sub-command group per concern."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

# Each group is a module exposing `main(argv) -> int`; imported lazily so that
# `capgate policy ...` never pays for the gateway's gRPC imports.
_GROUPS: dict[str, tuple[str, str]] = {
    "policy": ("policy.cli", "author tools: check, test, explain CEL policies"),
    "serve": ("gateway.serve", "run the gateway"),
    "config": ("gateway.config.cli", "check a gateway config"),
    "approvals": ("gateway.approvals.cli", "list, show, approve, reject, watch approvals"),
    "audit": ("gateway.audit.cli", "tail or query the audit stream"),
    "inbox": ("gateway.inbox.cli", "serve the approver web inbox"),
}


def _usage() -> str:
    lines = ["usage: capgate <command> [options]", "", "commands:"]
    lines += [f"  {name:<10} {about}" for name, (_, about) in _GROUPS.items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help"}:
        print(_usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in _GROUPS:
        print(f"capgate: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module_name, _ = _GROUPS[name]
    module = __import__(module_name, fromlist=["main"])
    entry: Callable[[Sequence[str]], int] = module.main
    return entry(rest)


if __name__ == "__main__":
    raise SystemExit(main())
