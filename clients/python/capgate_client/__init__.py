"""capgate's Python client: async-first (`AsyncClient`, `AsyncAdminClient`) with a blocking facade
(`Client`, `AdminClient`). Outcomes are dataclasses for `match`; failures keep the `ErrorCode`.

The server-side helper for upstream services is `capgate_client.server` (extra `[server]`).
"""

from capgate_client.aio import AsyncAdminClient, AsyncClient
from capgate_client.calls import ApprovalPage, CheckResult, Decision, GrantPage
from capgate_client.connection import LocalActor, Tls
from capgate_client.envelope import (
    Actor,
    Approval,
    ApprovalRequired,
    ApprovalStatus,
    Cancelled,
    CapabilityDescriptor,
    Catalog,
    Completed,
    Execution,
    Failed,
    Grant,
    GrantStatus,
    Outcome,
    PatchOperation,
)
from capgate_client.errors import CapgateError, ErrorCode, ExecutionState, Issue
from capgate_client.sync import AdminClient, Client

__all__ = [
    "Actor",
    "AdminClient",
    "Approval",
    "ApprovalPage",
    "ApprovalRequired",
    "ApprovalStatus",
    "AsyncAdminClient",
    "AsyncClient",
    "Cancelled",
    "CapabilityDescriptor",
    "CapgateError",
    "Catalog",
    "CheckResult",
    "Client",
    "Completed",
    "Decision",
    "ErrorCode",
    "Execution",
    "ExecutionState",
    "Failed",
    "Grant",
    "GrantPage",
    "GrantStatus",
    "Issue",
    "LocalActor",
    "Outcome",
    "PatchOperation",
    "Tls",
]
