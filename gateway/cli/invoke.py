"""`capgate invoke CAPABILITY [--input JSON|@FILE|-] [--idempotency-key KEY]` — call a
capability over `CapabilityGateway.Invoke` and print the envelope: status, code, message,
execution state and output (connection, credential and output: gateway/cli/caller.py).

A call that needs approval prints the approval's id and input hash; once an approver approved
it, `capgate resume ID` runs it. The exit code says the outcome (below)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from capgate.v1 import gateway_pb2, gateway_pb2_grpc
from gateway.cli import caller
from gateway.cli.args import Parser


def _parser() -> Parser:
    p = caller.parser("capgate invoke", __doc__.split("\n\n")[0])
    p.add_argument("capability", help="capability id (capgate describe lists them)")
    caller.add_input(p)
    p.add_argument(
        "--idempotency-key",
        default="",
        metavar="KEY",
        help="a repeat with the same key and input answers the recorded result",
    )
    return caller.single(p)


def _invoke(stub: gateway_pb2_grpc.CapabilityGatewayStub, args: argparse.Namespace) -> int:
    request = gateway_pb2.InvokeRequest(
        capability_id=args.capability,
        input_json=caller.read_input(args.input),
        idempotency_key=args.idempotency_key,
    )
    reply = stub.Invoke(request, metadata=caller.metadata(args), timeout=args.timeout)
    return caller.print_result(reply, args.output)


def main(argv: Sequence[str] | None = None) -> int:
    args = caller.parse(_parser(), argv)
    if isinstance(args, int):
        return args
    return caller.run("capgate invoke", args, lambda stub: _invoke(stub, args))
