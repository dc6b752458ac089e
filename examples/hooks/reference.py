"""The reference governance hooks, in Python (the Go twin: clients/go/examples/hook).

- `standing` (PreInvoke): looks up the standing of the customer an order belongs to and
  returns it as context, `hooks.standing.in_arrears` (boolean) and `hooks.standing.tier`
  (string), for policies to use (examples/hooks/policies/standing.yaml: a refund to a customer
  in arrears needs a manager's approval). It never decides itself: policies do.
- `dlp` (PostInvoke): replaces e-mail addresses and card-number-like digit runs in any string
  of the output by a marker (`updated_output`); the gateway validates the result against the
  output schema again, then redacts it.

Run it on its own: `python -m examples.hooks.reference --address 127.0.0.1:7450` (or
`unix:///path/hooks.sock`); it prints `listening <port>` when it serves.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
from typing import Any

import grpc
from capgate_client.hook import (
    PostInvoke,
    PostInvokeResult,
    PreInvoke,
    PreInvokeResult,
    serve_hooks,
)

# The demo's standing ledger: order -> customer -> standing (a real hook would ask a billing
# system; an unknown customer gets no context at all, so policies see no standing).
ORDER_CUSTOMERS = {"o-1001": "c-1", "o-1002": "c-1", "o-1003": "c-2", "o-1004": "c-2"}
STANDING = {"c-1": (False, "gold"), "c-2": (True, "basic")}

EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
CARD = re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)")
MARK = "[removed by dlp]"


def standing(call: PreInvoke) -> PreInvokeResult:
    value = call.input if isinstance(call.input, dict) else {}
    customer = value.get("customer_id") or ORDER_CUSTOMERS.get(str(value.get("order_id")))
    found = STANDING.get(str(customer))
    if found is None:
        return PreInvokeResult()
    in_arrears, tier = found
    return PreInvokeResult(context={"in_arrears": in_arrears, "tier": tier})


def scrub(value: Any) -> tuple[Any, bool]:
    """`value` with sensitive strings replaced, and whether anything was."""
    if isinstance(value, str):
        cleaned = CARD.sub(MARK, EMAIL.sub(MARK, value))
        return cleaned, cleaned != value
    if isinstance(value, list):
        items = [scrub(v) for v in value]
        return [v for v, _ in items], any(c for _, c in items)
    if isinstance(value, dict):
        pairs = {k: scrub(v) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(c for _, c in pairs.values())
    return value, False


def dlp(call: PostInvoke) -> PostInvokeResult:
    cleaned, changed = scrub(call.output)
    return PostInvokeResult(updated_output=cleaned) if changed else PostInvokeResult()


async def serve(address: str = "127.0.0.1:0") -> tuple[grpc.aio.Server, int]:
    """Both reference hooks on one server (configured as hooks `standing` and `dlp`)."""
    return await serve_hooks(address, pre_invoke={"standing": standing}, post_invoke={"dlp": dlp})


async def _main(address: str) -> None:
    server, port = await serve(address)
    print(f"listening {port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="127.0.0.1:0")
    asyncio.run(_main(parser.parse_args().address))
