"""The trace view: the trial timeline flattened into the four event kinds trace checks match on.

Order follows the transcript: each user or assistant message, then the calls it declared (those the
runner ran in the order it ran them, then those it never ran, in declaration order), and each tool
result where its tool message stands. A result the runner recorded with no tool message answering it
(a simulated user's call, whose output is inlined into its turn) follows its turn's calls. Without a
transcript the view is the runner's record alone: each call followed by its result, in sequence order.

``turn`` is the assistant generation an event belongs to: the opening user message shares turn 0 with
the first assistant message, and everything up to the next assistant message shares its turn.

Evidence only the runner's record carries -- a call's status, and its result when no tool message
answered it -- is ``UNRECORDED`` for a call the runner never ran. That is not "absent": a predicate over
it cannot be decided, and nothing may read it in the agent's favour.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from tolokaforge.core.models.trace_checks import EventKind
from tolokaforge.core.transcript.timeline import ToolCallEvent, TrialTimeline, TurnEvent

__all__ = ["UNRECORDED", "TraceEvent", "Unrecorded", "build_trace_view"]


class Unrecorded:
    """Evidence the trial did not record (a call that never ran has no status)."""

    _instance: Unrecorded | None = None

    def __new__(cls) -> Unrecorded:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNRECORDED"


UNRECORDED: Final = Unrecorded()

_EXECUTOR_OF: Final = {"assistant": "agent", "user": "user"}


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One event of the trace view; a field an event kind does not carry is None.

    A tool_call carries its own outcome (``status``, ``result``) read through the result paired with it
    by call id, so "a failed call to X with argument Y" is one matcher.
    """

    position: int
    kind: EventKind
    turn: int
    text: str | None = None
    tool: str | None = None
    executor: str | None = None
    args: Mapping[str, Any] | None = None
    status: str | Unrecorded | None = None
    result: str | Unrecorded | None = None
    call_id: str | None = None

    def describe(self) -> str:
        if self.kind in ("tool_call", "tool_result"):
            return f"{self.kind} {self.tool} at {self.position}"
        return f"{self.kind} at {self.position}"


# A sort key per event: (transcript index, slot, order within the slot).
_Key = tuple[int, int, tuple[int, int]]


def build_trace_view(timeline: TrialTimeline) -> tuple[TraceEvent, ...]:
    """The timeline's events as the four kinds, in the order above, positions dense from 0."""
    keyed: list[tuple[_Key, dict[str, Any]]] = []
    for event in timeline.events:
        if isinstance(event, TurnEvent):
            kind: EventKind = "assistant_message" if event.role == "assistant" else "user_message"
            keyed.append(((event.message_index, 0, (0, 0)), {"kind": kind, "text": event.content}))
        else:
            keyed += _call_events(event, timeline.has_transcript)
    keyed.sort(key=lambda item: item[0])
    events: list[TraceEvent] = []
    generation = -1
    for position, (_, fields) in enumerate(keyed):
        if fields["kind"] == "assistant_message":
            generation += 1
        events.append(TraceEvent(position=position, turn=max(generation, 0), **fields))
    return tuple(events)


def _call_events(event: ToolCallEvent, has_transcript: bool) -> list[tuple[_Key, dict[str, Any]]]:
    record = event.record
    status: str | Unrecorded = record.status if record is not None else UNRECORDED
    if record is not None:
        result: str | Unrecorded = record.output
    elif event.result is not None:
        result = event.result.content
    else:
        result = UNRECORDED
    common: dict[str, Any] = {
        "tool": event.tool_name,
        "executor": record.executor if record is not None else _EXECUTOR_OF[event.requestor],
        "status": status,
        "result": result,
        "call_id": event.call_id,
    }
    call = {"kind": "tool_call", "args": dict(event.call.arguments), **common}
    if not has_transcript or event.declared_at is None:
        # Records-only: the timeline position is the record's sequence order.
        return [
            ((event.position, 1, (0, 0)), call),
            ((event.position, 2, (0, 0)), {"kind": "tool_result", **common}),
        ]
    # Calls the runner ran, in the order it ran them, before those it never ran (declaration order).
    order = (0, record.sequence) if record is not None else (1, event.position)
    found: list[tuple[_Key, dict[str, Any]]] = [((event.declared_at, 1, order), call)]
    if event.result is not None and event.result_at is not None:
        found.append(((event.result_at, 0, (0, 0)), {"kind": "tool_result", **common}))
    elif record is not None:
        found.append(((event.declared_at, 2, order), {"kind": "tool_result", **common}))
    return found
