"""`capgate approvals` — list, show, approve, reject and watch approvals over ApprovalAdmin.

    capgate approvals list [--status pending ...] [--capability ID] [--requester ID] [--all-pages]
    capgate approvals show ID
    capgate approvals approve ID --hash HASH [--note TEXT] [--edit-input JSON]
    capgate approvals reject ID [--hash HASH] [--note TEXT]
    capgate approvals watch [--after EVENT_ID]

Connection: `--admin HOST:PORT` (default 127.0.0.1:7444, or a unix:// address), a bearer JWT
from `--token` or $CAPGATE_TOKEN, TLS unless `--insecure` (plaintext, for loopback and unix
sockets). `-o/--output json|yaml` prints protobuf JSON lines or YAML documents (`--format`
is the older spelling); table, the default, has column headers (`watch` too). These options
go before or after the command. `approve --hash` takes the full hash (`show`) or a unique
prefix of at least 8 characters (the 12 that `list` shows); an approval ID may be given the
same way, in full or as a unique prefix of at least 8 characters.
Exit codes: 0 success, 1 the gateway refused (error printed), 2 usage, 3 transport failure.
The connection options, printing and exit codes are gateway/cli/admin.py's (`capgate grants`
shares them).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

import grpc

from capgate.v1 import admin_pb2, admin_pb2_grpc, types_pb2
from gateway.cli.admin import OK as _OK
from gateway.cli.admin import REFUSED as _REFUSED
from gateway.cli.admin import USAGE as _USAGE
from gateway.cli.admin import channel as _channel
from gateway.cli.admin import connection as _connection
from gateway.cli.admin import metadata as _metadata
from gateway.cli.admin import print_record as _record
from gateway.cli.admin import print_table
from gateway.cli.admin import refused as _refused
from gateway.cli.admin import transport_failure as _transport_failure
from gateway.cli.admin import when as _time
from gateway.cli.admin import who as _who
from gateway.cli.args import Parser, everywhere

_STATUSES = ("pending", "approved", "rejected", "expired", "consumed", "executed")
_MIN_PREFIX = 8  # of an input hash (`list` shows 12 characters)
_FULL_HASH = 64  # hex characters of SHA-256
_WATCH_ROW = "{:<20}  {:<9}  {:<32}  {:<24}  {}\n"


def _parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="capgate approvals",
        description=__doc__.split("\n")[0],
        epilog="Options of the connection may come before or after the command.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    ls = sub.add_parser("list", help="approvals you may decide (pending by default)")
    ls.add_argument(
        "--status",
        action="append",
        choices=_STATUSES,
        default=[],
        help="only this status (repeatable; default: pending)",
    )
    ls.add_argument("--capability", default="", help="only this capability id")
    ls.add_argument("--requester", default="", help="only approvals this actor id asked for")
    ls.add_argument("--page-size", type=int, default=50, help="rows to show (default 50)")
    ls.add_argument("--all-pages", action="store_true", help="every matching row, not one page")
    show = sub.add_parser("show", help="one approval, with its (redacted) input and full hash")
    show.add_argument("id", help="approval id")
    commands = [ls, show]
    for name in ("approve", "reject"):
        cmd = sub.add_parser(name, help=f"{name} an approval")
        cmd.add_argument("id", help="approval id")
        cmd.add_argument(
            "--hash",
            required=name == "approve",
            default="",
            help="the input hash you reviewed: in full (`show`) or a unique prefix of at least "
            f"{_MIN_PREFIX} characters (`list`)",
        )
        cmd.add_argument("--note", default="", help="a note recorded with the decision")
        if name == "approve":
            cmd.add_argument(
                "--edit-input",
                default="",
                metavar="JSON",
                help="approve this changed input instead (capabilities with approval.editable; "
                "--hash is still the hash of the input you reviewed)",
            )
        commands.append(cmd)
    watch = sub.add_parser("watch", help="stream approval events")
    watch.add_argument("--after", default="", help="event id to continue after")
    commands.append(watch)
    everywhere(p, commands, _connection)
    return p


def _status(approval: types_pb2.Approval) -> str:
    name = str(types_pb2.ApprovalStatus.Name(approval.status))
    return name.removeprefix("APPROVAL_STATUS_").lower()


def _table(approvals: Sequence[types_pb2.Approval], out: TextIO) -> None:
    # One word per column (scripts split rows on whitespace), the hash prefix last.
    rows = [("ID", "CAPABILITY", "STATUS", "REQUESTER", "EXPIRES", "APPROVALS", "HASH")]
    rows += [
        (
            a.id,
            a.capability_id,
            _status(a),
            a.requester.id,
            _time(a.expires_at),
            f"{a.approvals_received}/{max(a.quorum, 1)}",
            a.input_hash[:12],
        )
        for a in approvals
    ]
    print_table(rows, out)


def _progress(a: types_pb2.Approval) -> str:
    """Quorum progress, "1 of 2": approvals counted for the current input of those needed."""
    return f"{a.approvals_received} of {max(a.quorum, 1)}"


def _escalation(a: types_pb2.Approval) -> str:
    if not a.escalation_roles:
        return "-"
    roles = ", ".join(a.escalation_roles)
    if a.HasField("escalated_at"):
        return f"escalated {_time(a.escalated_at)}: {roles} may decide too"
    return f"at {_time(a.escalate_at)} to {roles}"


def _details(a: types_pb2.Approval, out: TextIO) -> None:
    fields = [
        ("id", a.id),
        ("capability", a.capability_id),
        ("status", _status(a)),
        ("surface", a.surface),
        ("requester", _who(a.requester)),
        ("approvers must hold", ", ".join(a.approvers.roles)),
        ("approvals", _progress(a)),
        ("approved by", ", ".join(_who(v) for v in a.approved_by) or "-"),
        ("distinct roles", ", ".join(a.distinct_roles) or "-"),
        ("escalation", _escalation(a)),
        ("risk", a.risk),
        ("side effect", a.side_effect),
        ("reasons", "; ".join(a.reasons)),
        ("created", _time(a.created_at)),
        ("expires", _time(a.expires_at)),
        ("decided", _time(a.decided_at)),
        ("decided by", _who(a.decided_by) if a.HasField("decided_by") else "-"),
        ("via", _who(a.decided_via) if a.HasField("decided_via") else "-"),
        ("note", a.decision_note or "-"),
        ("input hash", a.input_hash),
        ("input", a.input_json or "(not shown)"),
    ]
    if a.edited:  # approve with edits (ADR 0040): the input above is the edited one
        fields += [("original input hash", a.original_input_hash), ("edit (patch)", a.patch_json)]
    for name, value in fields:
        out.write(f"{name + ':':<21}{value}\n")


def _pages(
    stub: admin_pb2_grpc.ApprovalAdminStub, args: argparse.Namespace, statuses: Sequence[str]
) -> Iterator[admin_pb2.ListApprovalsResponse]:
    request = admin_pb2.ListApprovalsRequest(
        statuses=[types_pb2.ApprovalStatus.Value(f"APPROVAL_STATUS_{s.upper()}") for s in statuses],
        capability_id=getattr(args, "capability", ""),
        requester_id=getattr(args, "requester", ""),
        page_size=getattr(args, "page_size", 200),
    )
    while True:
        reply = stub.ListApprovals(request, metadata=_metadata(args), timeout=args.timeout)
        yield reply
        if reply.HasField("error") or not reply.next_page_token:
            return
        request.page_token = reply.next_page_token


def _list(stub: admin_pb2_grpc.ApprovalAdminStub, args: argparse.Namespace) -> int:
    found: list[types_pb2.Approval] = []
    for reply in _pages(stub, args, args.status or ["pending"]):
        if reply.HasField("error"):
            return _refused(reply.error)
        found.extend(reply.approvals)
        # Pages may be short (the server bounds the work per call): fill one screenful.
        if not args.all_pages and len(found) >= args.page_size:
            if reply.next_page_token and args.output == "table":
                sys.stderr.write("more results: use --all-pages\n")
            break
    if args.output != "table":
        for approval in found:
            _record(approval, args.output, sys.stdout)
    else:
        _table(found, sys.stdout)
    return _OK


def _find(
    stub: admin_pb2_grpc.ApprovalAdminStub, args: argparse.Namespace, statuses: Sequence[str]
) -> types_pb2.Approval | int | None:
    """The approval whose id is `args.id`, or the one whose id starts with it (a prefix of at
    least 8 characters, as for hashes); an exit code when the gateway refused or the prefix is
    ambiguous; None when there is none the caller may see. ApprovalAdmin has no single-record
    read: this walks the caller's approvals of `statuses`."""
    wanted = str(args.id)
    matches: dict[str, types_pb2.Approval] = {}
    for reply in _pages(stub, args, statuses):
        if reply.HasField("error"):
            return _refused(reply.error)
        for approval in reply.approvals:
            if approval.id == wanted:
                exact: types_pb2.Approval = approval
                return exact
            if len(wanted) >= _MIN_PREFIX and approval.id.startswith(wanted):
                matches[approval.id] = approval
    if len(matches) > 1:
        sys.stderr.write(f"capgate approvals: {wanted} is the prefix of {len(matches)} ids\n")
        return _USAGE
    only: types_pb2.Approval | None = next(iter(matches.values()), None)
    return only


def _show(stub: admin_pb2_grpc.ApprovalAdminStub, args: argparse.Namespace) -> int:
    found = _find(stub, args, _STATUSES)
    if isinstance(found, int):
        return found
    if found is None:
        sys.stderr.write(f"refused: APPROVAL_NOT_FOUND: no approval {args.id} that you may see\n")
        return _REFUSED
    if args.output == "table":
        _details(found, sys.stdout)
    else:
        _record(found, args.output, sys.stdout)
    return _OK


def _full_hash(approval: types_pb2.Approval | None, args: argparse.Namespace) -> str:
    """The pending approval's input hash when `--hash` is a prefix of it (as `list` shows);
    anything else goes to the gateway as given, which refuses what does not match."""
    prefix = args.hash.lower()
    if not prefix or len(prefix) >= _FULL_HASH or len(prefix) < _MIN_PREFIX or approval is None:
        return str(args.hash)
    full = str(approval.input_hash)
    return full if full.startswith(prefix) else str(args.hash)


def _decide(stub: admin_pb2_grpc.ApprovalAdminStub, args: argparse.Namespace) -> int:
    verdict = admin_pb2.VERDICT_APPROVE if args.command == "approve" else admin_pb2.VERDICT_REJECT
    if args.hash and len(args.hash) < _MIN_PREFIX:
        sys.stderr.write(
            f"capgate approvals: --hash needs at least {_MIN_PREFIX} characters of the hash\n"
        )
        return _USAGE
    # A pending approval named by a prefix of its id (as `list` shows it) or in full; an id
    # the caller cannot see goes to the gateway as given, which answers for it.
    found = _find(stub, args, ("pending",))
    if isinstance(found, int):
        return found
    edited = _edited_input(args)
    if edited is None:
        return _USAGE
    request = admin_pb2.DecideApprovalRequest(
        approval_id=found.id if found is not None else args.id,
        verdict=verdict,
        note=args.note,
        input_hash=_full_hash(found, args),
        edited_input_json=edited,
    )
    reply = stub.DecideApproval(request, metadata=_metadata(args), timeout=args.timeout)
    if reply.HasField("error"):
        return _refused(reply.error)
    if args.output != "table":
        _record(reply.approval, args.output, sys.stdout)
    else:
        edit = f" (edited: {reply.approval.patch_json})" if reply.approval.edited else ""
        sys.stdout.write(f"{reply.approval.id}: {_status(reply.approval)}{edit}\n")
    return _OK


def _edited_input(args: argparse.Namespace) -> bytes | None:
    """`--edit-input` as the request's bytes (b"" without it); None, said on stderr without
    the text, when it is not JSON (the gateway validates the rest)."""
    text = str(getattr(args, "edit_input", ""))
    if not text:
        return b""
    try:
        json.loads(text)
    except ValueError:
        sys.stderr.write("capgate approvals: --edit-input is not valid JSON\n")
        return None
    return text.encode()


def _watch(stub: admin_pb2_grpc.ApprovalAdminStub, args: argparse.Namespace) -> int:
    request = admin_pb2.WatchApprovalsRequest(after_event_id=args.after)
    if args.output == "table":
        # A stream has no widest cell to wait for: fixed widths, the header once, first.
        sys.stdout.write(_WATCH_ROW.format("EVENT", "TYPE", "APPROVAL", "CAPABILITY", "STATUS"))
        sys.stdout.flush()
    for event in stub.WatchApprovals(request, metadata=_metadata(args)):
        if args.output != "table":
            _record(event, args.output, sys.stdout)
        else:
            a = event.approval
            sys.stdout.write(
                _WATCH_ROW.format(event.event_id, event.type, a.id, a.capability_id, _status(a))
            )
        sys.stdout.flush()
    return _OK


_COMMANDS: dict[str, Any] = {
    "list": _list,
    "show": _show,
    "approve": _decide,
    "reject": _decide,
    "watch": _watch,
}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        with _channel(args) as channel:
            return int(_COMMANDS[args.command](admin_pb2_grpc.ApprovalAdminStub(channel), args))
    except grpc.RpcError as exc:
        return _transport_failure(exc, args)
    except KeyboardInterrupt:
        return _OK
    except BrokenPipeError:
        raise  # the reader went away (`| head`): the entry point ends quietly
    except OSError as exc:
        sys.stderr.write(f"capgate approvals: {exc.strerror or exc}\n")
        return _USAGE
