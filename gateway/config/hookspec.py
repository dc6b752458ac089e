"""The configured hooks (docs/hooks.md): frozen specs built from the `hooks` section."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from capgate.v1 import hook_pb2_grpc
from policy.globs import compile_globs

HookCall = Literal["pre_invoke", "post_invoke", "post_failure"]
AttributeType = Literal["string", "integer", "number", "boolean"]

DEFAULT_TIMEOUT_S = 1.0


@dataclass(frozen=True, slots=True)
class HookSpec:
    """One `hooks[]` entry. `context` declares the attributes its PreInvoke may return."""

    name: str
    upstream: str  # the upstreams entry whose channel settings the hook is called over
    calls: frozenset[HookCall]
    scope: Literal["global", "capability"] = "global"
    capabilities: tuple[str, ...] = ()  # id globs as for policies; () means all
    tags: tuple[str, ...] | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    failure: Literal["closed", "open"] = "closed"
    context: Mapping[str, AttributeType] = field(default_factory=dict)

    def applies_to(self, capability_id: str, tags: Sequence[str], listed: Sequence[str]) -> bool:
        """Global hooks by their selectors; capability-scoped ones where the capability lists
        them (the same rule as for policies, docs/policies.md)."""
        if self.scope == "capability":
            return self.name in listed
        if self.capabilities and not compile_globs(self.capabilities).match(capability_id):
            return False
        return self.tags is None or not set(self.tags).isdisjoint(tags)


def context_types(hooks: Sequence[HookSpec]) -> dict[str, dict[str, str]]:
    """hook name -> attribute -> type: what the policy checker declares as `hooks`."""
    return {h.name: dict(h.context) for h in hooks if "pre_invoke" in h.calls}


@dataclass(frozen=True, slots=True)
class BoundHook:
    """A hook spec with the stub of its (pooled) channel, made once per snapshot (the snapshot
    holds these; gateway/pipeline/hookcalls.py calls them)."""

    spec: HookSpec
    stub: hook_pb2_grpc.HookStub


@dataclass(frozen=True, slots=True)
class CapabilityHooks:
    """The hooks that apply to one capability, per RPC, in config order."""

    pre: tuple[BoundHook, ...] = ()
    post: tuple[BoundHook, ...] = ()
    failure: tuple[BoundHook, ...] = ()


NO_HOOKS = CapabilityHooks()
