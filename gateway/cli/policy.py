"""`capgate policy ...` as the gateway runs it: the policy author's tools (policy/cli.py) with a
`--config` registry that types `input` like the gateway does.

A capability without an `input_schema` on an upstream with a `descriptor_set` gets the input
schema the gateway derives from its protobuf request message (gateway/upstream/schema.py), so
`input.order_idd` is reported by `capgate policy check --config` exactly as by `serve`. Upstreams
without a descriptor set are resolved by server reflection only by the gateway; their `input`
stays `dyn` here, and `check` says so in a note.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any


def main(argv: Sequence[str]) -> int:
    from policy.cli import main as policy_main  # noqa: PLC0415 - the gateway's wiring only

    return policy_main(argv, registry_loader=gateway_registry)


def gateway_registry(path: Path) -> dict[str, dict[str, Any]]:
    """The registry of the config at `path`, derived input schemas included."""
    from policy.registry import registry_from_config  # noqa: PLC0415

    return registry_from_config(path, derive_input=_derived_input)


def _derived_input(
    capability: Mapping[str, Any], upstream: Mapping[str, Any], base: Path
) -> Mapping[str, Any] | None:
    from gateway.config.context import resolve  # noqa: PLC0415 - protobuf only with --config
    from gateway.upstream.descriptors import resolve_method  # noqa: PLC0415
    from gateway.upstream.errors import UpstreamConfigError  # noqa: PLC0415
    from gateway.upstream.schema import derive_schema  # noqa: PLC0415

    descriptor_set, method = upstream.get("descriptor_set"), capability.get("method")
    if not isinstance(descriptor_set, str) or not isinstance(method, str) or "{{" in descriptor_set:
        return None  # reflection, a procedure upstream, or a path only the gateway can expand
    try:
        info = resolve_method(_pool(str(resolve(base, descriptor_set))), method)
    except UpstreamConfigError:
        return None  # `capgate config check` reports it; the policy tools type it as dyn
    return derive_schema(info.input)


@cache
def _pool(path: str) -> Any:
    from gateway.upstream.descriptors import load_descriptor_set  # noqa: PLC0415

    return load_descriptor_set(path)
