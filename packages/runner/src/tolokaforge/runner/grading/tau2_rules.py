"""The τ²-bench action and communicate checks, evaluated off the trial timeline.

Both score 0 or 1 and are kept apart from transcript_rules on purpose: their rules are τ²-bench's,
not ours, and differ in every detail that matters for parity.

``tau2_actions``: each expected action must match at least one tool call the runner recorded,
whoever asked for it (the assistant or the simulated user) and however it ended (an erroring call,
or a call naming a tool nobody registered, counts too). A call matches when its tool name is exactly
the action's (no ``…_<name>`` suffix rule), and the two argument objects, cut down to the compared
keys, are equal by Python's ``==`` (so ``1 == 1.0 == True``). The compared keys are
``compare_args``, or, when that is None, the keys of the *call's* arguments; no compared key at all
matches every call of the tool.

``tau2_communicate``: each string must occur in some assistant message that has text (not only
whitespace), comparing ``info.lower()`` with the message's ``lower()`` from which every comma was
removed (the string's own commas are kept, so a string with a comma never matches).

An empty list scores 1 in both, as τ²-bench does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tolokaforge.core.models import Tau2Action, Tau2ActionsConfig, Tau2CommunicateConfig
from tolokaforge.core.transcript.timeline import ToolCallEvent, TrialTimeline

from .component import ITEMS, ComponentResult, ItemResult

__all__ = ["action_matches", "evaluate_tau2_actions", "evaluate_tau2_communicate", "info_communicated"]


def action_matches(action: Tau2Action, tool_name: str, arguments: Mapping[str, Any]) -> bool:
    """Whether one call (its tool name and arguments) matches ``action`` by τ²-bench's rule."""
    if tool_name != action.name:
        return False
    compared = list(arguments) if action.compare_args is None else action.compare_args
    if not compared:
        return True
    called = {key: value for key, value in arguments.items() if key in compared}
    expected = {key: value for key, value in action.arguments.items() if key in compared}
    return called == expected


def info_communicated(info: str, text: str) -> bool:
    """Whether one assistant message's ``text`` carries ``info`` by τ²-bench's rule."""
    return info.lower() in text.lower().replace(",", "")


def evaluate_tau2_actions(config: Tau2ActionsConfig, timeline: TrialTimeline) -> ComponentResult:
    calls = _recorded_calls(timeline)
    items: list[ItemResult] = []
    for index, action in enumerate(config.actions):
        label = action.action_id or action.name
        match = next(
            (call for call in calls if action_matches(action, call.tool_name, call.call.arguments)), None
        )
        if match is not None:
            details = {"call_id": match.call_id, "requestor": match.requestor}
            items.append(
                ItemResult("tau2_actions", index, label, True, f"matched call {match.call_id}", details)
            )
            continue
        called = sum(1 for call in calls if call.tool_name == action.name)
        why = (
            f"no call of {action.name} matches {_compared(action)}"
            if called
            else f"{action.name} was never called"
        )
        items.append(ItemResult("tau2_actions", index, label, False, why, {"calls_of_tool": called}))
    failures = [f"action {item.label!r}: {item.message}" for item in items if not item.met]
    return _verdict("tau2_actions", "Tau2 actions", items, failures)


def evaluate_tau2_communicate(
    config: Tau2CommunicateConfig, timeline: TrialTimeline, *, message_offset: int = 0
) -> ComponentResult:
    """``message_offset``: how many messages precede the timeline's first in the transcript as sent
    (1 when a leading system message was split off), so details name the message as the host sent it."""
    said = [
        (event.message_index + message_offset, event.message.content)
        for event in timeline.turns
        if event.role == "assistant" and event.message.content.strip()
    ]
    items: list[ItemResult] = []
    for index, info in enumerate(config.info):
        found = next((at for at, text in said if info_communicated(info, text)), None)
        if found is None:
            items.append(ItemResult("tau2_communicate", index, info, False, "never said"))
        else:
            items.append(
                ItemResult(
                    "tau2_communicate",
                    index,
                    info,
                    True,
                    f"said in messages[{found}]",
                    {"message_index": found},
                )
            )
    failures = [f"the agent did not communicate {item.label!r}" for item in items if not item.met]
    return _verdict("tau2_communicate", "Tau2 communicate", items, failures)


def _recorded_calls(timeline: TrialTimeline) -> list[ToolCallEvent]:
    """Every call the runner recorded, in timeline order, with the arguments the requestor sent.

    The declared arguments are what τ²-bench compares; the runner's record holds the same object,
    except that a call refused INVALID_ARGUMENTS is recorded with none.
    """
    return [call for call in timeline.tool_calls if call.recorded]


def _compared(action: Tau2Action) -> str:
    if action.compare_args is None:
        return f"{json.dumps(action.arguments, default=str)} on the keys it was called with"
    wanted = {key: action.arguments[key] for key in action.compare_args if key in action.arguments}
    return f"{json.dumps(wanted, default=str)} on {', '.join(action.compare_args)}"


def _verdict(name: str, title: str, items: list[ItemResult], failures: list[str]) -> ComponentResult:
    if not items:
        segment = f"{title}: nothing to check"
    elif failures:
        segment = f"{title}: {len(items) - len(failures)}/{len(items)} met; " + "; ".join(failures)
    else:
        segment = f"{title}: all {len(items)} met"
    return ComponentResult(name, 0.0 if failures else 1.0, segment, extra={ITEMS: items})
