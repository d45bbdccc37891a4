"""The trial transcript: typed messages, their wire codec, and their timeline joined with the runner's record.

Layers, each importing only those above it::

    messages   Message models (one class per role) and ToolCall
    wire       llm_messages_json <-> list[Message]; the leading system message lifted out as policy
    recorded   RecordedToolCall, the runner's own record of one ExecuteTool call
    timeline   build_trial_timeline: transcript + records joined by call id into ordered events
"""

from __future__ import annotations

from .messages import (
    ROLES,
    AssistantMessage,
    Message,
    Role,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from .recorded import RECORDED_CALL_STATUSES, Executor, RecordedCallStatus, RecordedToolCall
from .timeline import (
    NO_EVENTS_SKIP_REASON,
    Requestor,
    TimelineEvent,
    ToolCallEvent,
    TrialTimeline,
    TurnEvent,
    build_trial_timeline,
)
from .wire import decode_transcript_wire, encode_transcript_wire, split_leading_system_message

__all__ = [
    "NO_EVENTS_SKIP_REASON",
    "RECORDED_CALL_STATUSES",
    "ROLES",
    "AssistantMessage",
    "Executor",
    "Message",
    "RecordedCallStatus",
    "RecordedToolCall",
    "Requestor",
    "Role",
    "SystemMessage",
    "TimelineEvent",
    "ToolCall",
    "ToolCallEvent",
    "ToolMessage",
    "TrialTimeline",
    "TurnEvent",
    "UserMessage",
    "build_trial_timeline",
    "decode_transcript_wire",
    "encode_transcript_wire",
    "split_leading_system_message",
]
