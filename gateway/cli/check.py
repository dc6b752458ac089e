"""`capgate check CAPABILITY [--input JSON|@FILE|-]` — what an Invoke with this input would
be answered, without calling anything (`CapabilityGateway.Check`): allowed, approval required
(and why), or the error Invoke would give (connection, credential and output:
gateway/cli/caller.py). The exit code says the decision (below)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, types_pb2
from gateway.cli import caller
from gateway.cli.args import Parser


def _parser() -> Parser:
    p = caller.parser("capgate check", __doc__.split("\n\n")[0])
    p.add_argument("capability", help="capability id")
    caller.add_input(p)
    return caller.single(p)


def _code(reply: gateway_pb2.CheckResponse) -> int:
    if reply.decision == types_pb2.DECISION_ALLOW:
        return caller.OK
    if reply.decision == types_pb2.DECISION_REQUIRE_APPROVAL:
        return caller.APPROVAL_REQUIRED
    return caller.FAILED


def _check(stub: gateway_pb2_grpc.CapabilityGatewayStub, args: argparse.Namespace) -> int:
    request = gateway_pb2.CheckRequest(
        capability_id=args.capability, input_json=caller.read_input(args.input)
    )
    reply = stub.Check(request, metadata=caller.metadata(args), timeout=args.timeout)
    if args.output != "table":
        caller.dump(caller.as_dict(reply), args.output)
        return _code(reply)
    decision = caller.enum_name(types_pb2.Decision, reply.decision, "DECISION_")
    rows = [("capability", args.capability), ("decision", decision.replace("_", " "))]
    rows += [("reason", reason) for reason in reply.approval_reasons]
    if reply.HasField("error"):
        rows += caller.error_rows(reply.error)
    rows += [
        (f"policy {s.policy}", f"{s.mode}: {s.message or s.error or '-'}") for s in reply.stances
    ]
    caller.fields(rows)
    return _code(reply)


def main(argv: Sequence[str] | None = None) -> int:
    args = caller.parse(_parser(), argv)
    if isinstance(args, int):
        return args
    return caller.run("capgate check", args, lambda stub: _check(stub, args))
