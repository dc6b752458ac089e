"""Human approval of capability calls: records in Redis, the ApprovalAdmin service, the CLI.

Public API: `RedisApprovalStore` (stage 8 and Resume), `ApprovalRecord`, `Status`,
`ApprovalConsumed`, `ApprovalEventRecord`, `WatchGap`, `verify_input`.
"""

from gateway.state.approvals.events import ApprovalEventRecord, WatchGap
from gateway.state.approvals.records import ApprovalRecord, Status, verify_input
from gateway.state.approvals.store import ApprovalConsumed, RedisApprovalStore

__all__ = [
    "ApprovalConsumed",
    "ApprovalEventRecord",
    "ApprovalRecord",
    "RedisApprovalStore",
    "Status",
    "WatchGap",
    "verify_input",
]
