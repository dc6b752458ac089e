"""`CacheAdmin.PurgeCache` — delete every cached entry of one capability (docs/cache.md); only on
admin listeners, for any identity they authenticate (as `PolicyAdmin.Explain`)."""

from __future__ import annotations

import logging
import re
from typing import Any

import grpc

from capgate.v1 import admin_pb2, admin_pb2_grpc
from gateway.audit.events import caller_text
from gateway.pipeline.call import Runtime
from gateway.state.connections import RedisUnavailable
from gateway.transport.servicer import Stage1

log = logging.getLogger("capgate.cache")

# The capability id grammar of the config (gateway/config/schema): anything else has no entries.
_CAPABILITY_ID = re.compile(r"[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*")


class CacheAdminServicer(admin_pb2_grpc.CacheAdminServicer):  # type: ignore[misc]  # generated base is untyped
    def __init__(self, stage1: Stage1, runtime: Runtime) -> None:
        self._stage1 = stage1
        self._rt = runtime

    async def PurgeCache(
        self, request: admin_pb2.PurgeCacheRequest, context: Any
    ) -> admin_pb2.PurgeCacheResponse:
        actor = await self._stage1.actor(context)
        capability_id = request.capability_id
        if not _CAPABILITY_ID.fullmatch(capability_id) or len(capability_id) > 256:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "capability_id must be a capability id"
            )
        cache = self._rt.cache
        if cache is None:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION, "this gateway has no result cache (no Redis)"
            )
        try:
            deleted = await cache.purge(capability_id)
        except RedisUnavailable:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the cache's Redis is unavailable")
        who = caller_text(actor.id)  # the token's subject: escaped, like the audit trail keeps it
        log.info("cache of %s purged by %s: %d entries", capability_id, who, deleted)
        return admin_pb2.PurgeCacheResponse(deleted=deleted)
