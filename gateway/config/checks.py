"""All semantic checks of a parsed config, run after the schema so that one run reports both."""

from __future__ import annotations

from gateway.config.capabilities import check_capabilities, check_upstreams
from gateway.config.context import Ctx, mapping, seconds_of, text
from gateway.config.hooks import check_hooks
from gateway.config.limits import check_limits
from gateway.config.listeners import check_listeners
from gateway.values import jws

MAX_ACTOR_TOKEN_LIFETIME_S = 60  # §12: forwarded actor tokens live at most 60 s


def check_all(ctx: Ctx) -> None:
    check_listeners(ctx)
    check_capabilities(ctx, check_upstreams(ctx))
    check_limits(ctx)
    check_hooks(ctx)
    _check_sections(ctx)


def _check_sections(ctx: Ctx) -> None:
    root = ctx.root
    policies = mapping(root.get("policies"))
    paths = policies.get("paths")
    if isinstance(paths, list):
        for i in range(len(paths)):
            ctx.existing_file(paths, i, ("policies", "paths"))

    audit = mapping(root.get("audit"))
    sinks = audit.get("sinks")
    if isinstance(sinks, list) and "file" in sinks and "file" not in audit:
        ctx.fail(("audit", "sinks"), "the file sink needs audit.file")
    if audit.get("strict") is True and isinstance(sinks, list) and not sinks:
        # Seed 001 stage 10: no audit record, no execution. With no sink a strict write would
        # have nowhere to land; webhook notifications are no record (they carry only
        # capability.approval_requested and .approval_escalated).
        ctx.fail(
            ("audit", "strict"),
            "strict audit needs a sink in audit.sinks (webhook notifications keep no record)",
        )
    key = text(audit, "hmac_key")
    if key and len(key.encode()) < jws.HS256_MIN_SECRET_BYTES:
        ctx.fail(("audit", "hmac_key"), f"must be at least {jws.HS256_MIN_SECRET_BYTES} bytes")

    token = mapping(root.get("actor_token"))
    ctx.whole_seconds(token, "lifetime", ("actor_token",))
    ctx.positive(token, "lifetime", ("actor_token",))
    lifetime = seconds_of(token, "lifetime")
    if lifetime is not None and lifetime > MAX_ACTOR_TOKEN_LIFETIME_S:
        ctx.fail(("actor_token", "lifetime"), f"must be at most {MAX_ACTOR_TOKEN_LIFETIME_S}s")
    ctx.existing_file(token, "key_file", ("actor_token",))

    approvals = mapping(root.get("approvals"))
    for key_name in ("default_expires_in", "retention"):
        ctx.positive(approvals, key_name, ("approvals",))
    ctx.positive(mapping(approvals.get("grants")), "max_expires_in", ("approvals", "grants"))
    ctx.positive(mapping(root.get("idempotency")), "ttl", ("idempotency",))
    ctx.positive(mapping(root.get("defaults")), "timeout", ("defaults",))
