"""`capgate config check FILE|--config FILE [--resolve-reflection] [--connect] [-o FORMAT]`,
`capgate config schema` and
`capgate config openapi FILE --upstream NAME` (capabilities drafted from an OpenAPI 3 document,
gateway/upstream/openapi.py) and `capgate config mcp-tools CONFIG --upstream NAME` (drafted from
the tools a kind mcp upstream lists).

`check` runs the loader `capgate serve` runs (`gateway.process.load.load_everything`)
without starting Redis or binding a port: the YAML, the schema, the semantic checks, every
capability's upstream method (descriptor sets; server reflection only with
`--resolve-reflection`, which connects to those upstreams), and the policy set, type-checked
with `input` typed per capability. It prints `ok: N listeners, M capabilities, revision R`
(exit 0) or every problem as `file:line: path: message` (policy files:
`file:line:column: policy/rules[i]: message`) and then their count, on stdout (exit 1); with
`-o json|yaml`, one record (`ok`, the counts and revision, or `problems` and `count`);
with `--connect`, a valid config's Redis (a PING) and upstreams (a TCP connection) are asked
once, each that does not answer printed as `unreachable: ...` (exit 3);
warnings (e.g. SI-11 retries that cannot apply, capabilities whose methods were not resolved)
go to stderr. `schema` prints the
published JSON Schema.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

from gateway.cli.args import Parser
from gateway.cli.output import add_output, record
from gateway.config.loader import load_settings
from gateway.config.problems import ConfigError
from gateway.config.schema import config_schema
from gateway.errors import CapabilityError
from gateway.process.load import Loaded, load_everything
from gateway.process.reach import unreached
from gateway.upstream.channels import ChannelPool
from gateway.upstream.httpclient import HttpClients
from gateway.upstream.mcpcall import draft_tool_capabilities
from gateway.upstream.mcpclient import McpClient, McpProtocolError
from gateway.upstream.openapi import draft_capabilities
from gateway.upstream.targets import LOAD_TIMEOUT_S

UNREACHABLE = 3  # `check --connect`: the config is valid, something it names does not answer


def _parser() -> argparse.ArgumentParser:
    parser = Parser(prog="capgate config", description="Gateway config tools.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    check = commands.add_parser(
        "check",
        help="check a config as `capgate serve` loads it, without serving",
        description="Check a config as `capgate serve` loads it (policies included), "
        "without starting Redis or binding a port.",
    )
    _config_file(check)
    add_output(check)
    check.add_argument(
        "--connect",
        action="store_true",
        help="also connect once to the configured Redis (redis.url, redis.limits_url: a PING) "
        "and to every upstream's address (a TCP connection); exit 3 when any does not answer",
    )
    check.add_argument(
        "--resolve-reflection",
        action="store_true",
        help="connect to upstreams without a descriptor_set and resolve their methods by "
        "server reflection (without it their methods are not checked)",
    )
    commands.add_parser("schema", help="print the config JSON Schema")
    openapi = commands.add_parser(
        "openapi",
        help="draft capabilities for a kind http upstream from an OpenAPI 3 document",
        description="Print capabilities (YAML) for every operation of an OpenAPI 3 document "
        "that maps onto a kind http upstream, hidden (expose: {}) until reviewed; operations "
        "that cannot be mapped are listed on stderr with the reason.",
    )
    openapi.add_argument("file", help="OpenAPI 3 document (YAML or JSON)")
    openapi.add_argument("--upstream", required=True, help="the kind http upstream's name")
    openapi.add_argument("--prefix", default="", help="capability id prefix (default: upstream)")
    tools = commands.add_parser(
        "mcp-tools",
        help="draft capabilities for the tools of a kind mcp upstream of a config",
        description="Connect to a kind mcp upstream of the config (its address, protocol and "
        "credentials), list its tools and print capabilities (YAML) for them, hidden "
        "(expose: {}) until reviewed; the tools' annotations only suggest side_effect.",
    )
    _config_file(tools)
    tools.add_argument("--upstream", required=True, help="the kind mcp upstream's name")
    tools.add_argument("--prefix", default="", help="capability id prefix (default: upstream)")
    return parser


def _config_file(command: argparse.ArgumentParser) -> None:
    """The config as the other commands take it (`--config FILE`) or as an argument."""
    command.add_argument("file", nargs="?", help="config YAML file, or a directory of *.yaml files")
    command.add_argument("--config", help="the same, as every other command takes it")


def main(argv: Sequence[str]) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(list(argv))
        if args.command in ("check", "mcp-tools"):
            if args.file and args.config and args.file != args.config:
                parser.error("give the config once: FILE or --config FILE")
            args.file = args.file or args.config
            if not args.file:
                parser.error(f"{args.command} needs the config: FILE or --config FILE")
    except SystemExit as exc:  # argparse exits on usage errors and --help
        return int(exc.code or 0)
    if args.command == "schema":
        print(json.dumps(config_schema(), indent=2))
        return 0
    if args.command == "openapi":
        return _openapi(args.file, upstream=args.upstream, prefix=args.prefix)
    if args.command == "mcp-tools":
        return asyncio.run(_mcp_tools(args.file, upstream=args.upstream, prefix=args.prefix))
    return _check(
        args.file,
        resolve_reflection=args.resolve_reflection,
        output=args.output,
        connect=args.connect,
    )


async def _load(file: str, *, resolve_reflection: bool) -> Loaded:
    pool = ChannelPool()
    try:
        return await load_everything(file, pool, bind=False, resolve_reflection=resolve_reflection)
    finally:
        await pool.close()


def _openapi(file: str, *, upstream: str, prefix: str) -> int:
    try:
        document = yaml.safe_load(Path(file).read_text())
        draft = draft_capabilities(
            document if isinstance(document, dict) else {},
            upstream=upstream,
            prefix=prefix or _prefix(upstream),
        )
    except (OSError, yaml.YAMLError, ValueError) as exc:
        print(f"{file}: {exc}", file=sys.stderr)
        return 1
    for reason in draft.skipped:
        print(f"skipped {reason}", file=sys.stderr)
    print(yaml.safe_dump({"capabilities": draft.capabilities}, sort_keys=False), end="")
    return 0


def _prefix(upstream: str) -> str:
    return re.sub(r"[^a-z0-9_-]+", "_", upstream.lower()).strip("_") or "api"


async def _mcp_tools(file: str, *, upstream: str, prefix: str) -> int:
    try:
        settings = load_settings(file)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem)
        return 1
    spec = settings.upstreams.get(upstream)
    if spec is None or spec.kind != "mcp":
        print(f"{file}: no kind mcp upstream named {upstream!r}", file=sys.stderr)
        return 1
    clients = HttpClients()
    try:
        client = clients.shared(spec, lambda http: McpClient(http, spec))
        tools, _ = await asyncio.wait_for(client.current_tools(), LOAD_TIMEOUT_S)
    except (CapabilityError, McpProtocolError, TimeoutError) as exc:
        reason = exc.reason if isinstance(exc, CapabilityError) else str(exc) or "timed out"
        print(f"upstream {upstream}: cannot list its tools: {reason}", file=sys.stderr)
        return 1
    finally:
        await clients.close()
    drafts = draft_tool_capabilities(tools, upstream=upstream, prefix=prefix or _prefix(upstream))
    print(yaml.safe_dump({"capabilities": drafts}, sort_keys=False), end="")
    return 0


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _check(
    file: str, *, resolve_reflection: bool, output: str = "table", connect: bool = False
) -> int:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("warning: %(message)s"))
    logger = logging.getLogger("gateway.config")
    logger.addHandler(handler)
    try:
        loaded = asyncio.run(_load(file, resolve_reflection=resolve_reflection))
    except ConfigError as exc:
        # The problems and their count on one stream (stdout, the check's answer).
        if output != "table":
            problems = [str(problem) for problem in exc.problems]
            record({"ok": False, "problems": problems, "count": len(problems)}, output, sys.stdout)
            return 1
        for problem in exc.problems:
            print(problem)
        print(_plural(len(exc.problems), "problem", "problems"))
        return 1
    finally:
        logger.removeHandler(handler)
    if loaded.unresolved:
        print(
            "warning: methods not checked (their upstreams have no descriptor_set; "
            f"--resolve-reflection asks them): {', '.join(loaded.unresolved)}",
            file=sys.stderr,
        )
    settings = loaded.settings
    # What it reaches is asked only once the config is valid: a config problem comes first.
    missing = [str(x) for x in asyncio.run(unreached(settings))] if connect else []
    status = UNREACHABLE if missing else 0
    if output != "table":
        found: dict[str, object] = {
            "ok": True,
            "listeners": len(settings.listeners),
            "capabilities": len(settings.capabilities),
            "revision": settings.revision,
            "unresolved": list(loaded.unresolved),
        }
        if connect:
            found["unreachable"] = missing
        record(found, output, sys.stdout)
        return status
    print(
        f"ok: {_plural(len(settings.listeners), 'listener', 'listeners')}, "
        f"{_plural(len(settings.capabilities), 'capability', 'capabilities')}, "
        f"revision {settings.revision}"
    )
    for line in missing:
        print(f"unreachable: {line}")
    if connect:
        print(f"{len(missing)} unreachable")
    return status
