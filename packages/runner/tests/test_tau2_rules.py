"""tau2_actions and tau2_communicate off the timeline: τ²-bench's matching rules, edge by edge."""

from __future__ import annotations

from typing import Any

import pytest

from tolokaforge.core.models import Tau2Action, Tau2ActionsConfig, Tau2CommunicateConfig
from tolokaforge.core.transcript import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage
from tolokaforge.core.transcript.recorded import Executor, RecordedCallStatus, RecordedToolCall
from tolokaforge.core.transcript.timeline import TrialTimeline, build_trial_timeline
from tolokaforge.runner.grading.component import ITEMS, ItemResult
from tolokaforge.runner.grading.tau2_rules import (
    action_matches,
    evaluate_tau2_actions,
    evaluate_tau2_communicate,
    info_communicated,
)


def _action(name: str = "update", compare_args: list[str] | None = None, **arguments: Any) -> Tau2Action:
    return Tau2Action(name=name, arguments=arguments, compare_args=compare_args)


@pytest.mark.parametrize(
    ("action", "name", "arguments", "matches"),
    [
        # compare_args None: the keys of the *call* are compared
        (_action(a=1, b=2), "update", {"a": 1, "b": 2}, True),
        (_action(a=1, b=2), "update", {"a": 1}, True),  # b, absent from the call, is not compared
        (_action(a=1), "update", {"a": 1, "c": 3}, False),  # c, added by the call, is
        (_action(a=1), "update", {"a": 2}, False),
        (_action(a=1), "update", {}, True),  # a call with no arguments compares nothing
        # compare_args []: any call of the tool
        (_action(compare_args=[], a=1), "update", {"a": 99, "z": 0}, True),
        # compare_args given: only those keys, on both sides
        (_action(compare_args=["a"], a=1, b=2), "update", {"a": 1, "b": 99}, True),
        (_action(compare_args=["a", "b"], a=1, b=2), "update", {"a": 1}, False),
        (_action(compare_args=["x"], a=1), "update", {"a": 2}, True),  # x on neither side: {} == {}
        # Python equality, not JSON's: 1 == 1.0 == True
        (_action(a=1), "update", {"a": 1.0}, True),
        (_action(a=True), "update", {"a": 1}, True),
        (_action(a={"k": [1, 2]}), "update", {"a": {"k": [1, 2]}}, True),
        (_action(a=[1, 2]), "update", {"a": [2, 1]}, False),
        # the name is exact: no suffix rule, no case folding
        (_action(), "shop_update", {}, False),
        (_action(), "Update", {}, False),
    ],
)
def test_action_matching_follows_tau2(
    action: Tau2Action, name: str, arguments: dict[str, Any], matches: bool
) -> None:
    assert action_matches(action, name, arguments) is matches


@pytest.mark.parametrize(
    ("info", "text", "found"),
    [
        ("1,000", "It costs 1,000 USD", False),  # the message loses its commas, the string keeps them
        ("1000", "It costs 1,000 USD", True),
        ("Order O-1", "your ORDER o-1 is paid", True),
        ("paid", "PAID!", True),
        ("21 days", "for 21  days", False),  # whitespace is not collapsed
        ("straße", "STRASSE", False),  # lower(), not casefold()
    ],
)
def test_communicated_strings_follow_tau2(info: str, text: str, found: bool) -> None:
    assert info_communicated(info, text) is found


def _record(
    call_id: str,
    name: str,
    arguments: dict[str, Any],
    *,
    status: RecordedCallStatus = "success",
    executor: Executor = "agent",
    seq: int = 0,
) -> RecordedToolCall:
    return RecordedToolCall(
        call_id=call_id,
        sequence=seq,
        tool_name=name,
        arguments=arguments if status != "invalid_arguments" else {},
        executor=executor,
        status=status,
        output="",
        latency_seconds=0.0,
        timestamp=1.0,
    )


def _timeline() -> TrialTimeline:
    """An agent call that errored, a user call, one refused as invalid, and one never run."""
    failed = ToolCall(id="c1", name="cancel", arguments={"order_id": "O-1"})
    user = ToolCall(id="c2", name="toggle", arguments={"on": False})
    invalid = ToolCall(id="c3", name="refund", arguments={"amount": "ten"})
    unrun = ToolCall(id="c4", name="ship", arguments={})
    messages: list[Message] = [
        UserMessage(content="hi"),
        AssistantMessage(content="", tool_calls=(failed,)),
        ToolMessage(content="Error: no", tool_call_id="c1"),
        UserMessage(content="", tool_calls=(user,)),
        ToolMessage(content="ok", tool_call_id="c2"),
        AssistantMessage(content="", tool_calls=(invalid, unrun)),
        ToolMessage(content="Error: bad", tool_call_id="c3"),
        AssistantMessage(content="Your total is $1,250.00, Order O-1."),
        AssistantMessage(content="   "),
        UserMessage(content="I was told: REFUNDED"),
    ]
    records = [
        _record("c1", "cancel", {"order_id": "O-1"}, status="error", seq=0),
        _record("c2", "toggle", {"on": False}, executor="user", seq=1),
        _record("c3", "refund", {"amount": "ten"}, status="invalid_arguments", seq=2),
    ]
    return build_trial_timeline(messages, records)


def _met(result: Any) -> list[bool]:
    items: list[ItemResult] = result.extra[ITEMS]
    return [item.met for item in items]


def test_actions_count_erroring_and_user_calls_but_not_calls_never_run() -> None:
    config = Tau2ActionsConfig(
        actions=[
            _action("cancel", order_id="O-1"),
            _action("toggle", on=False),
            _action("refund", amount="ten"),  # compared with what the requestor sent
            _action("ship"),  # declared, but the runner never ran it
        ]
    )
    result = evaluate_tau2_actions(config, _timeline())
    assert _met(result) == [True, True, True, False]
    assert result.score == 0.0
    assert "action 'ship': ship was never called" in result.segment


def test_communicate_reads_assistant_text_only() -> None:
    config = Tau2CommunicateConfig(info=["$1250.00", "order o-1", "refunded", "1,250"])
    result = evaluate_tau2_communicate(config, _timeline(), message_offset=1)
    assert _met(result) == [True, True, False, False]
    items: list[ItemResult] = result.extra[ITEMS]
    assert items[0].details == {"message_index": 8}  # messages[7] of the timeline, after a system message
    assert result.score == 0.0 and "Tau2 communicate: 2/4 met" in result.segment


def test_empty_lists_score_one_even_without_events() -> None:
    empty = build_trial_timeline([], [])
    actions = evaluate_tau2_actions(Tau2ActionsConfig(actions=[]), empty)
    said = evaluate_tau2_communicate(Tau2CommunicateConfig(info=[]), empty)
    assert (actions.score, said.score) == (1.0, 1.0)
    assert actions.segment == "Tau2 actions: nothing to check"
    assert evaluate_tau2_communicate(Tau2CommunicateConfig(info=["x"]), empty).score == 0.0
