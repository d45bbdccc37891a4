"""``golden``: the golden path scores 1.0 on every component it can be judged on.

Judged: state checks (hash replay, JSONPath), custom checks, trace checks (every constraint of the
route the golden path takes must pass: checks/trace.py), and the transcript rules --
the rules about tool calls always, the rules about what the agent says (must_contain, disallow_regex,
communicate_info) only when the task has a ``golden_response`` for the golden agent to say. What is
set aside is returned as a note (replay.judged_task); an LLM judge is answered by the mock judge and
noted as "mock-judged". A failure shows the grade's reasons, the state
diff and every call of the golden path with the runner's answer. Under ``combine: any`` the
components are alternatives: one at 1.0 is the verdict, and the others are noted.
"""

from __future__ import annotations

import json
from typing import Any, cast

from tolokaforge.contracts.runner import Grade
from tolokaforge.core.runner_api import reason_messages

from ..errors import CheckFailure
from ..replay import GoldenReplay, judged_task
from .context import TaskContext
from .trace import unmet_trace_constraints

__all__ = ["check", "components", "describe_calls"]

_TOLERANCE = 1e-9


def components(grade: Grade) -> dict[str, float | None]:
    """Each component's score; None where the runner did not evaluate it (-1.0, or unset)."""
    parts = grade.components
    if parts is None:
        return {}
    values: dict[str, float | None] = {
        "state_checks": parts.state_checks,
        "transcript_rules": parts.transcript_rules,
        "llm_judge": parts.llm_judge,
        "custom_checks": parts.custom_checks,
        "trace_checks": parts.trace_checks,
        "env_assertions": parts.env_assertions,
        "tau2_actions": parts.tau2_actions,
        "tau2_communicate": parts.tau2_communicate,
        "terminal_tests": parts.terminal_tests,
    }
    return {name: value if value is not None and value >= 0 else None for name, value in values.items()}


def describe_calls(replay: GoldenReplay) -> list[str]:
    """Every call the replay made, one line each, with the runner's answer to those that failed."""
    if replay.episode is None:
        return []
    return [
        f"{call.call_id} {call.executor} {call.name}({call.arguments_json}): {call.status}"
        + (f" [{call.error_category.lower()}]" if call.error_category else "")
        + (f" {call.error}" if call.error else "")
        for call in replay.episode.calls
    ]


async def check(ctx: TaskContext) -> list[str]:
    _, notes = judged_task(ctx.loaded.task)
    replay = await ctx.first_replay()
    calls = describe_calls(replay)
    if replay.grade is None:
        summary = f"the golden path was not graded: {replay.error or 'no grade'}"
        raise CheckFailure(summary, _details(summary, replay, calls, notes))
    grade = replay.grade
    scores = components(grade)
    judged = {name: value for name, value in scores.items() if value is not None}
    short = {name: value for name, value in judged.items() if abs(value - 1.0) > _TOLERANCE}
    if ctx.loaded.task.grading.combine_method == "any" and len(short) < len(judged):
        # Under "any" the components are alternatives: the golden path takes one of them.
        notes += [
            f"combine any: {name} scored {value:g} (an alternative the golden path does not take)"
            for name, value in short.items()
        ]
        short = {}
    unmet = unmet_trace_constraints(ctx.loaded.task, grade)
    if unmet:
        summary = f"golden path fails trace constraints: {'; '.join(unmet)}"
        raise CheckFailure(summary, _details(summary, replay, calls, notes))
    if short or not grade.binary_pass:
        parts = ", ".join(f"{name} {value:g}" for name, value in short.items()) or f"score {grade.score:g}"
        reasons = " | ".join(reason_messages(grade)) or "no reasons given"
        summary = f"golden path scored {parts} (binary_pass={grade.binary_pass}): {reasons}"
        raise CheckFailure(summary, _details(summary, replay, calls, notes))
    if not judged:
        notes.append("no grading component was evaluated")
    return notes


def _details(summary: str, replay: GoldenReplay, calls: list[str], notes: list[str]) -> str:
    lines = [summary, f"trial {replay.trial_id}"]
    grade = replay.grade
    if grade is not None:
        shown = ", ".join(
            f"{name} {'not evaluated' if value is None else f'{value:g}'}"
            for name, value in components(grade).items()
        )
        lines += [f"score {grade.score:g}, binary_pass {grade.binary_pass}; {shown}", "reasons:"]
        lines += [f"  {reason}" for reason in reason_messages(grade)] or ["  (none)"]
        lines += ["state diff:", *_state_diff(grade.state_diff_json)]
    if calls:
        lines += ["golden calls:", *(f"  {line}" for line in calls)]
    if notes:
        lines += ["notes:", *(f"  {note}" for note in notes)]
    return "\n".join(lines)


def _state_diff(raw: str) -> list[str]:
    if not raw.strip():
        return ["  (none: the states matched, or the hash was not compared)"]
    try:
        diff: Any = json.loads(raw)
    except ValueError:
        return [f"  {raw}"]
    if isinstance(diff, dict):
        lines = cast(dict[str, Any], diff).get("diff_lines")
        if isinstance(lines, list) and lines:
            return [f"  {line}" for line in cast(list[Any], lines)]
    return [f"  {line}" for line in json.dumps(diff, indent=2, sort_keys=True, default=str).splitlines()]
