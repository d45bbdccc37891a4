from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tolokaforge.core import (
    AssistantMessage,
    DuplicateToolCallIdError,
    InvalidMessageError,
    InvalidToolCallError,
    MalformedTranscriptError,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    TranscriptWireError,
    UserMessage,
    decode_transcript_wire,
    encode_transcript_wire,
    split_leading_system_message,
)

# The original protocol's example transcript, verbatim (the format: docs/protocol/runner.md#the-transcript).
SPEC_EXAMPLE = """[
  {"role": "system", "content": "You are a booking agent. Follow the refund policy."},
  {"role": "user", "content": "I want to book a flight to Seattle"},
  {"role": "assistant", "content": "", "tool_calls": [
    {"id": "call_123", "function": {"name": "book_reservation", "arguments":
      "{\\"user_id\\": \\"mia_li_3668\\", \\"origin\\": \\"JFK\\", \\"destination\\": \\"SEA\\"}"}}
  ]},
  {"role": "tool", "content": "Reservation confirmed: RES-456", "tool_call_id": "call_123"},
  {"role": "assistant", "content": "I've booked your flight to Seattle."}
]"""

SPEC_MESSAGES: list[Message] = [
    SystemMessage("You are a booking agent. Follow the refund policy."),
    UserMessage("I want to book a flight to Seattle"),
    AssistantMessage(
        "",
        (
            ToolCall(
                "call_123",
                "book_reservation",
                {"user_id": "mia_li_3668", "origin": "JFK", "destination": "SEA"},
            ),
        ),
    ),
    ToolMessage("Reservation confirmed: RES-456", "call_123"),
    AssistantMessage("I've booked your flight to Seattle."),
]


def _call(call_id: str = "c1", name: str = "get_user", arguments: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "function": {"name": name, "arguments": arguments}}


def _payload(*messages: Any) -> str:
    return json.dumps(list(messages))


# --- decoding what the spec shows ---------------------------------------------------------------


def test_decodes_the_spec_example() -> None:
    assert decode_transcript_wire(SPEC_EXAMPLE) == SPEC_MESSAGES


def test_spec_example_round_trips() -> None:
    assert decode_transcript_wire(encode_transcript_wire(SPEC_MESSAGES)) == SPEC_MESSAGES


def test_an_empty_array_is_an_empty_transcript() -> None:
    assert decode_transcript_wire("[]") == []


def test_encoding_follows_the_wire_shape() -> None:
    wire = json.loads(encode_transcript_wire(SPEC_MESSAGES))
    assert wire[0] == {"role": "system", "content": "You are a booking agent. Follow the refund policy."}
    assert wire[1] == {"role": "user", "content": "I want to book a flight to Seattle"}
    (call,) = wire[2]["tool_calls"]
    assert call["id"] == "call_123"
    assert call["function"]["name"] == "book_reservation"
    # arguments cross as a JSON-encoded string, not an object
    assert isinstance(call["function"]["arguments"], str)
    assert json.loads(call["function"]["arguments"])["user_id"] == "mia_li_3668"
    assert wire[3] == {
        "role": "tool",
        "content": "Reservation confirmed: RES-456",
        "tool_call_id": "call_123",
    }
    # a turn without calls carries no tool_calls key at all
    assert "tool_calls" not in wire[4]


def test_encoded_payload_is_ascii() -> None:
    payload = encode_transcript_wire([UserMessage("café \U0001f600 \ud800")])
    assert payload.isascii()
    assert decode_transcript_wire(payload) == [UserMessage("café \U0001f600 \ud800")]


# --- leniency that matches what providers send ---------------------------------------------------


@pytest.mark.parametrize("role", ["assistant", "user"])
def test_null_content_on_a_turn_that_calls_tools_reads_as_empty(role: str) -> None:
    (message,) = decode_transcript_wire(_payload({"role": role, "content": None, "tool_calls": [_call()]}))
    assert message.content == ""
    assert isinstance(message, AssistantMessage | UserMessage)
    assert message.tool_calls == (ToolCall("c1", "get_user"),)


def test_openai_type_function_is_accepted() -> None:
    entry = {"type": "function", **_call(arguments='{"id": 7}')}
    (message,) = decode_transcript_wire(_payload({"role": "assistant", "content": "", "tool_calls": [entry]}))
    assert message == AssistantMessage("", (ToolCall("c1", "get_user", {"id": 7}),))


@pytest.mark.parametrize("tool_calls", [None, []])
def test_null_or_empty_tool_calls_mean_no_calls(tool_calls: Any) -> None:
    payload = _payload({"role": "assistant", "content": "hi", "tool_calls": tool_calls})
    assert decode_transcript_wire(payload) == [AssistantMessage("hi")]


def test_unknown_keys_are_ignored() -> None:
    payload = _payload({"role": "assistant", "content": "hi", "refusal": None, "name": "bot"})
    assert decode_transcript_wire(payload) == [AssistantMessage("hi")]


def test_user_turns_may_call_tools() -> None:
    payload = _payload({"role": "user", "content": "checking", "tool_calls": [_call("u1", "calculator")]})
    assert decode_transcript_wire(payload) == [UserMessage("checking", (ToolCall("u1", "calculator"),))]


# --- rejections ---------------------------------------------------------------------------------

REJECTIONS: list[tuple[str, str, type[TranscriptWireError], str]] = [
    ("not JSON", "[{", MalformedTranscriptError, "llm_messages_json: not valid JSON"),
    ("empty string", "", MalformedTranscriptError, "llm_messages_json: not valid JSON"),
    (
        "NaN constant",
        '[{"role": "user", "content": NaN}]',
        MalformedTranscriptError,
        "NaN is not a JSON value",
    ),
    ("object", '{"messages": []}', MalformedTranscriptError, "expected a JSON array of messages, got object"),
    ("string", '"hello"', MalformedTranscriptError, "expected a JSON array of messages, got string"),
    (
        "message not an object",
        '["hi"]',
        InvalidMessageError,
        "messages[0]: expected a message object, got string",
    ),
    ("missing role", _payload({"content": "x"}), InvalidMessageError, "messages[0]: missing 'role'"),
    (
        "unknown role",
        _payload({"role": "developer", "content": "x"}),
        InvalidMessageError,
        "messages[0].role: unknown role 'developer' (accepted: system, user, assistant, tool)",
    ),
    (
        "non-string role",
        _payload({"role": ["user"], "content": "x"}),
        InvalidMessageError,
        "messages[0].role: unknown role ['user']",
    ),
    (
        "missing content",
        _payload({"role": "user", "content": "ok"}, {"role": "assistant"}),
        InvalidMessageError,
        "messages[1]: missing 'content'",
    ),
    (
        "null content without calls",
        _payload({"role": "assistant", "content": None}),
        InvalidMessageError,
        "messages[0].content: null is accepted only on a user or assistant turn that calls tools",
    ),
    (
        "null content with an empty call list",
        _payload({"role": "assistant", "content": None, "tool_calls": []}),
        InvalidMessageError,
        "messages[0].content: null is accepted only",
    ),
    (
        "null content on a tool result",
        _payload({"role": "tool", "content": None, "tool_call_id": "c1"}),
        InvalidMessageError,
        "messages[0].content: null is accepted only",
    ),
    (
        "null content on a system message",
        _payload({"role": "system", "content": None}),
        InvalidMessageError,
        "messages[0].content: null is accepted only",
    ),
    (
        "content blocks",
        _payload({"role": "user", "content": [{"type": "text", "text": "hi"}]}),
        InvalidMessageError,
        "messages[0].content: expected a string, got array",
    ),
    (
        "tool message without tool_call_id",
        _payload({"role": "tool", "content": "out"}),
        InvalidMessageError,
        "messages[0]: a tool message must carry 'tool_call_id'",
    ),
    (
        "tool message with empty tool_call_id",
        _payload({"role": "tool", "content": "out", "tool_call_id": ""}),
        InvalidMessageError,
        "messages[0].tool_call_id: expected a non-empty string",
    ),
    (
        "tool message with numeric tool_call_id",
        _payload({"role": "tool", "content": "out", "tool_call_id": 3}),
        InvalidMessageError,
        "messages[0].tool_call_id: expected a non-empty string, got 3",
    ),
    (
        "tool_call_id on an assistant turn",
        _payload({"role": "assistant", "content": "x", "tool_call_id": "c1"}),
        InvalidMessageError,
        "messages[0].tool_call_id: only a tool message answers a call",
    ),
    (
        "tool_calls on a system message",
        _payload({"role": "system", "content": "p", "tool_calls": [_call()]}),
        InvalidMessageError,
        "messages[0].tool_calls: a system message cannot call tools",
    ),
    (
        "tool_calls on a tool message",
        _payload({"role": "tool", "content": "p", "tool_call_id": "c0", "tool_calls": [_call()]}),
        InvalidMessageError,
        "messages[0].tool_calls: a tool message cannot call tools",
    ),
    (
        "tool_calls not an array",
        _payload({"role": "assistant", "content": "", "tool_calls": _call()}),
        InvalidMessageError,
        "messages[0].tool_calls: expected an array of tool calls, got object",
    ),
    (
        "tool call not an object",
        _payload({"role": "assistant", "content": "", "tool_calls": ["get_user"]}),
        InvalidToolCallError,
        "messages[0].tool_calls[0]: expected a tool-call object, got string",
    ),
    (
        "tool call without id",
        _payload(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}],
            }
        ),
        InvalidToolCallError,
        "messages[0].tool_calls[0]: missing 'id'",
    ),
    (
        "tool call with null id",
        _payload({"role": "assistant", "content": "", "tool_calls": [{**_call(), "id": None}]}),
        InvalidToolCallError,
        "messages[0].tool_calls[0]: missing 'id'",
    ),
    (
        "tool call with empty id",
        _payload({"role": "assistant", "content": "", "tool_calls": [_call("")]}),
        InvalidToolCallError,
        "messages[0].tool_calls[0].id: expected a non-empty string, got ''",
    ),
    (
        "tool call with a numeric id",
        _payload({"role": "assistant", "content": "", "tool_calls": [{**_call(), "id": 1}]}),
        InvalidToolCallError,
        "messages[0].tool_calls[0].id: expected a non-empty string, got 1",
    ),
    (
        "tool call of another type",
        _payload({"role": "assistant", "content": "", "tool_calls": [{"type": "custom", **_call()}]}),
        InvalidToolCallError,
        "messages[0].tool_calls[0].type: expected 'function', got 'custom'",
    ),
    (
        "tool call without function",
        _payload({"role": "assistant", "content": "", "tool_calls": [{"id": "c1"}]}),
        InvalidToolCallError,
        "messages[0].tool_calls[0]: missing 'function'",
    ),
    (
        "function not an object",
        _payload({"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "function": "get_user"}]}),
        InvalidToolCallError,
        "messages[0].tool_calls[0].function: expected an object, got string",
    ),
    (
        "function without name",
        _payload(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c1", "function": {"arguments": "{}"}}],
            }
        ),
        InvalidToolCallError,
        "messages[0].tool_calls[0].function: missing 'name'",
    ),
    (
        "function with empty name",
        _payload({"role": "assistant", "content": "", "tool_calls": [_call(name="")]}),
        InvalidToolCallError,
        "messages[0].tool_calls[0].function.name: expected a non-empty string, got ''",
    ),
    (
        "function without arguments",
        _payload(
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "function": {"name": "f"}}]}
        ),
        InvalidToolCallError,
        "messages[0].tool_calls[0].function: missing 'arguments'",
    ),
    (
        "arguments as an object",
        _payload(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": {}}}],
            }
        ),
        InvalidToolCallError,
        "messages[0].tool_calls[0].function.arguments: expected a JSON-encoded string, got object",
    ),
    (
        "arguments as null",
        _payload(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": None}}],
            }
        ),
        InvalidToolCallError,
        "messages[0].tool_calls[0].function.arguments: expected a JSON-encoded string, got null",
    ),
    (
        "arguments not JSON",
        _payload({"role": "assistant", "content": "", "tool_calls": [_call(arguments="{'id': 1}")]}),
        InvalidToolCallError,
        "messages[0].tool_calls[0].function.arguments: not valid JSON",
    ),
    (
        "arguments empty",
        _payload({"role": "assistant", "content": "", "tool_calls": [_call(arguments="")]}),
        InvalidToolCallError,
        "messages[0].tool_calls[0].function.arguments: not valid JSON",
    ),
    (
        "arguments not an object",
        _payload({"role": "assistant", "content": "", "tool_calls": [_call(arguments="[1, 2]")]}),
        InvalidToolCallError,
        "messages[0].tool_calls[0].function.arguments: must encode a JSON object, got array",
    ),
    (
        "duplicate id in one turn",
        _payload({"role": "assistant", "content": "", "tool_calls": [_call("c1"), _call("c1")]}),
        DuplicateToolCallIdError,
        "messages[0].tool_calls[1].id: duplicate tool-call id 'c1' "
        "(first declared at messages[0].tool_calls[0])",
    ),
    (
        "duplicate id across turns",
        _payload(
            {"role": "assistant", "content": "", "tool_calls": [_call("c1")]},
            {"role": "tool", "content": "ok", "tool_call_id": "c1"},
            {"role": "user", "content": "", "tool_calls": [_call("c2"), _call("c1", "calculator")]},
        ),
        DuplicateToolCallIdError,
        "messages[2].tool_calls[1].id: duplicate tool-call id 'c1' "
        "(first declared at messages[0].tool_calls[0])",
    ),
]


@pytest.mark.parametrize(
    ("payload", "error", "message"),
    [pytest.param(payload, error, message, id=case) for case, payload, error, message in REJECTIONS],
)
def test_rejections_name_the_offending_location(
    payload: str, error: type[TranscriptWireError], message: str
) -> None:
    with pytest.raises(error) as caught:
        decode_transcript_wire(payload)
    assert message in str(caught.value)
    # Every rejection is a ValueError, so GradeTrial answers "not gradeable" rather than the catch-all.
    assert isinstance(caught.value, ValueError)


def test_encoding_refuses_duplicate_ids() -> None:
    messages: list[Message] = [
        AssistantMessage("", (ToolCall("c1", "get_user"),)),
        AssistantMessage("", (ToolCall("c1", "get_user"),)),
    ]
    with pytest.raises(DuplicateToolCallIdError, match=r"messages\[1\]\.tool_calls\[0\]\.id"):
        encode_transcript_wire(messages)


def test_encoding_refuses_non_json_numbers() -> None:
    with pytest.raises(ValueError):
        encode_transcript_wire([AssistantMessage("", (ToolCall("c1", "f", {"x": float("nan")}),))])


# --- split_leading_system_message ---------------------------------------------------------------


def test_the_leading_system_message_is_lifted_as_policy() -> None:
    policy, rest = split_leading_system_message(SPEC_MESSAGES)
    assert policy == "You are a booking agent. Follow the refund policy."
    assert rest == SPEC_MESSAGES[1:]


def test_no_leading_system_message_means_no_policy() -> None:
    messages: list[Message] = [UserMessage("hi"), SystemMessage("later instruction")]
    policy, rest = split_leading_system_message(messages)
    assert policy is None
    assert rest == messages
    assert rest is not messages


def test_only_the_first_system_message_is_lifted() -> None:
    messages: list[Message] = [SystemMessage("policy"), SystemMessage("second"), UserMessage("hi")]
    assert split_leading_system_message(messages) == ("policy", [SystemMessage("second"), UserMessage("hi")])


def test_an_empty_policy_is_still_a_policy() -> None:
    assert split_leading_system_message([SystemMessage("")]) == ("", [])


def test_an_empty_transcript_has_no_policy() -> None:
    assert split_leading_system_message([]) == (None, [])


# --- properties ---------------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)
ARGUMENTS = st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=4)


@st.composite
def transcripts(draw: st.DrawFn) -> list[Message]:
    """Any typed transcript, with tool-call ids unique across it as the wire requires."""
    ids = iter(draw(st.lists(st.text(min_size=1, max_size=12), unique=True, min_size=12, max_size=12)))
    messages: list[Message] = []
    for _ in range(draw(st.integers(min_value=0, max_value=6))):
        kind = draw(st.sampled_from(["system", "user", "assistant", "tool"]))
        content = draw(st.text(max_size=20))
        if kind == "system":
            messages.append(SystemMessage(content))
        elif kind == "tool":
            messages.append(ToolMessage(content, draw(st.text(min_size=1, max_size=12))))
        else:
            count = draw(st.integers(min_value=0, max_value=2))
            calls = tuple(
                ToolCall(next(ids), draw(st.text(min_size=1, max_size=10)), draw(ARGUMENTS))
                for _ in range(count)
            )
            messages.append(
                UserMessage(content, calls) if kind == "user" else AssistantMessage(content, calls)
            )
    return messages


@given(transcripts())
def test_encode_then_decode_is_the_identity(messages: list[Message]) -> None:
    assert decode_transcript_wire(encode_transcript_wire(messages)) == messages


@given(transcripts())
def test_encoding_is_stable_under_a_round_trip(messages: list[Message]) -> None:
    payload = encode_transcript_wire(messages)
    assert encode_transcript_wire(decode_transcript_wire(payload)) == payload


MESSAGE_LIKE = st.dictionaries(
    st.sampled_from(
        ["role", "content", "tool_calls", "tool_call_id", "type", "id", "function", "name", "arguments"]
    ),
    JSON_VALUES | st.sampled_from(["user", "assistant", "tool", "system", "function", "{}"]),
    max_size=5,
)


@given(st.lists(MESSAGE_LIKE | JSON_VALUES, max_size=4))
def test_decoding_arbitrary_json_either_succeeds_or_raises_a_wire_error(document: list[Any]) -> None:
    # Anything else (TypeError, KeyError ...) would escape GradeTrial's "not gradeable" row.
    with contextlib.suppress(TranscriptWireError):
        decode_transcript_wire(json.dumps(document))
