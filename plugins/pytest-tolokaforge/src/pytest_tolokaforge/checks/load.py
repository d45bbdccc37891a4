"""``load``: the task loads and validates, its tool schemas are JSON Schema, its tool names unique.

Problems the pack loader found arrive here as the task's own problems (collection.py); this check
covers a task the loader accepted: what the runner would refuse at RegisterTrial, found without one.
"""

from __future__ import annotations

from collections import Counter

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import ValidationError

from tolokaforge.core.models import TrialSpec, describe_validation_error
from tolokaforge.host import build_trial_spec, register_request

from ..errors import CheckFailure
from ..replay import RUN_ID
from .context import TaskContext

__all__ = ["check"]


async def check(ctx: TaskContext) -> list[str]:
    task = ctx.loaded.task
    problems: list[str] = []
    for side, tools in (("agent", task.agent_tools), ("user", task.user_tools)):
        for name, count in Counter(tool.name for tool in tools).items():
            if count > 1:
                problems.append(f"{side} tool name {name!r} is used by {count} tools")
        for tool in tools:
            try:
                Draft202012Validator.check_schema(tool.parameters)
            except SchemaError as error:
                at = "/".join(str(part) for part in error.absolute_path) or "(root)"
                problems.append(
                    f"{side} tool {tool.name!r}: parameters are not a valid JSON Schema: "
                    f"{error.message} (at {at})"
                )
                continue
            if tool.parameters.get("type", "object") != "object":
                problems.append(
                    f"{side} tool {tool.name!r}: parameters must describe an object, "
                    f"not {tool.parameters.get('type')!r}"
                )
    # What the runner parses at RegisterTrial: the TrialSpec as the host serialises it.
    spec = build_trial_spec(task, run_id=RUN_ID, trial_index=0)
    try:
        TrialSpec.model_validate_json(register_request(spec).trial_spec_json)
    except ValidationError as error:
        problems.append(f"the TrialSpec does not round-trip: {describe_validation_error(error)}")
    if problems:
        summary = problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
        where = f"task {task.task_id} ({ctx.loaded.task_file}):"
        raise CheckFailure(summary, "\n".join([summary, where, *(f"  {p}" for p in problems)]))
    return []
