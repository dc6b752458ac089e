from capgate_client._gen.capgate.v1 import types_pb2 as _types_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ProcedureInvokeRequest(_message.Message):
    __slots__ = ("capability_id", "input_json")
    CAPABILITY_ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    capability_id: str
    input_json: str
    def __init__(self, capability_id: _Optional[str] = ..., input_json: _Optional[str] = ...) -> None: ...

class ProcedureInvokeResponse(_message.Message):
    __slots__ = ("output_json",)
    OUTPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    output_json: str
    def __init__(self, output_json: _Optional[str] = ...) -> None: ...

class ContractError(_message.Message):
    __slots__ = ("reason", "message")
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    reason: str
    message: str
    def __init__(self, reason: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ApproverDecideRequest(_message.Message):
    __slots__ = ("approval", "input_json")
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    approval: _types_pb2.Approval
    input_json: str
    def __init__(self, approval: _Optional[_Union[_types_pb2.Approval, _Mapping]] = ..., input_json: _Optional[str] = ...) -> None: ...

class ApproverDecideResponse(_message.Message):
    __slots__ = ("approved", "approver", "note")
    APPROVED_FIELD_NUMBER: _ClassVar[int]
    APPROVER_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    approved: bool
    approver: _types_pb2.Actor
    note: str
    def __init__(self, approved: _Optional[bool] = ..., approver: _Optional[_Union[_types_pb2.Actor, _Mapping]] = ..., note: _Optional[str] = ...) -> None: ...
