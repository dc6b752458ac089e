from capgate_client._gen.capgate.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class HookDecision(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HOOK_DECISION_UNSPECIFIED: _ClassVar[HookDecision]
    HOOK_DECISION_ALLOW: _ClassVar[HookDecision]
    HOOK_DECISION_ASK: _ClassVar[HookDecision]
    HOOK_DECISION_DENY: _ClassVar[HookDecision]
HOOK_DECISION_UNSPECIFIED: HookDecision
HOOK_DECISION_ALLOW: HookDecision
HOOK_DECISION_ASK: HookDecision
HOOK_DECISION_DENY: HookDecision

class HookCapability(_message.Message):
    __slots__ = ("id", "tags", "side_effect", "risk")
    ID_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    SIDE_EFFECT_FIELD_NUMBER: _ClassVar[int]
    RISK_FIELD_NUMBER: _ClassVar[int]
    id: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    side_effect: str
    risk: str
    def __init__(self, id: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., side_effect: _Optional[str] = ..., risk: _Optional[str] = ...) -> None: ...

class HookContext(_message.Message):
    __slots__ = ("hook", "execution_id", "capability", "actor", "surface", "correlation_id", "metadata", "approval_id", "dry_run", "revision")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    HOOK_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    SURFACE_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    hook: str
    execution_id: str
    capability: HookCapability
    actor: _types_pb2.Actor
    surface: str
    correlation_id: str
    metadata: _containers.ScalarMap[str, str]
    approval_id: str
    dry_run: bool
    revision: str
    def __init__(self, hook: _Optional[str] = ..., execution_id: _Optional[str] = ..., capability: _Optional[_Union[HookCapability, _Mapping]] = ..., actor: _Optional[_Union[_types_pb2.Actor, _Mapping]] = ..., surface: _Optional[str] = ..., correlation_id: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., approval_id: _Optional[str] = ..., dry_run: _Optional[bool] = ..., revision: _Optional[str] = ...) -> None: ...

class PreInvokeRequest(_message.Message):
    __slots__ = ("context", "input_json")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    context: HookContext
    input_json: str
    def __init__(self, context: _Optional[_Union[HookContext, _Mapping]] = ..., input_json: _Optional[str] = ...) -> None: ...

class PreInvokeResponse(_message.Message):
    __slots__ = ("decision", "message", "context_json", "updated_input_json")
    DECISION_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_JSON_FIELD_NUMBER: _ClassVar[int]
    UPDATED_INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    decision: HookDecision
    message: str
    context_json: str
    updated_input_json: str
    def __init__(self, decision: _Optional[_Union[HookDecision, str]] = ..., message: _Optional[str] = ..., context_json: _Optional[str] = ..., updated_input_json: _Optional[str] = ...) -> None: ...

class PostInvokeRequest(_message.Message):
    __slots__ = ("context", "output_json")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    context: HookContext
    output_json: str
    def __init__(self, context: _Optional[_Union[HookContext, _Mapping]] = ..., output_json: _Optional[str] = ...) -> None: ...

class PostInvokeResponse(_message.Message):
    __slots__ = ("updated_output_json",)
    UPDATED_OUTPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    updated_output_json: str
    def __init__(self, updated_output_json: _Optional[str] = ...) -> None: ...

class PostFailureRequest(_message.Message):
    __slots__ = ("context", "code", "stage", "execution_state", "attempts")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_STATE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    context: HookContext
    code: _types_pb2.ErrorCode
    stage: str
    execution_state: _types_pb2.ExecutionState
    attempts: int
    def __init__(self, context: _Optional[_Union[HookContext, _Mapping]] = ..., code: _Optional[_Union[_types_pb2.ErrorCode, str]] = ..., stage: _Optional[str] = ..., execution_state: _Optional[_Union[_types_pb2.ExecutionState, str]] = ..., attempts: _Optional[int] = ...) -> None: ...

class PostFailureResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
