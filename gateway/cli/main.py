"""The `capgate` command line: one entry point, one sub-command group per concern."""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO, cast

from gateway.cli.args import redact, run_entry

# Each group is a module exposing `main(argv) -> int`; imported lazily so that
# `capgate policy ...` never pays for the gateway's gRPC imports.
_GROUPS: dict[str, tuple[str, str]] = {
    "policy": ("gateway.cli.policy", "author tools: check, test, explain CEL policies"),
    "serve": ("gateway.cli.serve", "run the gateway"),
    "config": ("gateway.cli.config", "check a gateway config"),
    "approvals": ("gateway.cli.approvals", "list, show, approve, reject, watch approvals"),
    "grants": ("gateway.cli.grants", "create, list, show, revoke standing grants"),
    "audit": ("gateway.cli.audit", "tail or query the audit stream"),
    "cache": ("gateway.cli.cache", "purge a capability's result cache entries"),
    "inbox": ("gateway.cli.inbox", "serve the approver web inbox"),
    "describe": ("gateway.cli.describe", "list the capabilities a caller may see"),
    "invoke": ("gateway.cli.invoke", "call a capability and print its envelope"),
    "check": ("gateway.cli.check", "what an invoke would be answered, without calling"),
    "resume": ("gateway.cli.resume", "run a call once its approval is approved"),
    "approval": ("gateway.cli.approval", "the status of an approval you asked for"),
    "token": ("gateway.cli.token", "mint a local dev token (--dev) for a key this config owns"),
}
# Sub-commands typed without their group (`capgate approve`): the suggestion names the group.
_SUBCOMMANDS: dict[str, tuple[str, ...]] = {
    "approve": ("approvals",),
    "reject": ("approvals",),
    "list": ("approvals",),
    "show": ("approvals",),
    "watch": ("approvals",),
    "create": ("grants",),
    "revoke": ("grants",),
    "tail": ("audit",),
    "query": ("audit",),
    "purge": ("cache",),
    "status": ("approval",),
    "test": ("policy",),
    "explain": ("policy",),
    "lint": ("policy",),
}
# Long-running servers log through their own handlers; every other group's stderr is redacted.
_SERVERS = frozenset({"serve", "inbox"})


def version() -> str:
    """The installed distribution's version (the source tree's when not installed)."""
    from importlib.metadata import PackageNotFoundError  # noqa: PLC0415 - --version only
    from importlib.metadata import version as installed  # noqa: PLC0415

    try:
        return installed("capgate")
    except PackageNotFoundError:
        from gateway import __version__  # noqa: PLC0415

        return __version__


def _usage() -> str:
    lines = ["usage: capgate [--version] <command> [options]", "", "commands:"]
    lines += [f"  {name:<10} {about}" for name, (_, about) in _GROUPS.items()]
    lines += ["", "`capgate help <command>` (or `capgate <command> --help`) describes its options."]
    return "\n".join(lines)


class _Redacting:
    """A text stream that drops the command line's credentials from what passes through it
    (argparse usage errors and exception messages of the groups quote their input)."""

    def __init__(self, inner: TextIO, argv: Sequence[str]) -> None:
        self._inner, self._argv = inner, list(argv)

    def write(self, text: str) -> int:
        self._inner.write(redact(text, self._argv))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _unknown(name: str, args: list[str]) -> int:
    """Exit 2 naming the command, with the nearest known ones (as git and kubectl suggest)."""
    near = difflib.get_close_matches(name, _GROUPS, n=2, cutoff=0.6)
    subs = [f"{group} {name}" for group in _SUBCOMMANDS.get(name, ())]
    # A sub-command typed without its group is the likelier meaning than a near group name.
    guesses = " or ".join(f"'capgate {g}'" for g in [*subs, *near][:2])
    hint = f"; did you mean {guesses}?" if guesses else ""
    print(f"capgate: unknown command {redact(name, args)!r}{hint}\n\n{_usage()}", file=sys.stderr)
    return 2


def _dispatch(args: list[str]) -> int:
    if not args or args[0] in {"-h", "--help"}:
        print(_usage())
        return 0 if args else 2
    if args[0] == "--version":
        print(f"capgate {version()}")
        return 0
    if args[0] == "help":
        # `capgate help CMD [SUB]` is `capgate CMD [SUB] --help`.
        return _dispatch([*args[1:], "--help"]) if args[1:] else _dispatch(["--help"])
    name, rest = args[0], args[1:]
    if name not in _GROUPS:
        return _unknown(name, args)
    module_name, _ = _GROUPS[name]
    # gRPC core prints a line at INFO on stderr per failed TLS handshake: for `serve` that is
    # one line per unauthenticated probe, without limit; the other commands say it better.
    # Before grpc is imported (the group's module imports it); an operator's value wins.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    module = __import__(module_name, fromlist=["main"])
    entry: Callable[[Sequence[str]], int] = module.main
    if name in _SERVERS:
        return entry(rest)
    stderr = sys.stderr
    sys.stderr = cast(TextIO, _Redacting(stderr, args))
    try:
        return entry(rest)
    finally:
        sys.stderr = stderr


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    return run_entry(lambda: _dispatch(args))


if __name__ == "__main__":
    raise SystemExit(main())
