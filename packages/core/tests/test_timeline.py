from __future__ import annotations

from typing import Any

import pytest

from tolokaforge.core import (
    NO_EVENTS_SKIP_REASON,
    AssistantMessage,
    DuplicateToolCallIdError,
    Message,
    RecordedToolCall,
    SystemMessage,
    TerminationReason,
    TimelineInconsistencyError,
    ToolCall,
    ToolCallEvent,
    ToolMessage,
    TurnEvent,
    UserMessage,
    build_trial_timeline,
    decode_transcript_wire,
    encode_transcript_wire,
)


def _record(call_id: str, tool_name: str, sequence: int, **overrides: Any) -> RecordedToolCall:
    fields: dict[str, Any] = {
        "call_id": call_id,
        "sequence": sequence,
        "tool_name": tool_name,
        "arguments": {},
        "executor": "agent",
        "status": "success",
        "output": f"output of {call_id}",
        "latency_seconds": 0.01,
        "timestamp": 1_700_000_000.0 + sequence,
    }
    fields.update(overrides)
    return RecordedToolCall(**fields)


BOOKING: list[Message] = [
    SystemMessage("policy"),
    UserMessage("Book me a flight"),
    AssistantMessage("", (ToolCall("call_123", "book_reservation", {"user_id": "mia"}),)),
    ToolMessage("Reservation confirmed: RES-456", "call_123"),
    AssistantMessage("Booked."),
]


def test_joins_the_spec_example_into_ordered_events() -> None:
    record = _record("call_123", "book_reservation", 0, arguments={"user_id": "mia"})
    timeline = build_trial_timeline(BOOKING, [record], TerminationReason.AGENT_DONE)

    assert [type(event) for event in timeline.events] == [TurnEvent, TurnEvent, ToolCallEvent, TurnEvent]
    assert [event.position for event in timeline.events] == [0, 1, 2, 3]
    user, assistant, call, final = timeline.events
    assert isinstance(user, TurnEvent) and user.role == "user" and user.message_index == 1
    assert isinstance(assistant, TurnEvent) and assistant.message_index == 2
    assert isinstance(call, ToolCallEvent)
    assert call.call_id == "call_123"
    assert call.tool_name == "book_reservation"
    assert call.requestor == "assistant"
    assert call.turn_position == 1
    assert call.declared_at == 2
    assert call.result == ToolMessage("Reservation confirmed: RES-456", "call_123")
    assert call.result_at == 3
    assert call.record is record
    assert call.recorded
    assert isinstance(final, TurnEvent) and final.content == "Booked."

    assert timeline.termination_reason is TerminationReason.AGENT_DONE
    assert timeline.has_events
    assert timeline.has_transcript


def test_assistant_helpers() -> None:
    timeline = build_trial_timeline(BOOKING, [_record("call_123", "book_reservation", 0)])
    assert timeline.assistant_turn_count == 2  # the tool-only turn counts as a turn
    assert timeline.assistant_texts == ("Booked.",)  # ... but said nothing
    assert timeline.last_assistant_message == AssistantMessage("Booked.")
    assert timeline.tool_call("call_123") is timeline.tool_calls[0]
    assert timeline.tool_call("nope") is None


def test_parallel_calls_to_one_tool_with_identical_arguments_join_by_id_not_position() -> None:
    # Declared a then b, executed b then a, answered b then a: only the ids tell them apart.
    transcript: list[Message] = [
        UserMessage("look both up"),
        AssistantMessage(
            "", (ToolCall("call_a", "get_user", {"id": 1}), ToolCall("call_b", "get_user", {"id": 1}))
        ),
        ToolMessage("result b", "call_b"),
        ToolMessage("result a", "call_a"),
    ]
    records = [
        _record("call_b", "get_user", 0, arguments={"id": 1}, output="result b"),
        _record("call_a", "get_user", 1, arguments={"id": 1}, output="result a"),
    ]
    timeline = build_trial_timeline(transcript, records)

    call_a, call_b = timeline.tool_calls
    assert (call_a.call_id, call_b.call_id) == ("call_a", "call_b")  # declaration order
    for event in (call_a, call_b):
        assert event.record is not None and event.result is not None
        assert event.record.call_id == event.call_id == event.result.tool_call_id
        assert event.record.output == event.result.content
    assert call_a.result_at == 3 and call_b.result_at == 2
    assert call_a.record is not None and call_a.record.sequence == 1


def test_episode_unique_repeat_ids_are_kept() -> None:
    # The host suffixes a provider id that repeats within the episode: '<id>#<n>'.
    transcript: list[Message] = [
        AssistantMessage("", (ToolCall("call_1", "get_user"),)),
        ToolMessage("first", "call_1"),
        AssistantMessage("", (ToolCall("call_1#1", "get_user"),)),
        ToolMessage("second", "call_1#1"),
    ]
    records = [_record("call_1", "get_user", 0), _record("call_1#1", "get_user", 1)]
    timeline = build_trial_timeline(decode_transcript_wire(encode_transcript_wire(transcript)), records)
    assert [event.call_id for event in timeline.tool_calls] == ["call_1", "call_1#1"]
    assert [event.record.call_id for event in timeline.tool_calls if event.record] == ["call_1", "call_1#1"]


def test_a_declared_call_without_a_record_is_marked_unrecorded() -> None:
    # e.g. the host refused it locally, and told the agent so in a tool message.
    transcript: list[Message] = [
        AssistantMessage("", (ToolCall("c1", "get_user"), ToolCall("c2", "delete_everything"))),
        ToolMessage("ok", "c1"),
        ToolMessage("refused: tool not offered", "c2"),
    ]
    timeline = build_trial_timeline(transcript, [_record("c1", "get_user", 0)])
    recorded, refused = timeline.tool_calls
    assert recorded.recorded
    assert not refused.recorded
    assert refused.record is None
    assert refused.result == ToolMessage("refused: tool not offered", "c2")
    assert timeline.unrecorded_tool_calls == (refused,)


def test_a_declared_call_may_go_unanswered() -> None:
    timeline = build_trial_timeline([AssistantMessage("", (ToolCall("c1", "get_user"),))], [])
    (call,) = timeline.tool_calls
    assert call.result is None and call.result_at is None and not call.recorded


def test_tool_calls_by_requestor() -> None:
    transcript: list[Message] = [
        UserMessage("let me compute", (ToolCall("u1", "calculator", {"expr": "2+2"}),)),
        ToolMessage("4", "u1"),
        AssistantMessage("", (ToolCall("a1", "get_user"),)),
        ToolMessage("Mia", "a1"),
    ]
    records = [_record("u1", "calculator", 0, executor="user"), _record("a1", "get_user", 1)]
    timeline = build_trial_timeline(transcript, records)
    assert [event.call_id for event in timeline.tool_calls_by("user")] == ["u1"]
    assert [event.call_id for event in timeline.tool_calls_by("assistant")] == ["a1"]


@pytest.mark.parametrize(
    "transcript",
    [
        pytest.param([], id="empty"),
        pytest.param([SystemMessage("policy")], id="policy only"),
        pytest.param([SystemMessage("policy"), SystemMessage("more policy")], id="system only"),
    ],
)
def test_a_trial_with_no_turns_and_no_calls_has_no_events(transcript: list[Message]) -> None:
    timeline = build_trial_timeline(transcript, [], TerminationReason.MAX_TURNS)
    assert not timeline.has_events
    assert timeline.events == ()
    assert timeline.assistant_turn_count == 0
    assert timeline.last_assistant_message is None
    assert NO_EVENTS_SKIP_REASON == "skipped: the trial's timeline carries no events"


def test_system_messages_are_not_events_but_keep_their_transcript_index() -> None:
    transcript: list[Message] = [
        SystemMessage("policy"),
        UserMessage("hi"),
        SystemMessage("nudge"),
        AssistantMessage("hello"),
    ]
    timeline = build_trial_timeline(transcript, [])
    assert [event.message_index for event in timeline.turns] == [1, 3]
    assert [event.position for event in timeline.turns] == [0, 1]


def test_a_single_user_turn_is_an_event() -> None:
    assert build_trial_timeline([UserMessage("hello?")], []).has_events


def test_without_a_transcript_the_record_alone_makes_the_timeline() -> None:
    # Hash-only grading may omit llm_messages_json; the runner still holds its own record.
    records = [_record("c2", "get_user", 1, executor="user"), _record("c1", "book", 0, arguments={"x": 1})]
    timeline = build_trial_timeline(None, records)
    assert not timeline.has_transcript
    assert timeline.has_events
    assert [event.call_id for event in timeline.tool_calls] == ["c1", "c2"]  # by sequence
    first, second = timeline.tool_calls
    assert first.call == ToolCall("c1", "book", {"x": 1})
    assert first.requestor == "assistant" and second.requestor == "user"
    assert first.turn_position is None and first.declared_at is None and first.result is None
    assert timeline.turns == ()


# --- inconsistencies ----------------------------------------------------------------------------


def _inconsistency(
    transcript: list[Message] | None, records: list[RecordedToolCall]
) -> TimelineInconsistencyError:
    with pytest.raises(TimelineInconsistencyError) as caught:
        build_trial_timeline(transcript, records)
    assert isinstance(caught.value, ValueError)
    return caught.value


def test_a_recorded_call_the_transcript_never_asked_for() -> None:
    error = _inconsistency(
        BOOKING, [_record("call_123", "book_reservation", 0), _record("ghost", "refund", 1)]
    )
    assert error.key == "ghost"
    assert str(error) == (
        "tool call 'ghost': the runner recorded a call to 'refund' (sequence 1) "
        "that the transcript never asked for"
    )


def test_any_recorded_call_contradicts_an_empty_transcript() -> None:
    assert _inconsistency([], [_record("c1", "get_user", 0)]).key == "c1"


def test_a_tool_result_answering_no_call() -> None:
    transcript: list[Message] = [UserMessage("hi"), ToolMessage("orphan", "nobody")]
    error = _inconsistency(transcript, [])
    assert error.key == "nobody"
    assert "the tool result at messages[1] answers no call declared before it" in str(error)


def test_a_tool_result_before_its_call() -> None:
    transcript: list[Message] = [
        ToolMessage("too early", "c1"),
        AssistantMessage("", (ToolCall("c1", "get_user"),)),
    ]
    error = _inconsistency(transcript, [_record("c1", "get_user", 0)])
    assert error.key == "c1"
    assert "messages[0]" in str(error)


def test_a_call_answered_twice() -> None:
    transcript: list[Message] = [
        AssistantMessage("", (ToolCall("c1", "get_user"),)),
        ToolMessage("first", "c1"),
        ToolMessage("second", "c1"),
    ]
    error = _inconsistency(transcript, [_record("c1", "get_user", 0)])
    assert error.key == "c1"
    assert "answered twice, by the tool results at messages[1] and messages[2]" in str(error)


def test_a_recorded_call_naming_a_different_tool() -> None:
    error = _inconsistency(BOOKING, [_record("call_123", "cancel_reservation", 0)])
    assert error.key == "call_123"
    assert str(error) == (
        "tool call 'call_123': the runner recorded tool 'cancel_reservation' "
        "but messages[2] declared 'book_reservation'"
    )


def test_a_recorded_call_routed_to_the_other_actors_registry() -> None:
    error = _inconsistency(BOOKING, [_record("call_123", "book_reservation", 0, executor="user")])
    assert error.key == "call_123"
    assert (
        "routed the call to the 'user' registry but it was declared by the assistant turn at messages[2]"
        in str(error)
    )


def test_a_call_id_recorded_twice() -> None:
    error = _inconsistency(
        BOOKING, [_record("call_123", "book_reservation", 0), _record("call_123", "book_reservation", 1)]
    )
    assert error.key == "call_123"
    assert "recorded twice (sequence 0 and 1)" in str(error)


def test_a_call_id_recorded_twice_is_refused_without_a_transcript_too() -> None:
    assert _inconsistency(None, [_record("c1", "f", 0), _record("c1", "f", 3)]).key == "c1"


def test_a_transcript_built_in_memory_with_a_duplicate_id_is_refused() -> None:
    transcript: list[Message] = [
        AssistantMessage("", (ToolCall("c1", "get_user"),)),
        AssistantMessage("", (ToolCall("c1", "get_user"),)),
    ]
    with pytest.raises(DuplicateToolCallIdError, match=r"messages\[1\]\.tool_calls\[0\]\.id"):
        build_trial_timeline(transcript, [])
