from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
LIFECYCLE_DYNAMIC: Lifecycle
LIFECYCLE_UNSPECIFIED: Lifecycle
MESSAGE_KIND_COMPACT_PROMPT: MessageKind
MESSAGE_KIND_COMPACT_SUMMARY: MessageKind
MESSAGE_KIND_SESSION_PREFACE: MessageKind
MESSAGE_KIND_UNSPECIFIED: MessageKind
ROLE_ASSISTANT: Role
ROLE_SYSTEM: Role
ROLE_TOOL: Role
ROLE_UNSPECIFIED: Role
ROLE_USER: Role

class FilePart(_message.Message):
    __slots__ = ["data", "filename", "media_type", "url"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    filename: str
    media_type: str
    url: str
    def __init__(self, data: _Optional[bytes] = ..., url: _Optional[str] = ..., media_type: _Optional[str] = ..., filename: _Optional[str] = ...) -> None: ...

class ImagePart(_message.Message):
    __slots__ = ["data", "media_type", "url"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    media_type: str
    url: str
    def __init__(self, data: _Optional[bytes] = ..., url: _Optional[str] = ..., media_type: _Optional[str] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ["id", "kind", "lifecycle", "parts", "pinned", "provider_options", "role", "token_count"]
    class ProviderOptionsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _struct_pb2.Struct
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    LIFECYCLE_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_COUNT_FIELD_NUMBER: _ClassVar[int]
    id: str
    kind: MessageKind
    lifecycle: Lifecycle
    parts: _containers.RepeatedCompositeFieldContainer[Part]
    pinned: bool
    provider_options: _containers.MessageMap[str, _struct_pb2.Struct]
    role: Role
    token_count: int
    def __init__(self, id: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ..., parts: _Optional[_Iterable[_Union[Part, _Mapping]]] = ..., kind: _Optional[_Union[MessageKind, str]] = ..., lifecycle: _Optional[_Union[Lifecycle, str]] = ..., pinned: bool = ..., provider_options: _Optional[_Mapping[str, _struct_pb2.Struct]] = ..., token_count: _Optional[int] = ...) -> None: ...

class Part(_message.Message):
    __slots__ = ["approval_request", "approval_response", "file", "image", "provider", "provider_options", "reasoning", "text", "tool_call", "tool_result"]
    class ProviderOptionsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _struct_pb2.Struct
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...
    APPROVAL_REQUEST_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    FILE_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_FIELD_NUMBER: _ClassVar[int]
    approval_request: ToolApprovalRequest
    approval_response: ToolApprovalResponse
    file: FilePart
    image: ImagePart
    provider: ProviderPart
    provider_options: _containers.MessageMap[str, _struct_pb2.Struct]
    reasoning: ReasoningPart
    text: TextPart
    tool_call: ToolCallPart
    tool_result: ToolResultPart
    def __init__(self, text: _Optional[_Union[TextPart, _Mapping]] = ..., image: _Optional[_Union[ImagePart, _Mapping]] = ..., file: _Optional[_Union[FilePart, _Mapping]] = ..., reasoning: _Optional[_Union[ReasoningPart, _Mapping]] = ..., tool_call: _Optional[_Union[ToolCallPart, _Mapping]] = ..., tool_result: _Optional[_Union[ToolResultPart, _Mapping]] = ..., approval_request: _Optional[_Union[ToolApprovalRequest, _Mapping]] = ..., approval_response: _Optional[_Union[ToolApprovalResponse, _Mapping]] = ..., provider: _Optional[_Union[ProviderPart, _Mapping]] = ..., provider_options: _Optional[_Mapping[str, _struct_pb2.Struct]] = ...) -> None: ...

class ProviderPart(_message.Message):
    __slots__ = ["json", "provider", "token_count", "token_count_estimated", "type"]
    JSON_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    TOKEN_COUNT_ESTIMATED_FIELD_NUMBER: _ClassVar[int]
    TOKEN_COUNT_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    json: str
    provider: str
    token_count: int
    token_count_estimated: bool
    type: str
    def __init__(self, provider: _Optional[str] = ..., type: _Optional[str] = ..., json: _Optional[str] = ..., token_count: _Optional[int] = ..., token_count_estimated: bool = ...) -> None: ...

class ReasoningPart(_message.Message):
    __slots__ = ["redacted_data", "signature", "text"]
    REDACTED_DATA_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    redacted_data: str
    signature: str
    text: str
    def __init__(self, text: _Optional[str] = ..., signature: _Optional[str] = ..., redacted_data: _Optional[str] = ...) -> None: ...

class TextPart(_message.Message):
    __slots__ = ["text"]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class ToolApprovalRequest(_message.Message):
    __slots__ = ["approval_id", "tool_call_id"]
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    approval_id: str
    tool_call_id: str
    def __init__(self, approval_id: _Optional[str] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class ToolApprovalResponse(_message.Message):
    __slots__ = ["approval_id", "approved", "reason"]
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    APPROVED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    approval_id: str
    approved: bool
    reason: str
    def __init__(self, approval_id: _Optional[str] = ..., approved: bool = ..., reason: _Optional[str] = ...) -> None: ...

class ToolCallPart(_message.Message):
    __slots__ = ["input_json", "provider_executed", "tool_call_id", "tool_name"]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_EXECUTED_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    input_json: str
    provider_executed: bool
    tool_call_id: str
    tool_name: str
    def __init__(self, tool_call_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., input_json: _Optional[str] = ..., provider_executed: bool = ...) -> None: ...

class ToolContent(_message.Message):
    __slots__ = ["parts"]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    parts: _containers.RepeatedCompositeFieldContainer[Part]
    def __init__(self, parts: _Optional[_Iterable[_Union[Part, _Mapping]]] = ...) -> None: ...

class ToolOutput(_message.Message):
    __slots__ = ["content", "denied", "error_json", "error_text", "json", "text"]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    DENIED_FIELD_NUMBER: _ClassVar[int]
    ERROR_JSON_FIELD_NUMBER: _ClassVar[int]
    ERROR_TEXT_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    content: ToolContent
    denied: str
    error_json: str
    error_text: str
    json: str
    text: str
    def __init__(self, text: _Optional[str] = ..., json: _Optional[str] = ..., error_text: _Optional[str] = ..., error_json: _Optional[str] = ..., content: _Optional[_Union[ToolContent, _Mapping]] = ..., denied: _Optional[str] = ...) -> None: ...

class ToolResultPart(_message.Message):
    __slots__ = ["output", "tool_call_id", "tool_name"]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    output: ToolOutput
    tool_call_id: str
    tool_name: str
    def __init__(self, tool_call_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., output: _Optional[_Union[ToolOutput, _Mapping]] = ...) -> None: ...

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class MessageKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Lifecycle(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
