"""The judge's tool-calling loop: ask, answer its read-only tool calls, stop at an accepted report.

Budgets (JudgeModelConfig): ``max_turns`` LLM calls in all, and ``max_report_retries`` rejected
reports returned to the judge as tool errors; past either, :class:`JudgeFailed`. A turn with no tool
call is answered with a reminder to report, and counts as a turn. The wall-clock budget is the
caller's (it wraps the whole loop).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, cast

from tolokaforge.core.models import JudgeModelConfig, Rubric

from .chat import JudgeChat, JudgeFailed
from .report import SUBMIT_REPORT, ParsedReport, ReportRejected, parse_report, submit_report_tool
from .state import StateTools, ToolRefused

__all__ = ["JudgeUsage", "converse"]

_REMINDER = f"Finish by calling {SUBMIT_REPORT} with a verdict on every criterion."


@dataclass
class JudgeUsage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    tool_calls: int = 0
    rejected_reports: int = 0


async def converse(
    chat: JudgeChat,
    messages: list[dict[str, Any]],
    rubric: Rubric,
    state: StateTools,
    budget: JudgeModelConfig,
    usage: JudgeUsage,
) -> ParsedReport:
    """Run the conversation in ``messages`` (appended to as it goes) until a report is accepted."""
    tools = [*state.specs(), submit_report_tool(rubric)]
    for _ in range(budget.max_turns):
        turn = await chat.complete(messages, tools)
        usage.calls += 1
        usage.prompt_tokens += turn.prompt_tokens
        usage.completion_tokens += turn.completion_tokens
        usage.reasoning_tokens += turn.reasoning_tokens
        message = _assistant(turn.message)
        messages.append(message)
        calls = cast(list[dict[str, Any]], message.get("tool_calls") or [])
        if not calls:
            messages.append({"role": "user", "content": _REMINDER})
            continue
        for call in calls:
            call_id, name, arguments = _unpack(call)
            if name == SUBMIT_REPORT:
                try:
                    report = parse_report(rubric, arguments)
                except ReportRejected as error:
                    usage.rejected_reports += 1
                    messages.append({"role": "tool", "tool_call_id": call_id, "content": f"error: {error}"})
                    if usage.rejected_reports > budget.max_report_retries:
                        raise JudgeFailed(
                            f"{usage.rejected_reports} malformed or inconsistent reports "
                            f"(retry budget {budget.max_report_retries}); the last: {error}"
                        ) from error
                    continue
                messages.append({"role": "tool", "tool_call_id": call_id, "content": "report accepted"})
                return report
            usage.tool_calls += 1
            try:
                output = state.call(name, arguments)
            except ToolRefused as error:
                output = f"error: {error}"
            messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
    raise JudgeFailed(f"turn budget exhausted: {budget.max_turns} judge calls and no accepted report")


def _assistant(message: dict[str, Any]) -> dict[str, Any]:
    """The completion as it goes back into the conversation: role, content and tool calls only."""
    entry: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        entry["tool_calls"] = message["tool_calls"]
    return entry


def _unpack(call: dict[str, Any]) -> tuple[str, str, str]:
    function = cast(dict[str, Any], call.get("function") or {})
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        arguments = "" if arguments is None else json.dumps(arguments)
    return str(call.get("id") or ""), str(function.get("name") or ""), arguments
