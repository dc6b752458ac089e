import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ErrorCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_CODE_UNSPECIFIED: _ClassVar[ErrorCode]
    ERROR_CODE_CAPABILITY_NOT_FOUND: _ClassVar[ErrorCode]
    ERROR_CODE_INPUT_INVALID: _ClassVar[ErrorCode]
    ERROR_CODE_UNAUTHENTICATED: _ClassVar[ErrorCode]
    ERROR_CODE_FORBIDDEN: _ClassVar[ErrorCode]
    ERROR_CODE_POLICY_DENIED: _ClassVar[ErrorCode]
    ERROR_CODE_POLICY_FAILED: _ClassVar[ErrorCode]
    ERROR_CODE_APPROVAL_UNSERIALIZABLE_INPUT: _ClassVar[ErrorCode]
    ERROR_CODE_APPROVAL_PENDING: _ClassVar[ErrorCode]
    ERROR_CODE_APPROVAL_REJECTED: _ClassVar[ErrorCode]
    ERROR_CODE_APPROVAL_EXPIRED: _ClassVar[ErrorCode]
    ERROR_CODE_APPROVAL_CONSUMED: _ClassVar[ErrorCode]
    ERROR_CODE_APPROVAL_INPUT_MISMATCH: _ClassVar[ErrorCode]
    ERROR_CODE_APPROVAL_SELF_APPROVAL: _ClassVar[ErrorCode]
    ERROR_CODE_AUDIT_UNAVAILABLE: _ClassVar[ErrorCode]
    ERROR_CODE_EXECUTION_FAILED: _ClassVar[ErrorCode]
    ERROR_CODE_TIMEOUT: _ClassVar[ErrorCode]
    ERROR_CODE_CANCELLED: _ClassVar[ErrorCode]
    ERROR_CODE_OUTPUT_INVALID: _ClassVar[ErrorCode]
    ERROR_CODE_APPROVAL_UNAVAILABLE: _ClassVar[ErrorCode]
    ERROR_CODE_APPROVAL_NOT_FOUND: _ClassVar[ErrorCode]
    ERROR_CODE_IDEMPOTENCY_CONFLICT: _ClassVar[ErrorCode]
    ERROR_CODE_IDEMPOTENCY_IN_PROGRESS: _ClassVar[ErrorCode]
    ERROR_CODE_INPUT_TOO_LARGE: _ClassVar[ErrorCode]
    ERROR_CODE_UPSTREAM_UNAVAILABLE: _ClassVar[ErrorCode]
    ERROR_CODE_APPROVAL_ALREADY_DECIDED: _ClassVar[ErrorCode]
    ERROR_CODE_APPROVAL_LIMIT_EXCEEDED: _ClassVar[ErrorCode]
    ERROR_CODE_RATE_LIMITED: _ClassVar[ErrorCode]
    ERROR_CODE_HOOK_FAILED: _ClassVar[ErrorCode]
    ERROR_CODE_HOOK_DENIED: _ClassVar[ErrorCode]

class ExecutionState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EXECUTION_STATE_UNSPECIFIED: _ClassVar[ExecutionState]
    EXECUTION_STATE_NOT_STARTED: _ClassVar[ExecutionState]
    EXECUTION_STATE_COMPLETED: _ClassVar[ExecutionState]
    EXECUTION_STATE_UNKNOWN: _ClassVar[ExecutionState]

class Decision(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DECISION_UNSPECIFIED: _ClassVar[Decision]
    DECISION_ALLOW: _ClassVar[Decision]
    DECISION_REQUIRE_APPROVAL: _ClassVar[Decision]
    DECISION_HIDE: _ClassVar[Decision]
    DECISION_DENY: _ClassVar[Decision]

class ApprovalStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    APPROVAL_STATUS_UNSPECIFIED: _ClassVar[ApprovalStatus]
    APPROVAL_STATUS_PENDING: _ClassVar[ApprovalStatus]
    APPROVAL_STATUS_APPROVED: _ClassVar[ApprovalStatus]
    APPROVAL_STATUS_REJECTED: _ClassVar[ApprovalStatus]
    APPROVAL_STATUS_EXPIRED: _ClassVar[ApprovalStatus]
    APPROVAL_STATUS_CONSUMED: _ClassVar[ApprovalStatus]
    APPROVAL_STATUS_EXECUTED: _ClassVar[ApprovalStatus]

class GrantStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    GRANT_STATUS_UNSPECIFIED: _ClassVar[GrantStatus]
    GRANT_STATUS_ACTIVE: _ClassVar[GrantStatus]
    GRANT_STATUS_REVOKED: _ClassVar[GrantStatus]
    GRANT_STATUS_EXHAUSTED: _ClassVar[GrantStatus]
    GRANT_STATUS_EXPIRED: _ClassVar[GrantStatus]
ERROR_CODE_UNSPECIFIED: ErrorCode
ERROR_CODE_CAPABILITY_NOT_FOUND: ErrorCode
ERROR_CODE_INPUT_INVALID: ErrorCode
ERROR_CODE_UNAUTHENTICATED: ErrorCode
ERROR_CODE_FORBIDDEN: ErrorCode
ERROR_CODE_POLICY_DENIED: ErrorCode
ERROR_CODE_POLICY_FAILED: ErrorCode
ERROR_CODE_APPROVAL_UNSERIALIZABLE_INPUT: ErrorCode
ERROR_CODE_APPROVAL_PENDING: ErrorCode
ERROR_CODE_APPROVAL_REJECTED: ErrorCode
ERROR_CODE_APPROVAL_EXPIRED: ErrorCode
ERROR_CODE_APPROVAL_CONSUMED: ErrorCode
ERROR_CODE_APPROVAL_INPUT_MISMATCH: ErrorCode
ERROR_CODE_APPROVAL_SELF_APPROVAL: ErrorCode
ERROR_CODE_AUDIT_UNAVAILABLE: ErrorCode
ERROR_CODE_EXECUTION_FAILED: ErrorCode
ERROR_CODE_TIMEOUT: ErrorCode
ERROR_CODE_CANCELLED: ErrorCode
ERROR_CODE_OUTPUT_INVALID: ErrorCode
ERROR_CODE_APPROVAL_UNAVAILABLE: ErrorCode
ERROR_CODE_APPROVAL_NOT_FOUND: ErrorCode
ERROR_CODE_IDEMPOTENCY_CONFLICT: ErrorCode
ERROR_CODE_IDEMPOTENCY_IN_PROGRESS: ErrorCode
ERROR_CODE_INPUT_TOO_LARGE: ErrorCode
ERROR_CODE_UPSTREAM_UNAVAILABLE: ErrorCode
ERROR_CODE_APPROVAL_ALREADY_DECIDED: ErrorCode
ERROR_CODE_APPROVAL_LIMIT_EXCEEDED: ErrorCode
ERROR_CODE_RATE_LIMITED: ErrorCode
ERROR_CODE_HOOK_FAILED: ErrorCode
ERROR_CODE_HOOK_DENIED: ErrorCode
EXECUTION_STATE_UNSPECIFIED: ExecutionState
EXECUTION_STATE_NOT_STARTED: ExecutionState
EXECUTION_STATE_COMPLETED: ExecutionState
EXECUTION_STATE_UNKNOWN: ExecutionState
DECISION_UNSPECIFIED: Decision
DECISION_ALLOW: Decision
DECISION_REQUIRE_APPROVAL: Decision
DECISION_HIDE: Decision
DECISION_DENY: Decision
APPROVAL_STATUS_UNSPECIFIED: ApprovalStatus
APPROVAL_STATUS_PENDING: ApprovalStatus
APPROVAL_STATUS_APPROVED: ApprovalStatus
APPROVAL_STATUS_REJECTED: ApprovalStatus
APPROVAL_STATUS_EXPIRED: ApprovalStatus
APPROVAL_STATUS_CONSUMED: ApprovalStatus
APPROVAL_STATUS_EXECUTED: ApprovalStatus
GRANT_STATUS_UNSPECIFIED: GrantStatus
GRANT_STATUS_ACTIVE: GrantStatus
GRANT_STATUS_REVOKED: GrantStatus
GRANT_STATUS_EXHAUSTED: GrantStatus
GRANT_STATUS_EXPIRED: GrantStatus

class Issue(_message.Message):
    __slots__ = ("path", "message")
    PATH_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    path: str
    message: str
    def __init__(self, path: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class CapabilityError(_message.Message):
    __slots__ = ("code", "stage", "message", "retryable", "expose_to_model", "issues", "executed_before_failure", "execution_state", "retry_after")
    CODE_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    EXPOSE_TO_MODEL_FIELD_NUMBER: _ClassVar[int]
    ISSUES_FIELD_NUMBER: _ClassVar[int]
    EXECUTED_BEFORE_FAILURE_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_STATE_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    code: ErrorCode
    stage: str
    message: str
    retryable: bool
    expose_to_model: bool
    issues: _containers.RepeatedCompositeFieldContainer[Issue]
    executed_before_failure: bool
    execution_state: ExecutionState
    retry_after: _duration_pb2.Duration
    def __init__(self, code: _Optional[_Union[ErrorCode, str]] = ..., stage: _Optional[str] = ..., message: _Optional[str] = ..., retryable: _Optional[bool] = ..., expose_to_model: _Optional[bool] = ..., issues: _Optional[_Iterable[_Union[Issue, _Mapping]]] = ..., executed_before_failure: _Optional[bool] = ..., execution_state: _Optional[_Union[ExecutionState, str]] = ..., retry_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class Actor(_message.Message):
    __slots__ = ("id", "issuer", "kind", "roles")
    ID_FIELD_NUMBER: _ClassVar[int]
    ISSUER_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    id: str
    issuer: str
    kind: str
    roles: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., issuer: _Optional[str] = ..., kind: _Optional[str] = ..., roles: _Optional[_Iterable[str]] = ...) -> None: ...

class ApproverConstraint(_message.Message):
    __slots__ = ("roles",)
    ROLES_FIELD_NUMBER: _ClassVar[int]
    roles: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, roles: _Optional[_Iterable[str]] = ...) -> None: ...

class Approval(_message.Message):
    __slots__ = ("id", "capability_id", "status", "reasons", "message", "created_at", "expires_at", "decided_at", "requester", "decided_by", "decided_via", "decision_note", "input_hash", "input_json", "risk", "side_effect", "approvers", "requesting_execution_id", "resumed_execution_id", "surface", "capability_description", "requester_on_behalf_of", "self_approval_refused", "edited", "original_input_hash", "patch_json", "edited_by", "quorum", "approvals_received", "distinct_roles", "approved_by", "escalated_at", "escalation_roles", "escalate_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    DECIDED_AT_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    DECIDED_VIA_FIELD_NUMBER: _ClassVar[int]
    DECISION_NOTE_FIELD_NUMBER: _ClassVar[int]
    INPUT_HASH_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    RISK_FIELD_NUMBER: _ClassVar[int]
    SIDE_EFFECT_FIELD_NUMBER: _ClassVar[int]
    APPROVERS_FIELD_NUMBER: _ClassVar[int]
    REQUESTING_EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    RESUMED_EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    SURFACE_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_ON_BEHALF_OF_FIELD_NUMBER: _ClassVar[int]
    SELF_APPROVAL_REFUSED_FIELD_NUMBER: _ClassVar[int]
    EDITED_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_INPUT_HASH_FIELD_NUMBER: _ClassVar[int]
    PATCH_JSON_FIELD_NUMBER: _ClassVar[int]
    EDITED_BY_FIELD_NUMBER: _ClassVar[int]
    QUORUM_FIELD_NUMBER: _ClassVar[int]
    APPROVALS_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    DISTINCT_ROLES_FIELD_NUMBER: _ClassVar[int]
    APPROVED_BY_FIELD_NUMBER: _ClassVar[int]
    ESCALATED_AT_FIELD_NUMBER: _ClassVar[int]
    ESCALATION_ROLES_FIELD_NUMBER: _ClassVar[int]
    ESCALATE_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    capability_id: str
    status: ApprovalStatus
    reasons: _containers.RepeatedScalarFieldContainer[str]
    message: str
    created_at: _timestamp_pb2.Timestamp
    expires_at: _timestamp_pb2.Timestamp
    decided_at: _timestamp_pb2.Timestamp
    requester: Actor
    decided_by: Actor
    decided_via: Actor
    decision_note: str
    input_hash: str
    input_json: str
    risk: str
    side_effect: str
    approvers: ApproverConstraint
    requesting_execution_id: str
    resumed_execution_id: str
    surface: str
    capability_description: str
    requester_on_behalf_of: str
    self_approval_refused: bool
    edited: bool
    original_input_hash: str
    patch_json: str
    edited_by: Actor
    quorum: int
    approvals_received: int
    distinct_roles: _containers.RepeatedScalarFieldContainer[str]
    approved_by: _containers.RepeatedCompositeFieldContainer[Actor]
    escalated_at: _timestamp_pb2.Timestamp
    escalation_roles: _containers.RepeatedScalarFieldContainer[str]
    escalate_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., capability_id: _Optional[str] = ..., status: _Optional[_Union[ApprovalStatus, str]] = ..., reasons: _Optional[_Iterable[str]] = ..., message: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., decided_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., requester: _Optional[_Union[Actor, _Mapping]] = ..., decided_by: _Optional[_Union[Actor, _Mapping]] = ..., decided_via: _Optional[_Union[Actor, _Mapping]] = ..., decision_note: _Optional[str] = ..., input_hash: _Optional[str] = ..., input_json: _Optional[str] = ..., risk: _Optional[str] = ..., side_effect: _Optional[str] = ..., approvers: _Optional[_Union[ApproverConstraint, _Mapping]] = ..., requesting_execution_id: _Optional[str] = ..., resumed_execution_id: _Optional[str] = ..., surface: _Optional[str] = ..., capability_description: _Optional[str] = ..., requester_on_behalf_of: _Optional[str] = ..., self_approval_refused: _Optional[bool] = ..., edited: _Optional[bool] = ..., original_input_hash: _Optional[str] = ..., patch_json: _Optional[str] = ..., edited_by: _Optional[_Union[Actor, _Mapping]] = ..., quorum: _Optional[int] = ..., approvals_received: _Optional[int] = ..., distinct_roles: _Optional[_Iterable[str]] = ..., approved_by: _Optional[_Iterable[_Union[Actor, _Mapping]]] = ..., escalated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., escalation_roles: _Optional[_Iterable[str]] = ..., escalate_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Grant(_message.Message):
    __slots__ = ("id", "status", "actor", "role", "capability_id", "tag", "constraint", "created_at", "expires_at", "max_uses", "uses", "amount", "max_total", "total", "created_by", "created_via", "note", "from_approval_id", "revoked_at", "revoked_by", "approver_roles")
    ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_ID_FIELD_NUMBER: _ClassVar[int]
    TAG_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    MAX_USES_FIELD_NUMBER: _ClassVar[int]
    USES_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    MAX_TOTAL_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    CREATED_VIA_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    FROM_APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    REVOKED_AT_FIELD_NUMBER: _ClassVar[int]
    REVOKED_BY_FIELD_NUMBER: _ClassVar[int]
    APPROVER_ROLES_FIELD_NUMBER: _ClassVar[int]
    id: str
    status: GrantStatus
    actor: Actor
    role: str
    capability_id: str
    tag: str
    constraint: str
    created_at: _timestamp_pb2.Timestamp
    expires_at: _timestamp_pb2.Timestamp
    max_uses: int
    uses: int
    amount: str
    max_total: float
    total: float
    created_by: Actor
    created_via: Actor
    note: str
    from_approval_id: str
    revoked_at: _timestamp_pb2.Timestamp
    revoked_by: Actor
    approver_roles: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., status: _Optional[_Union[GrantStatus, str]] = ..., actor: _Optional[_Union[Actor, _Mapping]] = ..., role: _Optional[str] = ..., capability_id: _Optional[str] = ..., tag: _Optional[str] = ..., constraint: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., max_uses: _Optional[int] = ..., uses: _Optional[int] = ..., amount: _Optional[str] = ..., max_total: _Optional[float] = ..., total: _Optional[float] = ..., created_by: _Optional[_Union[Actor, _Mapping]] = ..., created_via: _Optional[_Union[Actor, _Mapping]] = ..., note: _Optional[str] = ..., from_approval_id: _Optional[str] = ..., revoked_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., revoked_by: _Optional[_Union[Actor, _Mapping]] = ..., approver_roles: _Optional[_Iterable[str]] = ...) -> None: ...
