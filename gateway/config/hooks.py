"""The `hooks` config section: semantic checks (after the schema) and the frozen specs.

Checked here: unique names, the upstream each hook is called over exists and is a `grpc`
upstream (its TLS files are checked with the upstreams), a positive timeout, context
declarations only on hooks that implement pre_invoke, and every capability's `hooks` list
naming capability-scoped hooks that exist. Policies reading `hooks.<name>.<attribute>` are
type-checked against the declarations where the policy set loads (gateway/pipeline/snapshot.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from gateway.config.context import Ctx, items, mapping, seconds_of, text
from gateway.config.hookspec import DEFAULT_TIMEOUT_S, HookSpec

__all__ = ["build_hooks", "check_hooks"]


def check_hooks(ctx: Ctx) -> None:
    root = ctx.root
    upstreams = mapping(root.get("upstreams"))
    scoped: set[str] = set()
    seen: set[str] = set()
    for index, hook in items(root.get("hooks")):
        parts = ("hooks", index)
        name = text(hook, "name")
        if name in seen:
            ctx.fail((*parts, "name"), f"duplicate hook name {name!r}")
        seen.add(name)
        upstream = text(hook, "upstream")
        if upstream and upstream not in upstreams:
            ctx.fail((*parts, "upstream"), f"unknown upstream {upstream!r}")
        elif upstream and text(mapping(upstreams.get(upstream)), "kind", "grpc") != "grpc":
            ctx.fail((*parts, "upstream"), "a hook is called over a grpc upstream (kind grpc)")
        ctx.positive(hook, "timeout", parts)
        calls = hook.get("calls")
        if hook.get("context") and isinstance(calls, list) and "pre_invoke" not in calls:
            ctx.fail((*parts, "context"), "only a pre_invoke hook returns context")
        if text(hook, "scope", "global") == "capability":
            scoped.add(name)
            for key in ("capabilities", "tags"):
                if key in hook:
                    ctx.fail((*parts, key), "selectors are for global hooks")
    for index, cap in items(root.get("capabilities")):
        listed = cap.get("hooks")
        if not isinstance(listed, list):
            continue
        for position, name in enumerate(listed):
            if isinstance(name, str) and name not in scoped:
                ctx.fail(
                    ("capabilities", index, "hooks", position),
                    f"no capability-scoped hook named {name!r} in hooks",
                )


def build_hooks(root: Mapping[str, Any]) -> tuple[HookSpec, ...]:
    """The specs of a config that passed the schema and every check, in config order."""
    out = []
    for node in root.get("hooks", ()):
        timeout = seconds_of(node, "timeout")
        out.append(
            HookSpec(
                name=node["name"],
                upstream=node["upstream"],
                calls=frozenset(node["calls"]),
                scope=node.get("scope", "global"),
                capabilities=tuple(node.get("capabilities", ())),
                tags=tuple(node["tags"]) if "tags" in node else None,
                timeout_s=timeout if timeout is not None else DEFAULT_TIMEOUT_S,
                failure=node.get("failure", "closed"),
                context=MappingProxyType(dict(node.get("context", {}))),
            )
        )
    return tuple(out)
