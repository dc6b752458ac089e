"""What the caller commands share (`describe`, `invoke`, `check`, `resume`, `approval status`):
the connection to a caller listener, the credential, the input, and how an answer is printed.

Connection as the admin commands reach theirs (gateway/cli/approvals.py): `--address HOST:PORT`
(default $CAPGATE_ADDRESS, else the demo's agents listener 127.0.0.1:7443, or a unix://
address), TLS unless `--insecure` (plaintext, loopback and unix sockets only), `--ca FILE` and
`--server-name NAME`. The bearer JWT comes from `--token`, else `--token-file FILE`, else
$CAPGATE_TOKEN; it is never printed. `-o/--output table|json|yaml` picks the rendering: table
(default) is for people, json and yaml print the gateway's answer field by field (protobuf
field names; `output_json` decoded into `output`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import grpc
import orjson
import yaml
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, types_pb2
from gateway.cli.args import Parser, everywhere
from gateway.cli.tls import advice

DEFAULT_ADDRESS = "127.0.0.1:7443"
OUTPUTS = ("table", "json", "yaml")

# Exit codes by outcome: a script branches on them without parsing the output.
OK = 0  # completed (describe, approval status: answered; check: allowed)
USAGE = 2  # the command line, an unreadable --input or --token-file
TRANSPORT = 3  # no answer: the listener is not there, TLS or the credential was refused
APPROVAL_REQUIRED = 4  # suspended for approval (check: would be)
FAILED = 5  # refused or failed: the envelope's `failed` (check: denied, hidden or invalid)
CANCELLED = 6  # cancelled (by the caller, a deadline or a drain)
EXIT_CODES = f"""exit codes:
  {OK}  completed (check: allowed; describe, approval status: answered)
  {USAGE}  usage: a bad option, an unreadable --input or --token-file
  {TRANSPORT}  no answer: listener unreachable, TLS mismatch, credential refused
  {APPROVAL_REQUIRED}  approval required (check: would require approval)
  {FAILED}  failed or refused (check: denied, hidden or invalid input)
  {CANCELLED}  cancelled"""


class UsageError(Exception):
    """A command line that cannot be acted on (exit 2)."""


def connection(p: argparse.ArgumentParser, default: Callable[[Any], Any]) -> None:
    """The connection, credential and output options, before or after a sub-command."""
    p.add_argument(
        "--address",
        default=default(os.environ.get("CAPGATE_ADDRESS", DEFAULT_ADDRESS)),
        help=f"caller listener: HOST:PORT or unix:///PATH (default: $CAPGATE_ADDRESS, else "
        f"{DEFAULT_ADDRESS}, the demo's agents listener)",
    )
    p.add_argument(
        "--token",
        default=default(None),
        help="bearer JWT (default: --token-file, else $CAPGATE_TOKEN); never printed",
    )
    p.add_argument("--token-file", default=default(None), help="a file holding the bearer JWT")
    p.add_argument(
        "--insecure",
        action="store_true",
        default=default(False),
        help="plaintext instead of TLS (loopback and unix sockets only)",
    )
    p.add_argument(
        "--ca", default=default(None), help="PEM file of the CAs trusted for the listener"
    )
    p.add_argument(
        "--server-name",
        default=default(None),
        help="the name the listener's certificate carries, when not the --address host",
    )
    p.add_argument(
        "-o",
        "--output",
        choices=OUTPUTS,
        default=default("table"),
        help="table (default), json or yaml",
    )
    p.add_argument(
        "--timeout", type=float, default=default(30.0), help="seconds per call (default 30)"
    )


def parser(prog: str, description: str, epilog: str = EXIT_CODES) -> Parser:
    return Parser(
        prog=prog,
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def token(args: argparse.Namespace) -> str:
    """--token, else the content of --token-file, else $CAPGATE_TOKEN ('' when none)."""
    if args.token:
        return str(args.token)
    if args.token_file:
        try:
            return Path(args.token_file).read_text().strip()
        except OSError as exc:
            raise UsageError(f"--token-file: {exc.strerror or exc}") from exc
    return os.environ.get("CAPGATE_TOKEN", "")


def metadata(args: argparse.Namespace) -> tuple[tuple[str, str], ...]:
    bearer = token(args)
    return (("authorization", f"Bearer {bearer}"),) if bearer else ()


def channel(args: argparse.Namespace) -> grpc.Channel:
    if args.insecure:
        return grpc.insecure_channel(args.address)
    try:
        roots = Path(args.ca).read_bytes() if args.ca else None
    except OSError as exc:
        raise UsageError(f"--ca: {exc.strerror or exc}") from exc
    options = [("grpc.ssl_target_name_override", args.server_name)] if args.server_name else []
    return grpc.secure_channel(
        args.address, grpc.ssl_channel_credentials(root_certificates=roots), options=options
    )


def read_input(value: str | None) -> bytes:
    """`--input`: JSON text, `@FILE` for a file's content, `-` for stdin; empty is `{}`."""
    if value is None or value == "":
        return b""
    if value == "-":
        return sys.stdin.buffer.read()
    if value.startswith("@"):
        try:
            return Path(value[1:]).read_bytes()
        except OSError as exc:
            raise UsageError(f"--input {value}: {exc.strerror or exc}") from exc
    return value.encode()


def add_input(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--input",
        "-i",
        default=None,
        metavar="JSON|@FILE|-",
        help="the input object: JSON text, @FILE for a file's content, - for stdin (default: {})",
    )


def stub(ch: grpc.Channel) -> gateway_pb2_grpc.CapabilityGatewayStub:
    return gateway_pb2_grpc.CapabilityGatewayStub(ch)


def as_dict(message: Message) -> dict[str, Any]:
    """Protobuf JSON with the field names of the proto; JSON text fields decoded."""
    data: dict[str, Any] = MessageToDict(message, preserving_proto_field_name=True)
    _decode(data)
    return data


def _decode(data: Any) -> None:
    if isinstance(data, list):
        for item in data:
            _decode(item)
        return
    if not isinstance(data, dict):
        return
    for key in list(data):
        value = data[key]
        if key.endswith("_json") and isinstance(value, str) and value:
            try:
                data[key.removesuffix("_json") or key] = orjson.loads(value)
                del data[key]
            except orjson.JSONDecodeError:
                pass
        else:
            _decode(value)


def dump(data: Any, output: str, out: TextIO = sys.stdout) -> None:
    if output == "yaml":
        out.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    else:
        out.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")


def fields(rows: Sequence[tuple[str, str]], out: TextIO = sys.stdout) -> None:
    """`name:  value` lines, the names aligned."""
    width = max((len(name) for name, _ in rows), default=0) + 2
    for name, value in rows:
        out.write(f"{name + ':':<{width}}{value}\n")


def table(rows: Sequence[Sequence[str]], out: TextIO = sys.stdout) -> None:
    """Columns padded to their widest cell; the first row is the header."""
    if not rows:
        return
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")


def enum_name(enum: Any, value: int, prefix: str) -> str:
    return str(enum.Name(value)).removeprefix(prefix).lower()


def error_code(error: types_pb2.CapabilityError) -> str:
    return str(types_pb2.ErrorCode.Name(error.code)).removeprefix("ERROR_CODE_")


def error_rows(error: types_pb2.CapabilityError) -> list[tuple[str, str]]:
    rows = [("code", error_code(error)), ("message", error.message)]
    if error.stage:
        rows.append(("stage", error.stage))
    if error.retryable:
        rows.append(("retryable", "yes"))
    rows += [(f"issue {i.path or '/'}", i.message) for i in error.issues]
    return rows


def pretty(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def print_result(result: gateway_pb2.ExecutionResult, output: str) -> int:
    """The envelope as `output` says; the exit code of its outcome."""
    outcome = result.WhichOneof("outcome") or "failed"
    code = {
        "completed": OK,
        "approval_required": APPROVAL_REQUIRED,
        "failed": FAILED,
        "cancelled": CANCELLED,
    }[outcome]
    if output != "table":
        data = as_dict(result)
        data.setdefault("status", outcome)
        dump({"status": outcome, **{k: v for k, v in data.items() if k != "status"}}, output)
        return code
    state = enum_name(types_pb2.ExecutionState, result.execution_state, "EXECUTION_STATE_")
    rows = [("status", outcome.replace("_", " ")), ("capability", result.capability_id)]
    rows.append(("execution state", state))
    if result.execution_id:
        rows.append(("execution", result.execution_id))
    if result.approval_id:
        rows.append(("resumes approval", result.approval_id))
    if outcome == "completed":
        fields(rows)
        text = result.completed.output_json
        sys.stdout.write("output:\n" + (pretty(orjson.loads(text)) if text else "{}") + "\n")
    elif outcome == "approval_required":
        a = result.approval_required.approval
        rows += [
            ("code", "APPROVAL_REQUIRED"),
            ("message", "; ".join(a.reasons) or "an approver must decide"),
            ("approval", a.id),
            ("approvers must hold", ", ".join(a.approvers.roles) or "-"),
            ("input hash", a.input_hash),
        ]
        fields(rows)
        sys.stdout.write(
            f"\nnext: an approver decides it (capgate approvals approve {a.id} --hash "
            f"{a.input_hash[:12]}), then: capgate resume {a.id}\n"
        )
    else:
        error = getattr(result, outcome)
        fields(rows + error_rows(error))
    return code


def run(
    prog: str,
    args: argparse.Namespace,
    body: Callable[[gateway_pb2_grpc.CapabilityGatewayStub], int],
) -> int:
    """Open the channel, run `body`, and turn what went wrong into a message and an exit code."""
    try:
        with channel(args) as ch:
            return body(stub(ch))
    except UsageError as exc:
        sys.stderr.write(f"{prog}: {exc}\n")
        return USAGE
    except grpc.RpcError as exc:
        return transport_failure(exc, args)
    except KeyboardInterrupt:
        return CANCELLED
    except BrokenPipeError:
        raise  # the reader went away (`| head`): the entry point ends quietly


def transport_failure(exc: grpc.RpcError, args: argparse.Namespace) -> int:
    status = exc.code() if isinstance(exc, grpc.Call) else None
    name = status.name if status else "UNKNOWN"
    details = exc.details() if isinstance(exc, grpc.Call) else ""
    sys.stderr.write(f"call failed: {name}: {details}\n")
    if status == grpc.StatusCode.UNAUTHENTICATED and not (
        args.token or args.token_file or os.environ.get("CAPGATE_TOKEN")
    ):
        sys.stderr.write(
            "hint: no credentials given: pass --token JWT or --token-file FILE, or set "
            "$CAPGATE_TOKEN (a local one: capgate token --dev --help)\n"
        )
    if status == grpc.StatusCode.UNAVAILABLE:
        hint = advice(
            args.address, tls=not args.insecure, ca_file=args.ca, server_name=args.server_name
        )
        if hint:
            sys.stderr.write(f"hint: {hint}\n")
    return TRANSPORT


def parse(p: Parser, argv: Sequence[str] | None) -> argparse.Namespace | int:
    """The parsed line, or the exit code argparse chose (help: 0, usage: 2)."""
    try:
        return p.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:
        return int(exc.code or 0)


def single(p: Parser) -> Parser:
    """`p` with the connection options (a command without sub-commands)."""
    everywhere(p, [], connection)
    return p
