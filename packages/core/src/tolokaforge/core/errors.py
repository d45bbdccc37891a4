"""Every exception ``tolokaforge.core`` raises, in one tree.

All of them are ``ValueError`` subclasses on purpose: the runner's GradeTrial answers
``Trial '<id>' is not gradeable: <ValueError subclass>: …`` for any of them, so an input that cannot be
graded lands on that row of the error table rather than on the ``Grading error: …`` catch-all::

    ValueError
     ├── TranscriptWireError              llm_messages_json does not decode into a transcript
     │    ├── MalformedTranscriptError    not JSON, or not a JSON array
     │    ├── InvalidMessageError         a message missing role / content, an unknown role, a misplaced key
     │    ├── InvalidToolCallError        a tool_calls entry without id / function / name / arguments
     │    └── DuplicateToolCallIdError    one tool-call id declared twice in a transcript
     ├── UnknownTerminationReasonError    a termination_reason outside the closed enum
     ├── InvalidRecordedToolCallError     a RecordedToolCall the runner could not have produced
     └── TimelineInconsistencyError       the transcript and the runner's call record contradict each other

Each carries the offending location or key as a typed field as well as in its message, so a caller can
report it without parsing text.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "DuplicateToolCallIdError",
    "InvalidMessageError",
    "InvalidRecordedToolCallError",
    "InvalidToolCallError",
    "MalformedTranscriptError",
    "TimelineInconsistencyError",
    "TranscriptWireError",
    "UnknownTerminationReasonError",
]


class TranscriptWireError(ValueError):
    """A transcript payload (or a typed transcript about to be encoded) breaks the wire format.

    ``path`` locates the fault, e.g. ``messages[3].tool_calls[1].function.arguments``; the message is
    ``"<path>: <problem>"``.
    """

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class MalformedTranscriptError(TranscriptWireError):
    """The payload is not JSON, or is JSON but not an array of messages."""


class InvalidMessageError(TranscriptWireError):
    """A message is not an object, lacks ``role`` / ``content``, names an unknown role, or misplaces a key."""


class InvalidToolCallError(TranscriptWireError):
    """A ``tool_calls`` entry lacks its id, its function, the function's name or its JSON-string arguments."""


class DuplicateToolCallIdError(TranscriptWireError):
    """Two tool calls share one id, so no result could be joined to either of them unambiguously."""

    def __init__(self, path: str, call_id: str, first_path: str) -> None:
        super().__init__(path, f"duplicate tool-call id {call_id!r} (first declared at {first_path})")
        self.call_id = call_id
        self.first_path = first_path


class UnknownTerminationReasonError(ValueError):
    """A termination_reason string that is not a TerminationReason value (and not empty)."""

    def __init__(self, value: str, accepted: Iterable[str]) -> None:
        self.value = value
        self.accepted = tuple(accepted)
        super().__init__(
            f"unknown termination_reason {value!r}; accepted: {', '.join(self.accepted)} "
            "(or empty when the engine reported none)"
        )


class InvalidRecordedToolCallError(ValueError):
    """A RecordedToolCall with a field no ExecuteTool call could have produced (empty id, bad executor …)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"RecordedToolCall.{field}: {problem}")
        self.field = field
        self.problem = problem


class TimelineInconsistencyError(ValueError):
    """The transcript and the runner's tool-call record cannot be joined into one timeline.

    ``key`` is the tool-call id the contradiction is about.
    """

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"tool call {key!r}: {problem}")
        self.key = key
        self.problem = problem
