"""The judge's opening messages: its instructions, then the evidence -- never the golden answer.

Evidence is the agent's system prompt (unless the pack excludes it), the conversation, the diff between
the trial's initial and final state, the author's reference (if any) and the rubric. Golden actions,
expected hashes and JSONPath assertions never reach the judge: they are the other components' oracle,
and showing them would bias the judge towards the golden path and count the state twice.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tolokaforge.core.models import LLMJudgeConfig, Rubric
from tolokaforge.core.transcript.messages import AssistantMessage, Message, ToolMessage, UserMessage

from .report import MET_THRESHOLD, SUBMIT_REPORT

__all__ = ["DEFAULT_INSTRUCTIONS", "opening_messages"]

DEFAULT_INSTRUCTIONS = (
    "You are a strict, impartial grader of a customer-service agent's work. You read the agent's "
    "instructions, the conversation and how the agent changed the system's state, and you decide each "
    "rubric criterion on that evidence alone. A criterion the evidence does not show is not met. You may "
    "inspect the final state with the read-only tools get_state and query_table; they cannot change it."
)

_CONTRACT = (
    f"When you have decided, call {SUBMIT_REPORT} exactly once with, for every criterion, "
    "'<id>_justification' (your reasoning, citing the evidence, whose last line is exactly "
    "'VERDICT: MET' or 'VERDICT: NOT MET') and then '<id>' (true/false for a binary criterion, a score "
    f"from 0 to 1 for a graded one, met from {MET_THRESHOLD}), and finally 'reasons' (a short overall "
    "account). A report that is malformed or contradicts itself is returned to you to correct."
)


def opening_messages(
    config: LLMJudgeConfig, agent_system_prompt: str | None, transcript: Sequence[Message], diff: str
) -> list[dict[str, Any]]:
    instructions = config.customization.system_prompt or DEFAULT_INSTRUCTIONS
    sections: list[str] = []
    if config.customization.include_agent_system_prompt:
        shown = agent_system_prompt if agent_system_prompt else "(the agent had no system prompt)"
        sections.append(f"## The agent's system prompt\n{shown}")
    sections.append(f"## The conversation\n{render_transcript(transcript)}")
    sections.append(
        "## How the agent changed the state (initial -> final)\n" + (diff or "(the state did not change)")
    )
    if config.rubric.reference:
        sections.append(f"## Reference (written by the task's author)\n{config.rubric.reference}")
    sections.append(f"## Rubric\n{render_rubric(config.rubric)}")
    return [
        {"role": "system", "content": f"{instructions}\n\n{_CONTRACT}"},
        {"role": "user", "content": "\n\n".join(sections)},
    ]


def render_transcript(transcript: Sequence[Message]) -> str:
    lines: list[str] = []
    for message in transcript:
        if isinstance(message, ToolMessage):
            lines.append(f"[tool result {message.tool_call_id}] {message.content}")
            continue
        if message.content:
            lines.append(f"[{message.role}] {message.content}")
        if isinstance(message, AssistantMessage | UserMessage):
            for call in message.tool_calls:
                arguments = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
                lines.append(f"[{message.role} calls {call.name} {call.id}] {arguments}")
    return "\n".join(lines) or "(no messages)"


def render_rubric(rubric: Rubric) -> str:
    lines: list[str] = []
    for criterion in rubric.criteria:
        traits = [
            criterion.kind,
            "required: a gate" if criterion.required else f"weight {criterion.weight:g}",
        ]
        lines.append(f"- {criterion.id} ({', '.join(traits)}): {criterion.description}")
        if criterion.expected:
            lines.append(f"  expected: {criterion.expected}")
    return "\n".join(lines)
