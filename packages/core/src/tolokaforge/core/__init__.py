"""Tolokaforge core: what host, runner and db-service share (protocol version, models, algorithms).

Imports flow down only: ``tolokaforge.contracts`` <- ``tolokaforge.core`` <- sdk <- {db, runner, host}.

Packs written for the public Tolokaforge import the authoring API as ``tolokaforge.core.tools_interface``
and ``tolokaforge.core.grading.checks_*``. Those modules belong to tolokaforge-sdk, which ships them in a
``tolokaforge/core`` folder of its own; extending ``__path__`` lets this package find them there when
the two distributions are installed in different places (in development each is its own ``src``).
Nothing here imports them: core works without the SDK.
"""

from __future__ import annotations

from pkgutil import extend_path

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

__path__ = extend_path(__path__, __name__)

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
