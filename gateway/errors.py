"""The one error table (STYLE principle 3): every ErrorCode's stage, retryability, exposure,
public message, terminal audit event and envelope kind, in one literal mapping.

Stages raise `CapabilityError(code)`; only the pipeline runner turns it into an envelope.
`docs/errors.md` is generated from this table and checked for drift by a test.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final


class Code(StrEnum):
    """Governed failure codes; names match the proto enum without its ERROR_CODE_ prefix."""

    CAPABILITY_NOT_FOUND = "CAPABILITY_NOT_FOUND"
    INPUT_INVALID = "INPUT_INVALID"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    FORBIDDEN = "FORBIDDEN"
    POLICY_DENIED = "POLICY_DENIED"
    POLICY_FAILED = "POLICY_FAILED"
    APPROVAL_UNSERIALIZABLE_INPUT = "APPROVAL_UNSERIALIZABLE_INPUT"
    APPROVAL_PENDING = "APPROVAL_PENDING"
    APPROVAL_REJECTED = "APPROVAL_REJECTED"
    APPROVAL_EXPIRED = "APPROVAL_EXPIRED"
    APPROVAL_CONSUMED = "APPROVAL_CONSUMED"
    APPROVAL_INPUT_MISMATCH = "APPROVAL_INPUT_MISMATCH"
    APPROVAL_SELF_APPROVAL = "APPROVAL_SELF_APPROVAL"
    AUDIT_UNAVAILABLE = "AUDIT_UNAVAILABLE"
    EXECUTION_FAILED = "EXECUTION_FAILED"
    TIMEOUT = "TIMEOUT"
    CANCELLED = "CANCELLED"
    OUTPUT_INVALID = "OUTPUT_INVALID"
    APPROVAL_UNAVAILABLE = "APPROVAL_UNAVAILABLE"
    APPROVAL_NOT_FOUND = "APPROVAL_NOT_FOUND"
    IDEMPOTENCY_CONFLICT = "IDEMPOTENCY_CONFLICT"
    IDEMPOTENCY_IN_PROGRESS = "IDEMPOTENCY_IN_PROGRESS"
    INPUT_TOO_LARGE = "INPUT_TOO_LARGE"
    UPSTREAM_UNAVAILABLE = "UPSTREAM_UNAVAILABLE"
    APPROVAL_ALREADY_DECIDED = "APPROVAL_ALREADY_DECIDED"
    APPROVAL_LIMIT_EXCEEDED = "APPROVAL_LIMIT_EXCEEDED"
    RATE_LIMITED = "RATE_LIMITED"
    HOOK_FAILED = "HOOK_FAILED"
    HOOK_DENIED = "HOOK_DENIED"


class Event(StrEnum):
    """Audit event names, exactly as seed 001 (plus the §12 extensions)."""

    REQUESTED = "capability.requested"
    DENIED = "capability.denied"
    APPROVAL_REQUESTED = "capability.approval_requested"
    APPROVED = "capability.approved"
    REJECTED = "capability.rejected"
    STARTED = "capability.started"
    RETRIED = "capability.retried"
    COMPLETED = "capability.completed"
    FAILED = "capability.failed"
    CANCELLED = "capability.cancelled"
    DISCOVERED = "capabilities.discovered"
    APPROVAL_EXPIRED = "capability.approval_expired"
    APPROVAL_CONSUMED = "capability.approval_consumed"
    APPROVAL_RELEASED = "capability.approval_released"
    # Quorum and escalation (docs/approvals.md): one approver's vote that did not yet complete
    # the quorum; a pending approval undecided past its `escalate_after`.
    APPROVAL_VOTED = "capability.approval_voted"
    APPROVAL_ESCALATED = "capability.approval_escalated"
    # Approve with edits (docs/approvals.md "Edits", ADR 0040): an approver changed the input.
    APPROVAL_EDITED = "capability.approval_edited"
    # Standing grants (docs/approvals.md "Grants", ADR 0038).
    GRANT_CREATED = "approval.grant_created"
    GRANT_USED = "approval.grant_used"
    GRANT_REVOKED = "approval.grant_revoked"
    GRANT_EXHAUSTED = "approval.grant_exhausted"
    GRANT_EXPIRED = "approval.grant_expired"


class Kind(StrEnum):
    """Envelope kind a code ends in."""

    FAILED = "failed"
    CANCELLED = "cancelled"


GENERIC_MESSAGE: Final = "The operation failed."  # SI-9


@dataclass(frozen=True, slots=True)
class Other:
    """A public message a code carries instead of its table message: `text` (`{...}` marks what
    varies: a name, or a message chosen by a policy, a hook or an upstream) and `when`."""

    text: str
    when: str


@dataclass(frozen=True, slots=True)
class Spec:
    stage: str
    retryable: bool
    expose_to_model: bool
    message: str
    event: Event
    kind: Kind = Kind.FAILED
    # Every other public message a `CapabilityError(code, message=...)` in gateway/ can carry;
    # a test reads those constructions and compares them with this (docs/errors.md lists both).
    others: tuple[Other, ...] = ()


_D, _F, _C = Event.DENIED, Event.FAILED, Event.CANCELLED

# DESIGN §12: denied for stages 3, 4, 7, 9, POLICY_FAILED and RATE_LIMITED (limits); failed
# for 5, 6, 8, 10-12 and the resume codes; cancelled for TIMEOUT and CANCELLED.
TABLE: Final[dict[Code, Spec]] = {
    Code.CAPABILITY_NOT_FOUND: Spec("discovery", False, True, "Capability not found.", _D),
    Code.INPUT_TOO_LARGE: Spec(
        "input-validation", False, True, "The input exceeds the allowed size.", _F
    ),
    Code.INPUT_INVALID: Spec(
        "input-validation",
        False,
        True,
        "The input is invalid.",
        _F,
        others=(
            Other(
                "The request field {name} is invalid.",
                "`correlation_id` or `idempotency_key` cannot travel as upstream metadata "
                "(docs/upstreams.md); the issue names the field",
            ),
            Other("The request fields {name} and {name} are invalid.", "both of them"),
            Other(
                "{the grant request's problem}",
                'CreateGrant refused a field (docs/approvals.md "Grants"), e.g. `constraint 1:15:'
                " Syntax error ...` at the expression's line:column; the issue names the field",
            ),
            Other(
                "An edit cannot change a value hidden from approvers.",
                "an approver's edit changes, adds or removes a value `redact.approval_input` hides,"
                ' or a parent of one (docs/approvals.md "Edits"); the issue names its path',
            ),
        ),
    ),
    Code.UNAUTHENTICATED: Spec(
        "authentication",
        False,
        True,
        "Authentication is required.",
        _F,
        others=(
            Other(
                "Approval-gated calls need an authenticated actor.",
                "an anonymous actor reaches an approval gate (stage 8)",
            ),
        ),
    ),
    Code.POLICY_DENIED: Spec(
        "policy",
        False,
        True,
        "The request was denied by policy.",
        _D,
        others=(
            Other(
                "{the denying policy's message}",
                "the first enforced deny stance has a `message` (docs/policies.md)",
            ),
        ),
    ),
    Code.POLICY_FAILED: Spec("policy", False, False, "The request was denied by policy.", _D),
    Code.APPROVAL_UNSERIALIZABLE_INPUT: Spec(
        "approval", False, True, "The input cannot be bound to an approval.", _F
    ),
    Code.APPROVAL_UNAVAILABLE: Spec(
        "approval", True, True, "Approvals are not available right now.", _F
    ),
    Code.APPROVAL_LIMIT_EXCEEDED: Spec(
        "approval", True, True, "Too many approvals are pending for this actor.", _F
    ),
    Code.APPROVAL_NOT_FOUND: Spec("approval", False, True, "Approval not found.", _F),
    Code.APPROVAL_PENDING: Spec("approval", True, True, "The approval is still pending.", _F),
    Code.APPROVAL_REJECTED: Spec("approval", False, True, "The approval was rejected.", _F),
    Code.APPROVAL_EXPIRED: Spec("approval", False, True, "The approval has expired.", _F),
    Code.APPROVAL_CONSUMED: Spec("approval", False, True, "The approval was already used.", _F),
    Code.APPROVAL_INPUT_MISMATCH: Spec(
        "approval", False, False, "The approved input does not match.", _F
    ),
    Code.APPROVAL_SELF_APPROVAL: Spec(
        "approval",
        False,
        True,
        "An approval cannot be decided by its requester.",
        _F,
        others=(
            Other(
                "A grant cannot cover its own creator's calls (SI-4).",
                'CreateGrant for the creator as the actor (docs/approvals.md "Grants")',
            ),
        ),
    ),
    Code.APPROVAL_ALREADY_DECIDED: Spec(
        "approval", False, True, "The approval was already decided.", _F
    ),
    Code.IDEMPOTENCY_CONFLICT: Spec(
        "execution", False, True, "The idempotency key was used with a different input.", _F
    ),
    Code.IDEMPOTENCY_IN_PROGRESS: Spec(
        "execution", True, True, "A call with this idempotency key is in progress.", _F
    ),
    Code.AUDIT_UNAVAILABLE: Spec("audit", True, False, "The audit trail is unavailable.", _F),
    Code.UPSTREAM_UNAVAILABLE: Spec(
        "execution",
        True,
        True,
        "The service is unavailable; try again later.",
        _F,
        others=(
            Other(
                "Limits cannot be checked right now; try again later.",
                "Redis cannot answer for a limit that fails closed (`on_redis_down: closed`, "
                "the default of budgets; docs/limits.md)",
            ),
        ),
    ),
    Code.EXECUTION_FAILED: Spec(
        "execution",
        False,
        False,
        GENERIC_MESSAGE,
        _F,
        others=(
            Other(
                "{the upstream's public message}",
                "the upstream declared a contract error (gRPC `capgate.v1.ContractError` or "
                "`google.rpc.ErrorInfo`, an HTTP route's `contract_errors` status, an MCP "
                "tool's `isError` text); exposed, made printable and bounded "
                "(docs/upstreams.md)",
            ),
            Other(
                "The outcome of the earlier call with this idempotency key is unknown; "
                "it is not run again.",
                "a repeat of an idempotency key whose first call's claim lease ended without "
                "an outcome; exposed, not retryable (ADR 0015)",
            ),
        ),
    ),
    Code.FORBIDDEN: Spec(
        "authorization",
        False,
        True,
        "The operation is not permitted.",
        _F,
        others=(
            Other(
                "This approval still needs approvers holding: {the missing roles}.",
                "a quorum vote that cannot help cover the requirement's distinct roles"
                " (docs/approvals.md)",
            ),
            Other(
                "Creating a grant needs an authenticated approver.",
                "CreateGrant by an anonymous caller",
            ),
            Other(
                "Only an approver of the approval may create a grant from it.",
                "CreateGrant from_approval_id by someone lacking the approval's approver roles",
            ),
            Other(
                "Only the grant's creator or an approver holding its roles may revoke it.",
                "RevokeGrant by anyone else",
            ),
            Other(
                "Creating this grant needs the approver roles: {the missing roles}.",
                "the creator lacks a role that approvals of the covered calls need",
            ),
            Other(
                "This capability's approvals cannot be edited.",
                "an edited input for a capability without `approval.editable` (ADR 0040)",
            ),
            Other(
                "The edited input needs an approval this approver cannot give.",
                "the edited call needs a role the approver lacks, or more approvers than the"
                " approval collects (ADR 0040)",
            ),
        ),
    ),
    Code.TIMEOUT: Spec("timeout", True, True, "The operation timed out.", _C, Kind.CANCELLED),
    Code.CANCELLED: Spec(
        "cancellation",
        False,
        True,
        "The operation was cancelled.",
        _C,
        Kind.CANCELLED,
        others=(
            Other(
                "The gateway is shutting down; the call was cancelled.",
                "a shutdown's drain cancelled the call in flight (retryable when nothing was sent)",
            ),
        ),
    ),
    Code.OUTPUT_INVALID: Spec("output-validation", False, False, GENERIC_MESSAGE, _F),
    # Denied, like a policy refusal: a governance decision before anything ran; the envelope
    # carries retry_after (docs/limits.md).
    Code.RATE_LIMITED: Spec(
        "limits", True, True, "A rate limit or budget was reached; retry later.", _D
    ),
    # Governance hooks (docs/hooks.md, ADR 0027): a pre-hook that fails fails closed, before
    # anything ran (retrying is safe); a post-hook's failure is raised with executed=True and
    # retryable=False. Denied like POLICY_FAILED, its cause (hook name, error) only in the audit.
    Code.HOOK_FAILED: Spec("hook", True, False, "A governance check could not be completed.", _D),
    Code.HOOK_DENIED: Spec(
        "hook",
        False,
        True,
        "The request was denied by a governance check.",
        _D,
        others=(
            Other(
                "{the denying hook's message}",
                "the hook's deny answer has a message (its first 512 characters)",
            ),
        ),
    ),
}


@dataclass(frozen=True, slots=True)
class InputIssue:
    """One validation problem: a JSON path and a message that never echoes the value."""

    path: str
    message: str


@dataclass(eq=False)
class CapabilityError(Exception):
    """A governed failure raised by a stage; the runner turns it into the envelope.

    `message` overrides the table's public message (a policy's deny message, an upstream
    contract error); `reason` is the true cause kept for audit and logs, never sent to callers
    (SI-8, SI-9); `retryable`/`expose_to_model` override the table for the one case that needs
    it (an upstream contract error is exposed).
    """

    code: Code
    message: str | None = None
    reason: str | None = None
    issues: tuple[InputIssue, ...] = ()
    executed: bool = False
    retryable: bool | None = None
    expose_to_model: bool | None = None
    concealed: bool = False
    details: dict[str, object] = field(default_factory=dict)
    retry_after_s: float | None = None  # RATE_LIMITED only: seconds until the call can pass

    def __post_init__(self) -> None:
        super().__init__(self.code.value)

    @property
    def spec(self) -> Spec:
        return TABLE[self.code]

    @property
    def public_message(self) -> str:
        return self.message if self.message is not None else self.spec.message

    @property
    def is_retryable(self) -> bool:
        return self.spec.retryable if self.retryable is None else self.retryable

    @property
    def exposed(self) -> bool:
        return self.spec.expose_to_model if self.expose_to_model is None else self.expose_to_model


def not_found(reason: str) -> CapabilityError:
    """SI-8: unknown, unexposed and hidden capabilities all look exactly like this."""
    return CapabilityError(Code.CAPABILITY_NOT_FOUND, reason=reason, concealed=reason != "unknown")
