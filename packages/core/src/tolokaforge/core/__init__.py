"""Tolokaforge core: what host, runner and db-service share (protocol version, models, algorithms).

Imports flow down only: ``tolokaforge.contracts`` <- ``tolokaforge.core`` <- {db, runner, host}.
"""

from __future__ import annotations

from .errors import (
    DuplicateToolCallIdError,
    InvalidMessageError,
    InvalidRecordedToolCallError,
    InvalidToolCallError,
    MalformedTranscriptError,
    TimelineInconsistencyError,
    TranscriptWireError,
    UnknownTerminationReasonError,
)
from .protocol import ENGINE_PROTOCOL_VERSION, MIN_ENGINE_PROTOCOL_VERSION, check_engine_protocol_version
from .termination import GRADEABLE_TERMINATION_REASONS, TerminationReason, parse_termination_reason
from .transcript import (
    NO_EVENTS_SKIP_REASON,
    RECORDED_CALL_STATUSES,
    ROLES,
    AssistantMessage,
    Executor,
    Message,
    RecordedCallStatus,
    RecordedToolCall,
    Requestor,
    Role,
    SystemMessage,
    TimelineEvent,
    ToolCall,
    ToolCallEvent,
    ToolMessage,
    TrialTimeline,
    TurnEvent,
    UserMessage,
    build_trial_timeline,
    decode_transcript_wire,
    encode_transcript_wire,
    split_leading_system_message,
)

__all__ = [
    "ENGINE_PROTOCOL_VERSION",
    "GRADEABLE_TERMINATION_REASONS",
    "MIN_ENGINE_PROTOCOL_VERSION",
    "NO_EVENTS_SKIP_REASON",
    "RECORDED_CALL_STATUSES",
    "ROLES",
    "AssistantMessage",
    "DuplicateToolCallIdError",
    "Executor",
    "InvalidMessageError",
    "InvalidRecordedToolCallError",
    "InvalidToolCallError",
    "MalformedTranscriptError",
    "Message",
    "RecordedCallStatus",
    "RecordedToolCall",
    "Requestor",
    "Role",
    "SystemMessage",
    "TerminationReason",
    "TimelineEvent",
    "TimelineInconsistencyError",
    "ToolCall",
    "ToolCallEvent",
    "ToolMessage",
    "TranscriptWireError",
    "TrialTimeline",
    "TurnEvent",
    "UnknownTerminationReasonError",
    "UserMessage",
    "build_trial_timeline",
    "check_engine_protocol_version",
    "decode_transcript_wire",
    "encode_transcript_wire",
    "parse_termination_reason",
    "split_leading_system_message",
]
