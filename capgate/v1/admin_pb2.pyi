import datetime

from capgate.v1 import gateway_pb2 as _gateway_pb2
from capgate.v1 import types_pb2 as _types_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Verdict(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VERDICT_UNSPECIFIED: _ClassVar[Verdict]
    VERDICT_APPROVE: _ClassVar[Verdict]
    VERDICT_REJECT: _ClassVar[Verdict]
VERDICT_UNSPECIFIED: Verdict
VERDICT_APPROVE: Verdict
VERDICT_REJECT: Verdict

class ListApprovalsRequest(_message.Message):
    __slots__ = ("statuses", "capability_id", "requester_id", "page_size", "page_token")
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_ID_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    statuses: _containers.RepeatedScalarFieldContainer[_types_pb2.ApprovalStatus]
    capability_id: str
    requester_id: str
    page_size: int
    page_token: str
    def __init__(self, statuses: _Optional[_Iterable[_Union[_types_pb2.ApprovalStatus, str]]] = ..., capability_id: _Optional[str] = ..., requester_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListApprovalsResponse(_message.Message):
    __slots__ = ("approvals", "next_page_token", "error")
    APPROVALS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    approvals: _containers.RepeatedCompositeFieldContainer[_types_pb2.Approval]
    next_page_token: str
    error: _types_pb2.CapabilityError
    def __init__(self, approvals: _Optional[_Iterable[_Union[_types_pb2.Approval, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., error: _Optional[_Union[_types_pb2.CapabilityError, _Mapping]] = ...) -> None: ...

class DecideApprovalRequest(_message.Message):
    __slots__ = ("approval_id", "verdict", "note", "input_hash", "on_behalf_of", "edited_input_json")
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    INPUT_HASH_FIELD_NUMBER: _ClassVar[int]
    ON_BEHALF_OF_FIELD_NUMBER: _ClassVar[int]
    EDITED_INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    approval_id: str
    verdict: Verdict
    note: str
    input_hash: str
    on_behalf_of: _types_pb2.Actor
    edited_input_json: bytes
    def __init__(self, approval_id: _Optional[str] = ..., verdict: _Optional[_Union[Verdict, str]] = ..., note: _Optional[str] = ..., input_hash: _Optional[str] = ..., on_behalf_of: _Optional[_Union[_types_pb2.Actor, _Mapping]] = ..., edited_input_json: _Optional[bytes] = ...) -> None: ...

class DecideApprovalResponse(_message.Message):
    __slots__ = ("approval", "error")
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    approval: _types_pb2.Approval
    error: _types_pb2.CapabilityError
    def __init__(self, approval: _Optional[_Union[_types_pb2.Approval, _Mapping]] = ..., error: _Optional[_Union[_types_pb2.CapabilityError, _Mapping]] = ...) -> None: ...

class WatchApprovalsRequest(_message.Message):
    __slots__ = ("after_event_id",)
    AFTER_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    after_event_id: str
    def __init__(self, after_event_id: _Optional[str] = ...) -> None: ...

class ApprovalEvent(_message.Message):
    __slots__ = ("event_id", "type", "approval")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    type: str
    approval: _types_pb2.Approval
    def __init__(self, event_id: _Optional[str] = ..., type: _Optional[str] = ..., approval: _Optional[_Union[_types_pb2.Approval, _Mapping]] = ...) -> None: ...

class CreateGrantRequest(_message.Message):
    __slots__ = ("actor", "role", "capability_id", "tag", "constraint", "expires_in", "max_uses", "amount", "max_total", "note", "from_approval_id", "on_behalf_of")
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_ID_FIELD_NUMBER: _ClassVar[int]
    TAG_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_IN_FIELD_NUMBER: _ClassVar[int]
    MAX_USES_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    MAX_TOTAL_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    FROM_APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    ON_BEHALF_OF_FIELD_NUMBER: _ClassVar[int]
    actor: _types_pb2.Actor
    role: str
    capability_id: str
    tag: str
    constraint: str
    expires_in: _duration_pb2.Duration
    max_uses: int
    amount: str
    max_total: float
    note: str
    from_approval_id: str
    on_behalf_of: _types_pb2.Actor
    def __init__(self, actor: _Optional[_Union[_types_pb2.Actor, _Mapping]] = ..., role: _Optional[str] = ..., capability_id: _Optional[str] = ..., tag: _Optional[str] = ..., constraint: _Optional[str] = ..., expires_in: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_uses: _Optional[int] = ..., amount: _Optional[str] = ..., max_total: _Optional[float] = ..., note: _Optional[str] = ..., from_approval_id: _Optional[str] = ..., on_behalf_of: _Optional[_Union[_types_pb2.Actor, _Mapping]] = ...) -> None: ...

class GrantResponse(_message.Message):
    __slots__ = ("grant", "error")
    GRANT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    grant: _types_pb2.Grant
    error: _types_pb2.CapabilityError
    def __init__(self, grant: _Optional[_Union[_types_pb2.Grant, _Mapping]] = ..., error: _Optional[_Union[_types_pb2.CapabilityError, _Mapping]] = ...) -> None: ...

class ListGrantsRequest(_message.Message):
    __slots__ = ("statuses", "capability_id", "actor_id", "page_size", "page_token")
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_ID_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    statuses: _containers.RepeatedScalarFieldContainer[_types_pb2.GrantStatus]
    capability_id: str
    actor_id: str
    page_size: int
    page_token: str
    def __init__(self, statuses: _Optional[_Iterable[_Union[_types_pb2.GrantStatus, str]]] = ..., capability_id: _Optional[str] = ..., actor_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListGrantsResponse(_message.Message):
    __slots__ = ("grants", "next_page_token", "error")
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    grants: _containers.RepeatedCompositeFieldContainer[_types_pb2.Grant]
    next_page_token: str
    error: _types_pb2.CapabilityError
    def __init__(self, grants: _Optional[_Iterable[_Union[_types_pb2.Grant, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., error: _Optional[_Union[_types_pb2.CapabilityError, _Mapping]] = ...) -> None: ...

class GetGrantRequest(_message.Message):
    __slots__ = ("grant_id",)
    GRANT_ID_FIELD_NUMBER: _ClassVar[int]
    grant_id: str
    def __init__(self, grant_id: _Optional[str] = ...) -> None: ...

class RevokeGrantRequest(_message.Message):
    __slots__ = ("grant_id", "note", "on_behalf_of")
    GRANT_ID_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    ON_BEHALF_OF_FIELD_NUMBER: _ClassVar[int]
    grant_id: str
    note: str
    on_behalf_of: _types_pb2.Actor
    def __init__(self, grant_id: _Optional[str] = ..., note: _Optional[str] = ..., on_behalf_of: _Optional[_Union[_types_pb2.Actor, _Mapping]] = ...) -> None: ...

class ExplainRequest(_message.Message):
    __slots__ = ("capability_id", "input_json", "surface", "actor", "phase")
    CAPABILITY_ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    SURFACE_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    capability_id: str
    input_json: bytes
    surface: str
    actor: _types_pb2.Actor
    phase: str
    def __init__(self, capability_id: _Optional[str] = ..., input_json: _Optional[bytes] = ..., surface: _Optional[str] = ..., actor: _Optional[_Union[_types_pb2.Actor, _Mapping]] = ..., phase: _Optional[str] = ...) -> None: ...

class PurgeCacheRequest(_message.Message):
    __slots__ = ("capability_id",)
    CAPABILITY_ID_FIELD_NUMBER: _ClassVar[int]
    capability_id: str
    def __init__(self, capability_id: _Optional[str] = ...) -> None: ...

class PurgeCacheResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: int
    def __init__(self, deleted: _Optional[int] = ...) -> None: ...
