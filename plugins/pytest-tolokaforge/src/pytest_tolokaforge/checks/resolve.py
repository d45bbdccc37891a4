"""``resolve``: every golden action resolves to a tool the runner registers for the agent.

A user-side golden action (``executor: user``) is left to the runner's own resolution and noted.

The rule is the protocol's (docs/grading.md#step-4-resolve-golden-action-names): the exact name, or the single registered name ending in
``_<name>``. A resolved action's arguments must also satisfy that tool's schema, or the replay would be
refused INVALID_ARGUMENTS and grade against a state nobody meant.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from ..errors import CheckFailure
from .context import TaskContext

__all__ = ["check", "resolve_name"]


def resolve_name(name: str, registered: Sequence[str]) -> tuple[str | None, list[str]]:
    """(the resolved name or None, the candidates that matched)."""
    if name in registered:
        return name, [name]
    suffixed = [candidate for candidate in registered if candidate.endswith(f"_{name}")]
    return (suffixed[0] if len(suffixed) == 1 else None), suffixed


async def check(ctx: TaskContext) -> list[str]:
    state_checks = ctx.loaded.task.grading.state_checks
    actions = state_checks.golden_actions if state_checks is not None else []
    if not actions:
        return ["the task has no golden actions"]
    tools = await ctx.agent_tools()
    names = [tool.name for tool in tools]
    schemas = {tool.name: tool.parameters_json for tool in tools}
    problems: list[str] = []
    notes: list[str] = []
    for index, action in enumerate(actions):
        where = f"golden_actions[{index}] {action.tool_name!r}"
        if action.executor != "agent":
            notes.append(f"{where} is a {action.executor}-side step: the runner resolves it when grading")
            continue
        resolved, candidates = resolve_name(action.tool_name, names)
        if resolved is None:
            problems.append(
                f"{where} matches several registered tools ({', '.join(candidates)})"
                if candidates
                else f"{where} resolves to no registered agent tool"
            )
            continue
        problems += _argument_problems(where, resolved, schemas[resolved], action.arguments)
    if problems:
        registered = f"registered agent tools: {', '.join(names) or 'none'}"
        raise CheckFailure(
            problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
            "\n".join([*problems, registered]),
        )
    return notes


def _argument_problems(where: str, tool: str, parameters_json: str, arguments: dict[str, Any]) -> list[str]:
    try:
        validator = Draft202012Validator(cast(dict[str, Any], json.loads(parameters_json or "{}")))
        errors = list(validator.iter_errors(arguments))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType, reportUnknownVariableType]
    except (ValueError, SchemaError):
        return []  # an unreadable schema is the load check's finding
    return [
        f"{where} -> {tool}: argument {'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        for e in errors  # pyright: ignore[reportUnknownVariableType]
    ]
