from compactord._gen.compactor.v1 import conversation_pb2 as _conversation_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

ACTION_NONE: Action
ACTION_PRUNE: Action
ACTION_SUMMARIZE: Action
ACTION_UNSPECIFIED: Action
CACHE_STATUS_BYPASS: CacheStatus
CACHE_STATUS_HIT: CacheStatus
CACHE_STATUS_MISS: CacheStatus
CACHE_STATUS_UNAVAILABLE: CacheStatus
CACHE_STATUS_UNSPECIFIED: CacheStatus
DESCRIPTOR: _descriptor.FileDescriptor
DISPOSITION_DROP: Disposition
DISPOSITION_KEEP: Disposition
DISPOSITION_KEEP_REQUEST: Disposition
DISPOSITION_PRUNE: Disposition
DISPOSITION_SUMMARIZE: Disposition
DISPOSITION_UNSPECIFIED: Disposition
PROVIDER_ANTHROPIC_MESSAGES: Provider
PROVIDER_BEDROCK_CONVERSE: Provider
PROVIDER_GEMINI: Provider
PROVIDER_OPENAI_CHAT: Provider
PROVIDER_OPENAI_RESPONSES: Provider
PROVIDER_UNSPECIFIED: Provider
TOOL_CHOICE_MODE_AUTO: ToolChoiceMode
TOOL_CHOICE_MODE_NONE: ToolChoiceMode
TOOL_CHOICE_MODE_REQUIRED: ToolChoiceMode
TOOL_CHOICE_MODE_TOOL: ToolChoiceMode
TOOL_CHOICE_MODE_UNSPECIFIED: ToolChoiceMode

class AgentRequest(_message.Message):
    __slots__ = ["base_body", "model", "provider", "tools"]
    BASE_BODY_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    base_body: str
    model: str
    provider: Provider
    tools: _containers.RepeatedCompositeFieldContainer[Tool]
    def __init__(self, provider: _Optional[_Union[Provider, str]] = ..., model: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[Tool, _Mapping]]] = ..., base_body: _Optional[str] = ...) -> None: ...

class CachePrices(_message.Message):
    __slots__ = ["read", "write"]
    READ_FIELD_NUMBER: _ClassVar[int]
    WRITE_FIELD_NUMBER: _ClassVar[int]
    read: float
    write: float
    def __init__(self, read: _Optional[float] = ..., write: _Optional[float] = ...) -> None: ...

class CompactRequest(_message.Message):
    __slots__ = ["agent_request", "emit_compact_prompt", "force", "instructions", "messages", "policy", "prepare", "summarizer", "target_provider"]
    AGENT_REQUEST_FIELD_NUMBER: _ClassVar[int]
    EMIT_COMPACT_PROMPT_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    PREPARE_FIELD_NUMBER: _ClassVar[int]
    SUMMARIZER_FIELD_NUMBER: _ClassVar[int]
    TARGET_PROVIDER_FIELD_NUMBER: _ClassVar[int]
    agent_request: AgentRequest
    emit_compact_prompt: bool
    force: bool
    instructions: str
    messages: _containers.RepeatedCompositeFieldContainer[_conversation_pb2.Message]
    policy: Policy
    prepare: bool
    summarizer: str
    target_provider: Provider
    def __init__(self, messages: _Optional[_Iterable[_Union[_conversation_pb2.Message, _Mapping]]] = ..., policy: _Optional[_Union[Policy, _Mapping]] = ..., summarizer: _Optional[str] = ..., instructions: _Optional[str] = ..., force: bool = ..., emit_compact_prompt: bool = ..., target_provider: _Optional[_Union[Provider, str]] = ..., prepare: bool = ..., agent_request: _Optional[_Union[AgentRequest, _Mapping]] = ...) -> None: ...

class CompactResponse(_message.Message):
    __slots__ = ["cache_status", "compacted", "messages", "plan", "reason", "recall_tool", "recall_tool_json", "source_hash", "summary", "warnings"]
    CACHE_STATUS_FIELD_NUMBER: _ClassVar[int]
    COMPACTED_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RECALL_TOOL_FIELD_NUMBER: _ClassVar[int]
    RECALL_TOOL_JSON_FIELD_NUMBER: _ClassVar[int]
    SOURCE_HASH_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    cache_status: CacheStatus
    compacted: bool
    messages: _containers.RepeatedCompositeFieldContainer[_conversation_pb2.Message]
    plan: PlanResponse
    reason: str
    recall_tool: Tool
    recall_tool_json: str
    source_hash: str
    summary: Summary
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, compacted: bool = ..., messages: _Optional[_Iterable[_Union[_conversation_pb2.Message, _Mapping]]] = ..., plan: _Optional[_Union[PlanResponse, _Mapping]] = ..., summary: _Optional[_Union[Summary, _Mapping]] = ..., cache_status: _Optional[_Union[CacheStatus, str]] = ..., reason: _Optional[str] = ..., warnings: _Optional[_Iterable[str]] = ..., source_hash: _Optional[str] = ..., recall_tool: _Optional[_Union[Tool, _Mapping]] = ..., recall_tool_json: _Optional[str] = ...) -> None: ...

class ExpandRequest(_message.Message):
    __slots__ = ["message", "page_size", "page_token", "range", "source_hash"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_HASH_FIELD_NUMBER: _ClassVar[int]
    message: _conversation_pb2.Message
    page_size: int
    page_token: str
    range: str
    source_hash: str
    def __init__(self, message: _Optional[_Union[_conversation_pb2.Message, _Mapping]] = ..., source_hash: _Optional[str] = ..., range: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ExpandResponse(_message.Message):
    __slots__ = ["first_index", "messages", "next_page_token", "source_hash", "total_messages"]
    FIRST_INDEX_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SOURCE_HASH_FIELD_NUMBER: _ClassVar[int]
    TOTAL_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    first_index: int
    messages: _containers.RepeatedCompositeFieldContainer[_conversation_pb2.Message]
    next_page_token: str
    source_hash: str
    total_messages: int
    def __init__(self, messages: _Optional[_Iterable[_Union[_conversation_pb2.Message, _Mapping]]] = ..., first_index: _Optional[int] = ..., total_messages: _Optional[int] = ..., source_hash: _Optional[str] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class LiftRequest(_message.Message):
    __slots__ = ["body", "provider"]
    BODY_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    body: str
    provider: Provider
    def __init__(self, body: _Optional[str] = ..., provider: _Optional[_Union[Provider, str]] = ...) -> None: ...

class LiftResponse(_message.Message):
    __slots__ = ["messages", "provider", "rest_body", "tool_choice", "tools", "warnings"]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    REST_BODY_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_conversation_pb2.Message]
    provider: Provider
    rest_body: str
    tool_choice: ToolChoice
    tools: _containers.RepeatedCompositeFieldContainer[Tool]
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, messages: _Optional[_Iterable[_Union[_conversation_pb2.Message, _Mapping]]] = ..., provider: _Optional[_Union[Provider, str]] = ..., warnings: _Optional[_Iterable[str]] = ..., rest_body: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[Tool, _Mapping]]] = ..., tool_choice: _Optional[_Union[ToolChoice, _Mapping]] = ...) -> None: ...

class LowerRequest(_message.Message):
    __slots__ = ["base_body", "inline_dynamic_system", "keep_history", "messages", "model", "provider", "recall_tool", "rest_body", "rest_provider", "session", "strict", "tool_choice", "tools"]
    BASE_BODY_FIELD_NUMBER: _ClassVar[int]
    INLINE_DYNAMIC_SYSTEM_FIELD_NUMBER: _ClassVar[int]
    KEEP_HISTORY_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    RECALL_TOOL_FIELD_NUMBER: _ClassVar[int]
    REST_BODY_FIELD_NUMBER: _ClassVar[int]
    REST_PROVIDER_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    STRICT_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_FIELD_NUMBER: _ClassVar[int]
    base_body: str
    inline_dynamic_system: bool
    keep_history: bool
    messages: _containers.RepeatedCompositeFieldContainer[_conversation_pb2.Message]
    model: str
    provider: Provider
    recall_tool: bool
    rest_body: str
    rest_provider: Provider
    session: Session
    strict: bool
    tool_choice: ToolChoice
    tools: _containers.RepeatedCompositeFieldContainer[Tool]
    def __init__(self, messages: _Optional[_Iterable[_Union[_conversation_pb2.Message, _Mapping]]] = ..., provider: _Optional[_Union[Provider, str]] = ..., model: _Optional[str] = ..., base_body: _Optional[str] = ..., session: _Optional[_Union[Session, _Mapping]] = ..., keep_history: bool = ..., inline_dynamic_system: bool = ..., strict: bool = ..., tools: _Optional[_Iterable[_Union[Tool, _Mapping]]] = ..., tool_choice: _Optional[_Union[ToolChoice, _Mapping]] = ..., rest_body: _Optional[str] = ..., rest_provider: _Optional[_Union[Provider, str]] = ..., recall_tool: bool = ...) -> None: ...

class LowerResponse(_message.Message):
    __slots__ = ["body", "cursor", "warnings"]
    BODY_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    body: str
    cursor: int
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, body: _Optional[str] = ..., warnings: _Optional[_Iterable[str]] = ..., cursor: _Optional[int] = ...) -> None: ...

class PlanRequest(_message.Message):
    __slots__ = ["instructions", "messages", "policy", "summarizer"]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    SUMMARIZER_FIELD_NUMBER: _ClassVar[int]
    instructions: str
    messages: _containers.RepeatedCompositeFieldContainer[_conversation_pb2.Message]
    policy: Policy
    summarizer: str
    def __init__(self, messages: _Optional[_Iterable[_Union[_conversation_pb2.Message, _Mapping]]] = ..., policy: _Optional[_Union[Policy, _Mapping]] = ..., summarizer: _Optional[str] = ..., instructions: _Optional[str] = ...) -> None: ...

class PlanResponse(_message.Message):
    __slots__ = ["action", "cached_prefix_tokens", "cut_index", "cut_tokens", "dispositions", "head_tokens", "headroom_turns", "instruction_indexes", "instruction_tokens", "kept_request_tokens", "message_tokens", "prefix_hash", "pruned_tokens", "reason", "rewritten_tokens", "summary_index", "summary_tokens", "tail_tokens", "target_tokens", "tokens_after", "tokens_before", "trigger_at_tokens", "turn_tokens", "usable_tokens"]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    CACHED_PREFIX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CUT_INDEX_FIELD_NUMBER: _ClassVar[int]
    CUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    DISPOSITIONS_FIELD_NUMBER: _ClassVar[int]
    HEADROOM_TURNS_FIELD_NUMBER: _ClassVar[int]
    HEAD_TOKENS_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTION_INDEXES_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    KEPT_REQUEST_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PREFIX_HASH_FIELD_NUMBER: _ClassVar[int]
    PRUNED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REWRITTEN_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_INDEX_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TAIL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TARGET_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_AFTER_FIELD_NUMBER: _ClassVar[int]
    TOKENS_BEFORE_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_AT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TURN_TOKENS_FIELD_NUMBER: _ClassVar[int]
    USABLE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    action: Action
    cached_prefix_tokens: int
    cut_index: int
    cut_tokens: int
    dispositions: _containers.RepeatedScalarFieldContainer[Disposition]
    head_tokens: int
    headroom_turns: float
    instruction_indexes: _containers.RepeatedScalarFieldContainer[int]
    instruction_tokens: int
    kept_request_tokens: int
    message_tokens: _containers.RepeatedScalarFieldContainer[int]
    prefix_hash: str
    pruned_tokens: int
    reason: str
    rewritten_tokens: int
    summary_index: int
    summary_tokens: int
    tail_tokens: int
    target_tokens: int
    tokens_after: int
    tokens_before: int
    trigger_at_tokens: int
    turn_tokens: int
    usable_tokens: int
    def __init__(self, action: _Optional[_Union[Action, str]] = ..., reason: _Optional[str] = ..., dispositions: _Optional[_Iterable[_Union[Disposition, str]]] = ..., message_tokens: _Optional[_Iterable[int]] = ..., tokens_before: _Optional[int] = ..., tokens_after: _Optional[int] = ..., cut_index: _Optional[int] = ..., prefix_hash: _Optional[str] = ..., pruned_tokens: _Optional[int] = ..., summary_index: _Optional[int] = ..., usable_tokens: _Optional[int] = ..., trigger_at_tokens: _Optional[int] = ..., target_tokens: _Optional[int] = ..., head_tokens: _Optional[int] = ..., summary_tokens: _Optional[int] = ..., kept_request_tokens: _Optional[int] = ..., tail_tokens: _Optional[int] = ..., cut_tokens: _Optional[int] = ..., instruction_indexes: _Optional[_Iterable[int]] = ..., instruction_tokens: _Optional[int] = ..., cached_prefix_tokens: _Optional[int] = ..., rewritten_tokens: _Optional[int] = ..., turn_tokens: _Optional[int] = ..., headroom_turns: _Optional[float] = ...) -> None: ...

class Policy(_message.Message):
    __slots__ = ["cache_prices", "context_window", "discard_sources", "headroom_turns", "keep_recent_tokens", "keep_recent_turns", "keep_user_messages_tokens", "prepare_ratio", "prune", "reported_usage", "reserve_output_tokens", "summary_max_tokens", "target_ratio", "tokenizer", "trigger_ratio", "trigger_tokens"]
    CACHE_PRICES_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_WINDOW_FIELD_NUMBER: _ClassVar[int]
    DISCARD_SOURCES_FIELD_NUMBER: _ClassVar[int]
    HEADROOM_TURNS_FIELD_NUMBER: _ClassVar[int]
    KEEP_RECENT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    KEEP_RECENT_TURNS_FIELD_NUMBER: _ClassVar[int]
    KEEP_USER_MESSAGES_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PREPARE_RATIO_FIELD_NUMBER: _ClassVar[int]
    PRUNE_FIELD_NUMBER: _ClassVar[int]
    REPORTED_USAGE_FIELD_NUMBER: _ClassVar[int]
    RESERVE_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TARGET_RATIO_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_RATIO_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_TOKENS_FIELD_NUMBER: _ClassVar[int]
    cache_prices: CachePrices
    context_window: int
    discard_sources: bool
    headroom_turns: int
    keep_recent_tokens: int
    keep_recent_turns: int
    keep_user_messages_tokens: int
    prepare_ratio: float
    prune: PrunePolicy
    reported_usage: Usage
    reserve_output_tokens: int
    summary_max_tokens: int
    target_ratio: float
    tokenizer: str
    trigger_ratio: float
    trigger_tokens: int
    def __init__(self, context_window: _Optional[int] = ..., reserve_output_tokens: _Optional[int] = ..., trigger_ratio: _Optional[float] = ..., trigger_tokens: _Optional[int] = ..., keep_recent_tokens: _Optional[int] = ..., keep_recent_turns: _Optional[int] = ..., prune: _Optional[_Union[PrunePolicy, _Mapping]] = ..., tokenizer: _Optional[str] = ..., reported_usage: _Optional[_Union[Usage, _Mapping]] = ..., target_ratio: _Optional[float] = ..., summary_max_tokens: _Optional[int] = ..., keep_user_messages_tokens: _Optional[int] = ..., headroom_turns: _Optional[int] = ..., cache_prices: _Optional[_Union[CachePrices, _Mapping]] = ..., discard_sources: bool = ..., prepare_ratio: _Optional[float] = ...) -> None: ...

class ProviderTool(_message.Message):
    __slots__ = ["format", "json", "type"]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    format: Provider
    json: str
    type: str
    def __init__(self, format: _Optional[_Union[Provider, str]] = ..., type: _Optional[str] = ..., json: _Optional[str] = ...) -> None: ...

class PrunePolicy(_message.Message):
    __slots__ = ["clear_at_least_tokens", "clear_inputs", "disabled", "exclude_tools", "keep_recent", "min_output_tokens"]
    CLEAR_AT_LEAST_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CLEAR_INPUTS_FIELD_NUMBER: _ClassVar[int]
    DISABLED_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_TOOLS_FIELD_NUMBER: _ClassVar[int]
    KEEP_RECENT_FIELD_NUMBER: _ClassVar[int]
    MIN_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    clear_at_least_tokens: int
    clear_inputs: bool
    disabled: bool
    exclude_tools: _containers.RepeatedScalarFieldContainer[str]
    keep_recent: int
    min_output_tokens: int
    def __init__(self, disabled: bool = ..., keep_recent: _Optional[int] = ..., min_output_tokens: _Optional[int] = ..., exclude_tools: _Optional[_Iterable[str]] = ..., clear_inputs: bool = ..., clear_at_least_tokens: _Optional[int] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ["active", "cursor"]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    active: bool
    cursor: int
    def __init__(self, active: bool = ..., cursor: _Optional[int] = ...) -> None: ...

class Summary(_message.Message):
    __slots__ = ["cache_creation_input_tokens", "cache_read_input_tokens", "check_trimmed", "covered_messages", "estimated_cost", "fallback_from", "input_tokens", "model", "output_tokens", "paths_appended", "paths_retained", "paths_total", "prompt_version", "requests_appended", "requests_dropped", "requests_kept_verbatim", "requests_retained", "requests_total", "summarizer", "text"]
    CACHE_CREATION_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_READ_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CHECK_TRIMMED_FIELD_NUMBER: _ClassVar[int]
    COVERED_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_COST_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_FROM_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PATHS_APPENDED_FIELD_NUMBER: _ClassVar[int]
    PATHS_RETAINED_FIELD_NUMBER: _ClassVar[int]
    PATHS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    PROMPT_VERSION_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_APPENDED_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_KEPT_VERBATIM_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_RETAINED_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    SUMMARIZER_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    check_trimmed: bool
    covered_messages: int
    estimated_cost: float
    fallback_from: str
    input_tokens: int
    model: str
    output_tokens: int
    paths_appended: int
    paths_retained: int
    paths_total: int
    prompt_version: str
    requests_appended: int
    requests_dropped: _containers.RepeatedScalarFieldContainer[int]
    requests_kept_verbatim: int
    requests_retained: int
    requests_total: int
    summarizer: str
    text: str
    def __init__(self, text: _Optional[str] = ..., summarizer: _Optional[str] = ..., model: _Optional[str] = ..., prompt_version: _Optional[str] = ..., input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., covered_messages: _Optional[int] = ..., requests_total: _Optional[int] = ..., requests_retained: _Optional[int] = ..., requests_appended: _Optional[int] = ..., paths_total: _Optional[int] = ..., paths_retained: _Optional[int] = ..., paths_appended: _Optional[int] = ..., check_trimmed: bool = ..., requests_kept_verbatim: _Optional[int] = ..., fallback_from: _Optional[str] = ..., requests_dropped: _Optional[_Iterable[int]] = ..., cache_read_input_tokens: _Optional[int] = ..., cache_creation_input_tokens: _Optional[int] = ..., estimated_cost: _Optional[float] = ...) -> None: ...

class Tool(_message.Message):
    __slots__ = ["description", "input_schema_json", "name", "provider_options", "provider_tool", "strict"]
    class ProviderOptionsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _struct_pb2.Struct
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_TOOL_FIELD_NUMBER: _ClassVar[int]
    STRICT_FIELD_NUMBER: _ClassVar[int]
    description: str
    input_schema_json: str
    name: str
    provider_options: _containers.MessageMap[str, _struct_pb2.Struct]
    provider_tool: ProviderTool
    strict: bool
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., input_schema_json: _Optional[str] = ..., strict: bool = ..., provider_options: _Optional[_Mapping[str, _struct_pb2.Struct]] = ..., provider_tool: _Optional[_Union[ProviderTool, _Mapping]] = ...) -> None: ...

class ToolChoice(_message.Message):
    __slots__ = ["disable_parallel_tool_use", "mode", "tool_name"]
    DISABLE_PARALLEL_TOOL_USE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    disable_parallel_tool_use: bool
    mode: ToolChoiceMode
    tool_name: str
    def __init__(self, mode: _Optional[_Union[ToolChoiceMode, str]] = ..., tool_name: _Optional[str] = ..., disable_parallel_tool_use: bool = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ["input_tokens", "message_count"]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    message_count: int
    def __init__(self, input_tokens: _Optional[int] = ..., message_count: _Optional[int] = ...) -> None: ...

class Provider(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Action(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Disposition(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class CacheStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ToolChoiceMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
