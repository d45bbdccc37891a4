"""The trial timeline: the decoded transcript joined with the runner's tool-call record.

The two views of a trial meet here, by tool-call id and never by position: position cannot tell apart
two parallel calls to one tool with identical arguments, the id can. The join refuses a contradiction
rather than guessing, with ``TimelineInconsistencyError`` naming the call id:

* a recorded call the transcript never declared (the runner ran something the trace does not show);
* a tool result answering no call declared before it, or answering one call twice;
* a recorded call naming a different tool than the declaration with its id;
* a recorded call routed to the other actor's registry than the turn that declared it.

A declared call with no record is allowed: the host may refuse a call locally, or the trial may end
before it runs. Its event says so (``recorded`` is False).

Events, in transcript order: one ``TurnEvent`` per user or assistant message, each followed directly
by one ``ToolCallEvent`` per call it declared (in declaration order), carrying the call's record and
its result message. System messages are not events: the leading one is the policy
(``split_leading_system_message``), and a later one is harness instruction, neither a turn nor a call.
Tool messages are not events of their own either; each is folded into the call it answers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Final, Literal

from ..errors import DuplicateToolCallIdError, TimelineInconsistencyError
from ..termination import TerminationReason
from .messages import AssistantMessage, Message, SystemMessage, ToolCall, ToolMessage, UserMessage
from .recorded import Executor, RecordedToolCall

__all__ = [
    "NO_EVENTS_SKIP_REASON",
    "Requestor",
    "TimelineEvent",
    "ToolCallEvent",
    "TrialTimeline",
    "TurnEvent",
    "build_trial_timeline",
]

Requestor = Literal["assistant", "user"]
"""Which side of the conversation asked for a call: the role of the turn that declared it."""

NO_EVENTS_SKIP_REASON: Final = "skipped: the trial's timeline carries no events"
"""The recorded skip for transcript rules over a timeline whose ``has_events`` is False."""

_EXECUTOR_OF: Final[dict[Requestor, Executor]] = {"assistant": "agent", "user": "user"}
_REQUESTOR_OF: Final[dict[Executor, Requestor]] = {"agent": "assistant", "user": "user"}


@dataclass(frozen=True, slots=True)
class TurnEvent:
    """A user or assistant message; ``message_index`` is its index in the transcript it came from."""

    position: int
    message_index: int
    message: UserMessage | AssistantMessage
    kind: ClassVar[Literal["turn"]] = "turn"

    @property
    def role(self) -> Requestor:
        return self.message.role

    @property
    def content(self) -> str:
        return self.message.content


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    """One tool call, joined by id with the runner's record of it and the result message answering it.

    Attributes:
        position: Index in ``TrialTimeline.events``.
        call: The call as declared (id, name, arguments the requestor sent).
        requestor: The role of the declaring turn.
        turn_position: Position of the declaring ``TurnEvent``; None in a timeline built without a
            transcript, where the runner's record is the only view.
        declared_at: Transcript index of the declaring message (None likewise).
        result: The tool message answering the call, None when none did.
        result_at: Transcript index of ``result``.
        record: The runner's record of the call, None when the runner never ran it.
    """

    position: int
    call: ToolCall
    requestor: Requestor
    turn_position: int | None
    declared_at: int | None
    result: ToolMessage | None = None
    result_at: int | None = None
    record: RecordedToolCall | None = None
    kind: ClassVar[Literal["tool_call"]] = "tool_call"

    @property
    def call_id(self) -> str:
        """The episode-unique id (``<id>#<n>`` for the n-th repeat of a provider id)."""
        return self.call.id

    @property
    def tool_name(self) -> str:
        return self.call.name

    @property
    def recorded(self) -> bool:
        """Whether the runner recorded the call (False: refused by the host, or never run)."""
        return self.record is not None


TimelineEvent = TurnEvent | ToolCallEvent


@dataclass(frozen=True, slots=True)
class TrialTimeline:
    """A trial's ordered events plus what the transcript-rule evaluators read off them.

    ``has_transcript`` is False when the timeline was built from the runner's record alone (the host
    sent no transcript, as hash-only grading may): there are then tool-call events but no turns.
    """

    events: tuple[TimelineEvent, ...]
    termination_reason: TerminationReason | None = None
    has_transcript: bool = True

    @property
    def has_events(self) -> bool:
        """False when the trial left neither a conversational turn nor a tool call (NO_EVENTS_SKIP_REASON)."""
        return bool(self.events)

    @property
    def turns(self) -> tuple[TurnEvent, ...]:
        return tuple(event for event in self.events if isinstance(event, TurnEvent))

    @property
    def tool_calls(self) -> tuple[ToolCallEvent, ...]:
        return tuple(event for event in self.events if isinstance(event, ToolCallEvent))

    def tool_calls_by(self, requestor: Requestor) -> tuple[ToolCallEvent, ...]:
        """The calls the assistant (or the simulated user) asked for, in timeline order."""
        return tuple(event for event in self.tool_calls if event.requestor == requestor)

    def tool_call(self, call_id: str) -> ToolCallEvent | None:
        """The call with this episode-unique id, or None."""
        return next((event for event in self.tool_calls if event.call_id == call_id), None)

    @property
    def unrecorded_tool_calls(self) -> tuple[ToolCallEvent, ...]:
        """Declared calls the runner holds no record of."""
        return tuple(event for event in self.tool_calls if not event.recorded)

    @property
    def assistant_messages(self) -> tuple[AssistantMessage, ...]:
        return tuple(event.message for event in self.turns if isinstance(event.message, AssistantMessage))

    @property
    def assistant_turn_count(self) -> int:
        """Every assistant message counts, including one that only called tools."""
        return len(self.assistant_messages)

    @property
    def assistant_texts(self) -> tuple[str, ...]:
        """What the assistant said, turn by turn; a turn that only called tools said nothing: left out."""
        return tuple(message.content for message in self.assistant_messages if message.content)

    @property
    def last_assistant_message(self) -> AssistantMessage | None:
        """The final assistant turn (its content may be ``""`` when it only called tools), or None."""
        messages = self.assistant_messages
        return messages[-1] if messages else None


def build_trial_timeline(
    transcript_messages: Sequence[Message] | None,
    recorded_calls: Iterable[RecordedToolCall],
    termination_reason: TerminationReason | None = None,
) -> TrialTimeline:
    """Join the decoded transcript with the runner's recorded calls, by call id.

    ``transcript_messages`` is the decoded transcript, with or without its leading system message
    (system messages are not events either way). Pass None when the host sent no transcript: the
    timeline is then the recorded calls alone, in ``sequence`` order, with ``has_transcript`` False.
    An empty list is a transcript that declares nothing, so any recorded call contradicts it.

    Raises:
        TimelineInconsistencyError: the two views contradict each other; ``key`` is the call id.
        DuplicateToolCallIdError: the transcript declares one id twice (the decoder refuses this too;
            checked again for transcripts built in memory).
    """
    records = _index_records(recorded_calls)
    if transcript_messages is None:
        recorded_only = tuple(
            ToolCallEvent(
                position=position,
                call=ToolCall(record.call_id, record.tool_name, record.arguments),
                requestor=_REQUESTOR_OF[record.executor],
                turn_position=None,
                declared_at=None,
                record=record,
            )
            for position, record in enumerate(records.values())
        )
        return TrialTimeline(recorded_only, termination_reason, has_transcript=False)

    events: list[TimelineEvent] = []
    calls: dict[str, ToolCallEvent] = {}
    for index, message in enumerate(transcript_messages):
        if isinstance(message, SystemMessage):
            continue
        if isinstance(message, ToolMessage):
            answered = _answer(calls.get(message.tool_call_id), message, index)
            calls[answered.call_id] = answered
            events[answered.position] = answered
            continue
        turn = TurnEvent(len(events), index, message)
        events.append(turn)
        for offset, call in enumerate(message.tool_calls):
            if call.id in calls:
                first = calls[call.id]
                raise DuplicateToolCallIdError(
                    f"messages[{index}].tool_calls[{offset}].id", call.id, f"messages[{first.declared_at}]"
                )
            event = ToolCallEvent(
                position=len(events),
                call=call,
                requestor=message.role,
                turn_position=turn.position,
                declared_at=index,
                record=records.get(call.id),
            )
            calls[call.id] = event
            events.append(event)

    for record in records.values():
        _check_record(record, calls.get(record.call_id))
    return TrialTimeline(tuple(events), termination_reason)


def _index_records(recorded_calls: Iterable[RecordedToolCall]) -> dict[str, RecordedToolCall]:
    # Keyed by id and ordered by the runner's sequence, so the records-only timeline reads in call order
    # and the checks below report the earliest offending call first.
    records: dict[str, RecordedToolCall] = {}
    for record in sorted(recorded_calls, key=lambda record: record.sequence):
        if record.call_id in records:
            raise TimelineInconsistencyError(
                record.call_id,
                f"recorded twice (sequence {records[record.call_id].sequence} and {record.sequence}); "
                "the runner's record must hold one entry per call id",
            )
        records[record.call_id] = record
    return records


def _answer(call: ToolCallEvent | None, result: ToolMessage, index: int) -> ToolCallEvent:
    key = result.tool_call_id
    if call is None:
        raise TimelineInconsistencyError(
            key, f"the tool result at messages[{index}] answers no call declared before it"
        )
    if call.result is not None:
        raise TimelineInconsistencyError(
            key, f"answered twice, by the tool results at messages[{call.result_at}] and messages[{index}]"
        )
    return dataclasses.replace(call, result=result, result_at=index)


def _check_record(record: RecordedToolCall, call: ToolCallEvent | None) -> None:
    key = record.call_id
    if call is None:
        raise TimelineInconsistencyError(
            key,
            f"the runner recorded a call to {record.tool_name!r} (sequence {record.sequence}) "
            "that the transcript never asked for",
        )
    if record.tool_name != call.tool_name:
        raise TimelineInconsistencyError(
            key,
            f"the runner recorded tool {record.tool_name!r} but messages[{call.declared_at}] "
            f"declared {call.tool_name!r}",
        )
    if record.executor != _EXECUTOR_OF[call.requestor]:
        raise TimelineInconsistencyError(
            key,
            f"the runner routed the call to the {record.executor!r} registry but it was declared by "
            f"the {call.requestor} turn at messages[{call.declared_at}]",
        )
