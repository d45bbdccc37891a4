"""Transcript rules off the timeline: each rule passing, failing, and the no-events skip."""

from __future__ import annotations

from typing import Any

import pytest

from tolokaforge.core.models import TranscriptRulesConfig
from tolokaforge.core.transcript import AssistantMessage, ToolCall, ToolMessage, UserMessage
from tolokaforge.core.transcript.recorded import RecordedCallStatus, RecordedToolCall
from tolokaforge.core.transcript.timeline import NO_EVENTS_SKIP_REASON, build_trial_timeline
from tolokaforge.runner.grading.component import KeyLedger
from tolokaforge.runner.grading.transcript_rules import evaluate_transcript_rules


def _record(
    call_id: str, name: str, arguments: dict[str, Any], status: RecordedCallStatus = "success", seq: int = 0
) -> RecordedToolCall:
    return RecordedToolCall(
        call_id=call_id,
        sequence=seq,
        tool_name=name,
        arguments=arguments,
        executor="agent",
        status=status,
        output="ok",
        latency_seconds=0.01,
        timestamp=1.0,
    )


def _conversation(status: RecordedCallStatus = "success") -> tuple[list[Any], list[RecordedToolCall]]:
    call = ToolCall(id="c1", name="set_status", arguments={"order_id": "O-1", "status": "paid"})
    messages = [
        UserMessage(content="Pay O-1 please"),
        AssistantMessage(content="", tool_calls=(call,)),
        ToolMessage(content="O-1 is now paid", tool_call_id="c1"),
        AssistantMessage(content="Done: order O-1 is paid, total 10.50 USD. Bye!"),
    ]
    return messages, [_record("c1", "set_status", {"order_id": "O-1", "status": "paid"}, status)]


def _evaluate(
    rules: dict[str, Any], status: RecordedCallStatus = "success", messages: Any = None
) -> tuple[float | None, str, KeyLedger]:
    convo, records = _conversation(status)
    if messages is not None:
        convo, records = messages, []
    ledger = KeyLedger()
    result = evaluate_transcript_rules(
        TranscriptRulesConfig.model_validate(rules), build_trial_timeline(convo, records), ledger
    )
    return result.score, result.segment, ledger


@pytest.mark.parametrize(
    ("rules", "score"),
    [
        (
            {
                "required_actions": [
                    {"name": "set_status", "arguments": {"order_id": "O-1", "status": "paid"}}
                ]
            },
            1.0,
        ),
        ({"required_actions": [{"name": "set_status", "arguments": {"order_id": "O-2"}}]}, 0.0),
        (
            {
                "required_actions": [
                    {
                        "name": "set_status",
                        "arguments": {"order_id": "O-1", "status": "x"},
                        "compare_args": ["order_id"],
                    }
                ]
            },
            1.0,
        ),
        ({"required_actions": [{"name": "status", "arguments": {"order_id": "O-1"}}]}, 1.0),
        ({"required_actions": [{"name": "set_status", "requestor": "user"}]}, 0.0),
        ({"communicate_info": [{"info": "10.50 usd"}, {"info": "tracking number"}]}, 0.5),
        ({"communicate_info": [{"info": "tracking number", "required": False}, {"info": "O-1"}]}, 1.0),
        ({"must_contain": ["order o-1 is PAID"]}, 1.0),
        ({"must_contain": ["refund"]}, 0.0),
        ({"disallow_regex": [r"(?i)payment failed"]}, 1.0),
        ({"disallow_regex": [r"\bBye\b"]}, 0.0),
        ({"max_turns": 2}, 1.0),
        ({"max_turns": 1}, 0.0),
        ({"min_assistant_turns": 2}, 1.0),
        ({"min_assistant_turns": 3}, 0.0),
        ({"tool_expectations": [{"name": "set_status", "min_calls": 1, "max_calls": 1}]}, 1.0),
        ({"tool_expectations": [{"name": "get_order", "min_calls": 1}]}, 0.0),
    ],
)
def test_rule(rules: dict[str, Any], score: float) -> None:
    got, segment, ledger = _evaluate(rules)
    assert got == score, segment
    assert ledger.evaluated == {f"transcript_rules.{key}" for key in rules}
    assert segment.startswith("Transcript: ")


def test_failed_call_does_not_perform_a_required_action() -> None:
    score, segment, _ = _evaluate(
        {"required_actions": [{"action_id": "pay", "name": "set_status"}]}, status="error"
    )
    assert score == 0.0
    assert "required action 'pay'" in segment


def test_all_passing_segment_counts_the_rules() -> None:
    _, segment, _ = _evaluate({"must_contain": ["paid"], "max_turns": 5})
    assert segment == "Transcript: all 2 rules passed"


def test_no_events_skips_everything_but_min_assistant_turns() -> None:
    rules = {"must_contain": ["x"], "required_actions": [{"name": "set_status"}], "min_assistant_turns": 1}
    score, segment, ledger = _evaluate(rules, messages=[])
    assert score == 0.0 and "fewer than min_assistant_turns 1" in segment
    assert ledger.skipped == {
        "transcript_rules.must_contain": NO_EVENTS_SKIP_REASON,
        "transcript_rules.required_actions": NO_EVENTS_SKIP_REASON,
    }
    assert ledger.evaluated == {"transcript_rules.min_assistant_turns"}


def test_no_events_without_min_turns_leaves_the_component_unscored() -> None:
    score, segment, ledger = _evaluate({"must_contain": ["x"]}, messages=[])
    assert score is None and segment == ""
    assert ledger.skipped == {"transcript_rules.must_contain": NO_EVENTS_SKIP_REASON}
