import datetime

from capgate_client._gen.capgate.v1 import types_pb2 as _types_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DescribeRequest(_message.Message):
    __slots__ = ("capability_ids",)
    CAPABILITY_IDS_FIELD_NUMBER: _ClassVar[int]
    capability_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, capability_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class CapabilityDescriptor(_message.Message):
    __slots__ = ("id", "description", "input_schema_json", "side_effect", "risk", "tags", "requires_approval")
    ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    SIDE_EFFECT_FIELD_NUMBER: _ClassVar[int]
    RISK_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    REQUIRES_APPROVAL_FIELD_NUMBER: _ClassVar[int]
    id: str
    description: str
    input_schema_json: str
    side_effect: str
    risk: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    requires_approval: bool
    def __init__(self, id: _Optional[str] = ..., description: _Optional[str] = ..., input_schema_json: _Optional[str] = ..., side_effect: _Optional[str] = ..., risk: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., requires_approval: _Optional[bool] = ...) -> None: ...

class DescribeResponse(_message.Message):
    __slots__ = ("capabilities", "revision")
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    capabilities: _containers.RepeatedCompositeFieldContainer[CapabilityDescriptor]
    revision: str
    def __init__(self, capabilities: _Optional[_Iterable[_Union[CapabilityDescriptor, _Mapping]]] = ..., revision: _Optional[str] = ...) -> None: ...

class InvokeRequest(_message.Message):
    __slots__ = ("capability_id", "input_json", "idempotency_key", "correlation_id", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CAPABILITY_ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    capability_id: str
    input_json: bytes
    idempotency_key: str
    correlation_id: str
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, capability_id: _Optional[str] = ..., input_json: _Optional[bytes] = ..., idempotency_key: _Optional[str] = ..., correlation_id: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ResumeRequest(_message.Message):
    __slots__ = ("approval_id", "correlation_id")
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    approval_id: str
    correlation_id: str
    def __init__(self, approval_id: _Optional[str] = ..., correlation_id: _Optional[str] = ...) -> None: ...

class Completed(_message.Message):
    __slots__ = ("output_json",)
    OUTPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    output_json: str
    def __init__(self, output_json: _Optional[str] = ...) -> None: ...

class ApprovalRequired(_message.Message):
    __slots__ = ("approval",)
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    approval: _types_pb2.Approval
    def __init__(self, approval: _Optional[_Union[_types_pb2.Approval, _Mapping]] = ...) -> None: ...

class ExecutionResult(_message.Message):
    __slots__ = ("execution_id", "capability_id", "attempts", "duration", "execution_state", "approval_id", "revision", "grant_id", "edited", "patch_json", "completed", "approval_required", "failed", "cancelled")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_STATE_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    GRANT_ID_FIELD_NUMBER: _ClassVar[int]
    EDITED_FIELD_NUMBER: _ClassVar[int]
    PATCH_JSON_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_REQUIRED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    capability_id: str
    attempts: int
    duration: _duration_pb2.Duration
    execution_state: _types_pb2.ExecutionState
    approval_id: str
    revision: str
    grant_id: str
    edited: bool
    patch_json: str
    completed: Completed
    approval_required: ApprovalRequired
    failed: _types_pb2.CapabilityError
    cancelled: _types_pb2.CapabilityError
    def __init__(self, execution_id: _Optional[str] = ..., capability_id: _Optional[str] = ..., attempts: _Optional[int] = ..., duration: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., execution_state: _Optional[_Union[_types_pb2.ExecutionState, str]] = ..., approval_id: _Optional[str] = ..., revision: _Optional[str] = ..., grant_id: _Optional[str] = ..., edited: _Optional[bool] = ..., patch_json: _Optional[str] = ..., completed: _Optional[_Union[Completed, _Mapping]] = ..., approval_required: _Optional[_Union[ApprovalRequired, _Mapping]] = ..., failed: _Optional[_Union[_types_pb2.CapabilityError, _Mapping]] = ..., cancelled: _Optional[_Union[_types_pb2.CapabilityError, _Mapping]] = ...) -> None: ...

class CheckRequest(_message.Message):
    __slots__ = ("capability_id", "input_json", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CAPABILITY_ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    capability_id: str
    input_json: bytes
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, capability_id: _Optional[str] = ..., input_json: _Optional[bytes] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class PolicyStance(_message.Message):
    __slots__ = ("policy", "mode", "effect", "rule", "message", "error")
    POLICY_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    policy: str
    mode: str
    effect: _types_pb2.Decision
    rule: int
    message: str
    error: str
    def __init__(self, policy: _Optional[str] = ..., mode: _Optional[str] = ..., effect: _Optional[_Union[_types_pb2.Decision, str]] = ..., rule: _Optional[int] = ..., message: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...

class CheckResponse(_message.Message):
    __slots__ = ("decision", "error", "stances", "approval_reasons", "revision", "grant_id")
    DECISION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    STANCES_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_REASONS_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    GRANT_ID_FIELD_NUMBER: _ClassVar[int]
    decision: _types_pb2.Decision
    error: _types_pb2.CapabilityError
    stances: _containers.RepeatedCompositeFieldContainer[PolicyStance]
    approval_reasons: _containers.RepeatedScalarFieldContainer[str]
    revision: str
    grant_id: str
    def __init__(self, decision: _Optional[_Union[_types_pb2.Decision, str]] = ..., error: _Optional[_Union[_types_pb2.CapabilityError, _Mapping]] = ..., stances: _Optional[_Iterable[_Union[PolicyStance, _Mapping]]] = ..., approval_reasons: _Optional[_Iterable[str]] = ..., revision: _Optional[str] = ..., grant_id: _Optional[str] = ...) -> None: ...

class GetApprovalRequest(_message.Message):
    __slots__ = ("approval_id",)
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    approval_id: str
    def __init__(self, approval_id: _Optional[str] = ...) -> None: ...

class WaitApprovalRequest(_message.Message):
    __slots__ = ("approval_id", "timeout")
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    approval_id: str
    timeout: _duration_pb2.Duration
    def __init__(self, approval_id: _Optional[str] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class GetApprovalResponse(_message.Message):
    __slots__ = ("approval", "error")
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    approval: _types_pb2.Approval
    error: _types_pb2.CapabilityError
    def __init__(self, approval: _Optional[_Union[_types_pb2.Approval, _Mapping]] = ..., error: _Optional[_Union[_types_pb2.CapabilityError, _Mapping]] = ...) -> None: ...
