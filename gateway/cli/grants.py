"""`capgate grants` — create, list, show and revoke standing grants over ApprovalAdmin.

    capgate grants create (--actor ID --issuer ISSUER | --role ROLE) (--capability ID | --tag TAG)
                          --expires-in DURATION [--constraint CEL] [--amount CEL]
                          [--max-total N] [--max-uses N] [--note TEXT]
    capgate grants create --from-approval ID --expires-in DURATION [...]
    capgate grants list [--status active ...] [--capability ID] [--actor ID] [--all-pages]
    capgate grants show ID
    capgate grants revoke ID [--note TEXT]

A grant approves ahead of time the calls it covers (docs/approvals.md "Grants"): whom (one actor
or a role), what (one capability or a tag), which inputs (`--constraint`, CEL over `input`
and `actor`), until when (`--expires-in`, e.g. 1h), how often (`--max-uses`) and how much
(`--amount`, a CEL number over `input`, and `--max-total`). `--from-approval` takes whom and
what from an approval you may decide: "approve this and similar calls for an hour up to 500".
Connection options, `-o/--output` and exit codes are those of `capgate approvals`
(0 success, 1 the gateway refused, 2 usage, 3 transport failure).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

import grpc
from google.protobuf.duration_pb2 import Duration

from capgate.v1 import admin_pb2, admin_pb2_grpc, types_pb2
from gateway.cli import admin
from gateway.cli.args import Parser, everywhere
from policy.durations import parse_duration

_STATUSES = ("active", "revoked", "exhausted", "expired")


def _parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="capgate grants",
        description=__doc__.split("\n")[0],
        epilog="Options of the connection may come before or after the command.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    create = sub.add_parser("create", help="create a grant (you must be an approver of its calls)")
    whom = create.add_argument_group("whom (one; default with --from-approval: its requester)")
    whom.add_argument("--actor", default="", help="one actor's id (with --issuer)")
    whom.add_argument("--issuer", default="", help="the issuer of --actor")
    whom.add_argument("--role", default="", help="every actor holding this role")
    what = create.add_argument_group("what (one; default with --from-approval: its capability)")
    what.add_argument("--capability", default="", help="one capability id")
    what.add_argument("--tag", default="", help="every capability carrying this tag")
    create.add_argument(
        "--from-approval", default="", metavar="ID", help="an approval you may decide"
    )
    create.add_argument(
        "--expires-in", required=True, metavar="DURATION", help="how long it lives, e.g. 1h, 30m"
    )
    create.add_argument("--constraint", default="", metavar="CEL", help="bool over input, actor")
    create.add_argument("--amount", default="", metavar="CEL", help="a number over input")
    create.add_argument(
        "--max-total", type=float, default=0.0, help="cap on the amounts' sum (needs --amount)"
    )
    create.add_argument("--max-uses", type=int, default=0, help="cap on the calls it covers")
    create.add_argument("--note", default="", help="a note recorded with the grant")
    ls = sub.add_parser("list", help="grants you may see (active by default)")
    ls.add_argument(
        "--status",
        action="append",
        choices=_STATUSES,
        default=[],
        help="only this status (repeatable; default: active)",
    )
    ls.add_argument("--capability", default="", help="only grants for this capability id")
    ls.add_argument("--actor", default="", help="only grants for this actor id")
    ls.add_argument("--page-size", type=int, default=50, help="rows to show (default 50)")
    ls.add_argument("--all-pages", action="store_true", help="every matching row, not one page")
    show = sub.add_parser("show", help="one grant")
    show.add_argument("id", help="grant id")
    revoke = sub.add_parser("revoke", help="revoke a grant, at once on every gateway")
    revoke.add_argument("id", help="grant id")
    revoke.add_argument("--note", default="", help="a note recorded with the revocation")
    everywhere(p, [create, ls, show, revoke], admin.connection)
    return p


def _status(grant: types_pb2.Grant) -> str:
    name = str(types_pb2.GrantStatus.Name(grant.status))
    return name.removeprefix("GRANT_STATUS_").lower()


def _whom(grant: types_pb2.Grant) -> str:
    return f"role:{grant.role}" if grant.role else admin.who(grant.actor)


def _what(grant: types_pb2.Grant) -> str:
    return f"tag:{grant.tag}" if grant.tag else grant.capability_id


def _uses(grant: types_pb2.Grant) -> str:
    return f"{grant.uses}/{grant.max_uses}" if grant.max_uses else str(grant.uses)


def _total(grant: types_pb2.Grant) -> str:
    if not grant.amount:
        return "-"
    return f"{grant.total:g}/{grant.max_total:g}" if grant.max_total else f"{grant.total:g}"


def _table(grants: Sequence[types_pb2.Grant], out: TextIO) -> None:
    rows = [("ID", "WHOM", "WHAT", "STATUS", "USES", "TOTAL", "EXPIRES")]
    rows += [
        (g.id, _whom(g), _what(g), _status(g), _uses(g), _total(g), admin.when(g.expires_at))
        for g in grants
    ]
    admin.print_table(rows, out)


def _details(g: types_pb2.Grant, out: TextIO) -> None:
    fields = [
        ("id", g.id),
        ("status", _status(g)),
        ("whom", _whom(g)),
        ("what", _what(g)),
        ("constraint", g.constraint or "-"),
        ("uses", _uses(g)),
        ("amount", g.amount or "-"),
        ("total", _total(g)),
        ("created", admin.when(g.created_at)),
        ("expires", admin.when(g.expires_at)),
        ("created by", admin.who(g.created_by)),
        ("via", admin.who(g.created_via) if g.HasField("created_via") else "-"),
        ("approver roles", ", ".join(g.approver_roles) or "-"),
        ("from approval", g.from_approval_id or "-"),
        ("note", g.note or "-"),
        ("revoked", admin.when(g.revoked_at)),
        ("revoked by", admin.who(g.revoked_by) if g.HasField("revoked_by") else "-"),
    ]
    for name, value in fields:
        out.write(f"{name + ':':<16}{value}\n")


def _print(grant: types_pb2.Grant, args: argparse.Namespace) -> int:
    if args.output == "table":
        _details(grant, sys.stdout)
    else:
        admin.print_record(grant, args.output, sys.stdout)
    return admin.OK


def _usage(message: str) -> int:
    sys.stderr.write(f"capgate grants: {message}\n")
    return admin.USAGE


def _create(stub: admin_pb2_grpc.ApprovalAdminStub, args: argparse.Namespace) -> int:
    if bool(args.actor) != bool(args.issuer):
        return _usage("--actor and --issuer go together")
    try:
        lifetime = parse_duration(args.expires_in)
    except ValueError as exc:
        return _usage(f"--expires-in: {exc}")
    expires_in = Duration()
    expires_in.FromTimedelta(lifetime)
    request = admin_pb2.CreateGrantRequest(
        role=args.role,
        capability_id=args.capability,
        tag=args.tag,
        constraint=args.constraint,
        expires_in=expires_in,
        max_uses=args.max_uses,
        amount=args.amount,
        max_total=args.max_total,
        note=args.note,
        from_approval_id=args.from_approval,
    )
    if args.actor:
        request.actor.CopyFrom(types_pb2.Actor(id=args.actor, issuer=args.issuer))
    reply = stub.CreateGrant(request, metadata=admin.metadata(args), timeout=args.timeout)
    if reply.HasField("error"):
        return _refused(reply.error)
    return _print(reply.grant, args)


def _refused(error: types_pb2.CapabilityError) -> int:
    """The refusal, and each issue's own line (an expression's line:column is there)."""
    code = admin.refused(error)
    for issue in error.issues:
        if issue.message != error.message:
            sys.stderr.write(f"  {issue.path}: {issue.message}\n")
    return code


def _pages(
    stub: admin_pb2_grpc.ApprovalAdminStub, args: argparse.Namespace
) -> Iterator[admin_pb2.ListGrantsResponse]:
    request = admin_pb2.ListGrantsRequest(
        statuses=[
            types_pb2.GrantStatus.Value(f"GRANT_STATUS_{s.upper()}")
            for s in args.status or ["active"]
        ],
        capability_id=args.capability,
        actor_id=args.actor,
        page_size=args.page_size,
    )
    while True:
        reply = stub.ListGrants(request, metadata=admin.metadata(args), timeout=args.timeout)
        yield reply
        if reply.HasField("error") or not reply.next_page_token:
            return
        request.page_token = reply.next_page_token


def _list(stub: admin_pb2_grpc.ApprovalAdminStub, args: argparse.Namespace) -> int:
    found: list[types_pb2.Grant] = []
    for reply in _pages(stub, args):
        if reply.HasField("error"):
            return _refused(reply.error)
        found.extend(reply.grants)
        # Pages may be short (the server bounds the work per call): fill one screenful.
        if not args.all_pages and len(found) >= args.page_size:
            if reply.next_page_token and args.output == "table":
                sys.stderr.write("more results: use --all-pages\n")
            break
    if args.output == "table":
        _table(found, sys.stdout)
    else:
        for grant in found:
            admin.print_record(grant, args.output, sys.stdout)
    return admin.OK


def _show(stub: admin_pb2_grpc.ApprovalAdminStub, args: argparse.Namespace) -> int:
    request = admin_pb2.GetGrantRequest(grant_id=args.id)
    reply = stub.GetGrant(request, metadata=admin.metadata(args), timeout=args.timeout)
    if reply.HasField("error"):
        return _refused(reply.error)
    return _print(reply.grant, args)


def _revoke(stub: admin_pb2_grpc.ApprovalAdminStub, args: argparse.Namespace) -> int:
    request = admin_pb2.RevokeGrantRequest(grant_id=args.id, note=args.note)
    reply = stub.RevokeGrant(request, metadata=admin.metadata(args), timeout=args.timeout)
    if reply.HasField("error"):
        return _refused(reply.error)
    if args.output == "table":
        sys.stdout.write(f"{reply.grant.id}: {_status(reply.grant)}\n")
        return admin.OK
    return _print(reply.grant, args)


_COMMANDS: dict[str, Any] = {"create": _create, "list": _list, "show": _show, "revoke": _revoke}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        with admin.channel(args) as channel:
            return int(_COMMANDS[args.command](admin_pb2_grpc.ApprovalAdminStub(channel), args))
    except grpc.RpcError as exc:
        return admin.transport_failure(exc, args)
    except KeyboardInterrupt:
        return admin.OK
    except BrokenPipeError:
        raise  # the reader went away (`| head`): the entry point ends quietly
    except OSError as exc:
        sys.stderr.write(f"capgate grants: {exc.strerror or exc}\n")
        return admin.USAGE
