"""`capgate policy check|test|explain`: the policy author's tools.

Exit codes: 0 clean, 1 problems found (load errors, failing cases), 2 bad usage or
unreadable inputs. `gateway.cli.main` routes `capgate policy ...` here, through
`gateway.cli.policy`, which passes a registry loader that also types `input` from the
protobuf request messages of capabilities without an `input_schema` (this package never
imports the gateway; on its own, those capabilities' `input` is `dyn`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from policy.backends import BACKENDS
from policy.engine import PolicySet
from policy.errors import PolicyLoadError
from policy.junit import write_junit
from policy.loader import load_policy_set
from policy.registry import hooks_from_config, registry_from_config, unknown_listed_policies
from policy.render import evaluation_json, evaluation_text, report_json, report_text
from policy.requests import request_from_data
from policy.suites import checked_hooks, run_suites

__all__ = ["main"]

_USAGE_ERROR = 2

RegistryLoader = Callable[[Path], dict[str, dict[str, Any]]]
"""Config path → capability registry; raises ValueError for a config it cannot read."""


class _UsageError(Exception):
    """Bad arguments or unreadable inputs (exit code 2)."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="capgate policy", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, about: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=about, description=about)
        sub.add_argument(
            "directory",
            type=Path,
            metavar="PATH",
            help="a directory of policy files, or one policy file (as policies.paths takes)",
        )
        sub.add_argument(
            "--backend",
            choices=sorted(BACKENDS),
            default="cel-expr-python",
            help="CEL implementation to evaluate with (default: cel-expr-python)",
        )
        return sub

    check = command("check", "load, validate and type-check every policy; report all errors")
    check.add_argument("--config", type=Path, help="gateway config: type `input` per capability")
    test = command("test", "run the *_test.yaml suites next to the policies")
    test.add_argument("--junit", type=Path, help="also write JUnit XML here")
    _output(test, "table")
    test.add_argument(
        "--config",
        type=Path,
        help="gateway config: type `input` per capability, and run the suites against its "
        "capabilities (a case's capability must be in it and agree with it)",
    )
    explain = command("explain", "evaluate one request and show every stance")
    explain.add_argument("--request", type=Path, required=True, help="request JSON file")
    _output(explain, "json")
    explain.add_argument("--config", type=Path, help="gateway config: registry and capabilities")
    return parser


def _output(sub: argparse.ArgumentParser, default: str) -> None:
    """`-o/--output table|json|yaml`, the CLI's one output option (`--format` and `text`, for
    table, are the older spellings)."""
    sub.add_argument(
        "-o",
        "--output",
        "--format",
        dest="format",
        choices=["table", "json", "yaml", "text"],
        default=default,
        help=f"table, json or yaml (default {default}; text is table)",
    )


def _print_data(data: Any, output: str) -> None:
    if output == "yaml":
        print(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), end="")
    else:
        print(json.dumps(data, indent=2))


def main(argv: Sequence[str], *, registry_loader: RegistryLoader = registry_from_config) -> int:
    """Run one sub-command; returns the process exit code. `registry_loader` reads the
    capability registry of `--config`."""
    try:
        args = _parser().parse_args(list(argv))
    except SystemExit as exc:  # argparse exits on --help and on usage errors
        return exc.code if isinstance(exc.code, int) else _USAGE_ERROR
    args.registry_loader = registry_loader
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        "check": _check,
        "test": _test,
        "explain": _explain,
    }
    try:
        return handlers[args.command](args)
    except _UsageError as exc:
        print(f"capgate policy {args.command}: {exc}", file=sys.stderr)
        return _USAGE_ERROR
    except PolicyLoadError as exc:
        print(exc, file=sys.stderr)
        return 1


def _registry(args: argparse.Namespace) -> dict[str, dict[str, Any]] | None:
    if args.config is None:
        return None
    try:
        if getattr(args, "registry", None) is None:  # read once per command
            args.registry = args.registry_loader(args.config)
        loaded: dict[str, dict[str, Any]] = args.registry
        return loaded
    except ValueError as exc:
        raise _UsageError(f"--config: {exc}") from None


def _load(args: argparse.Namespace) -> PolicySet:
    """The policy set (typed by the `--config` registry), and with `--config` the names its
    capabilities list must all be in it, as the gateway requires."""
    if not args.directory.exists():
        raise _UsageError(f"{args.directory}: no such file or directory")
    registry = _registry(args)
    hooks = hooks_from_config(args.config) if args.config is not None else None
    try:
        policy_set = load_policy_set(
            args.directory, registry=registry, backend=args.backend, hooks=hooks
        )
    except PolicyLoadError as exc:
        if args.config is None:
            raise
        raise PolicyLoadError(
            exc.errors + unknown_listed_policies(args.config, exc.names), exc.names
        ) from None
    if args.config is not None:
        unknown = unknown_listed_policies(args.config, policy_set.policy_names)
        if unknown:
            raise PolicyLoadError(unknown, policy_set.policy_names)
    return policy_set


def _check(args: argparse.Namespace) -> int:
    policy_set = _load(args)
    rules = len(policy_set.rule_sites())
    files = len({site[2] for site in policy_set.rule_sites()})
    print(
        f"ok: {_count(len(policy_set.policy_names), 'policy', 'policies')}, "
        f"{_count(rules, 'rule')} in {_count(files, 'file')} (revision {policy_set.revision})"
    )
    for note in policy_set.notes:
        print(f"note: {note}")
    return 0


def _count(n: int, one: str, many: str = "") -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _suites(path: Path) -> Path:
    """Where the suites of `path` are: a directory's own; a policy file's `<stem>_test.yaml`."""
    if path.is_dir():
        return path
    for suffix in (".yaml", ".yml"):
        suite = path.with_name(f"{path.stem}_test{suffix}")
        if suite.is_file():
            return suite
    raise _UsageError(f"{path}: no suite {path.stem}_test.yaml next to it")


def _test(args: argparse.Namespace) -> int:
    policy_set = _load(args)
    hooks = hooks_from_config(args.config) if args.config is not None else None
    report = run_suites(_suites(args.directory), policy_set, _registry(args), hooks)
    if not report.results and not report.errors:
        raise _UsageError(f"{args.directory}: no *_test.yaml suites found")
    if args.junit is not None:
        write_junit(report, args.junit)
    if args.format in ("json", "yaml"):
        _print_data(report_json(report), args.format)
    else:
        print(report_text(report))
    return 0 if report.ok else 1


def _explain(args: argparse.Namespace) -> int:
    try:
        data = json.loads(args.request.read_text("utf-8"))
        phase, request = request_from_data(data)
    except OSError as exc:
        raise _UsageError(f"--request: {exc.strerror or exc}") from None
    except ValueError as exc:  # json.JSONDecodeError is a ValueError too
        raise _UsageError(f"--request: {exc}") from None
    registry = _registry(args)
    if registry and request.capability.get("id") in registry:
        known = registry[request.capability["id"]]
        details = {k: v for k, v in known.items() if k not in {"input_schema", "policies"}}
        request = replace(request, capability={**details, **request.capability})
        if not request.capability_policies:  # the ones the config lists for it
            request = replace(request, capability_policies=tuple(known.get("policies", ())))
    hooks = hooks_from_config(args.config) if args.config is not None else None
    if hooks is not None and request.hooks:  # as a suite case's: what the gateway would bind
        try:
            request = replace(request, hooks=checked_hooks(request.hooks, hooks))
        except ValueError as exc:
            raise _UsageError(f"--request: {exc}") from None
    policy_set = load_policy_set(
        args.directory, registry=registry, backend=args.backend, hooks=hooks
    )
    evaluation = policy_set.evaluate_all(phase, request)
    if args.format in ("json", "yaml"):
        _print_data(evaluation_json(phase, policy_set, evaluation), args.format)
    else:
        print(evaluation_text(phase, policy_set, evaluation))
    return 0
