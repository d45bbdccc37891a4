"""``taxonomy``: the runner answers each tool's misuse with the status and error category of the protocol.

In one trial of the task, per registered tool: arguments its schema rejects -> INVALID_ARGUMENTS with
category ``invalid_arguments`` (invalid_args.py derives them; a tool whose schema admits no invalid
input, or that declares ``validate_arguments: false``, is named in a note); called by the other actor -> TOOL_NOT_FOUND (executor routing). Once per
task: an unknown tool name, for either actor -> TOOL_NOT_FOUND; arguments that are not JSON ->
INVALID_ARGUMENTS. Every failure must carry a category and a message, and ``unknown`` only with details.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field

from tolokaforge.contracts.runner import (
    ExecuteToolRequest,
    ExecuteToolResponse,
    ExecutionStatus,
    ToolSchema,
)
from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.core.runner_api import RunnerError
from tolokaforge.host import HostError, build_trial_spec

from ..errors import CheckFailure
from ..invalid_args import invalid_arguments
from ..replay import RUN_ID
from ..session import RunnerConnection
from .context import TaskContext

__all__ = ["UNKNOWN_TOOL", "check"]

UNKNOWN_TOOL = "tolokaforge_no_such_tool"


@dataclass
class _Probe:
    connection: RunnerConnection
    trial_id: str
    violations: list[str] = field(default_factory=list[str])
    calls: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    async def expect(
        self,
        what: str,
        tool: str,
        arguments_json: str,
        executor: str,
        status: ExecutionStatus,
        category: ToolErrorCategory | None = None,
    ) -> None:
        request = ExecuteToolRequest(
            trial_id=self.trial_id,
            tool_name=tool,
            arguments_json=arguments_json,
            executor=executor,
            call_id=f"taxonomy-{next(self.calls)}",
        )
        response = await self.connection.stub.execute_tool(request, timeout=60)
        if response.status != status:
            answer = f"{response.status.name}" + (
                f" ({response.error_message})" if response.error_message else ""
            )
            self.violations.append(f"{what}: expected {status.name}, got {answer}")
            return
        error = response.tool_error
        if category is not None and (error is None or error.category != category):
            got = error.category.name.lower() if error is not None else "no tool_error"
            self.violations.append(
                f"{what}: {status.name} with category {got}, expected {category.name.lower()}"
            )
        self.violations += _category_problems(what, response)


def _category_problems(what: str, response: ExecuteToolResponse) -> list[str]:
    if response.status == ExecutionStatus.SUCCESS:
        return []
    error = response.tool_error
    problems: list[str] = []
    if error is None or error.category == ToolErrorCategory.UNSPECIFIED:
        problems.append(f"{what}: {response.status.name} carries no error category")
    elif error.category == ToolErrorCategory.UNKNOWN and not error.details_json:
        problems.append(f"{what}: category unknown without details")
    if not response.error_message:
        problems.append(f"{what}: {response.status.name} without an error message")
    return problems


async def check(ctx: TaskContext) -> list[str]:
    connection = await ctx.session.connection()
    spec = build_trial_spec(ctx.loaded.task, run_id=RUN_ID, trial_index=ctx.session.next_trial_index())
    try:
        registered = await connection.client.register(spec)
    except (HostError, RunnerError) as error:
        raise CheckFailure(f"the runner refused to register the task: {error}") from error
    probe = _Probe(connection, spec.trial_id)
    notes: list[str] = []
    try:
        sides: dict[str, tuple[ToolSchema, ...]] = {
            "agent": registered.agent_tools,
            "user": registered.user_tools,
        }
        task = ctx.loaded.task
        unchecked = {
            (side, tool.name)
            for side, described in (("agent", task.agent_tools), ("user", task.user_tools))
            for tool in described
            if not tool.validate_arguments
        }
        for side, tools in sides.items():
            other = "user" if side == "agent" else "agent"
            other_names = {tool.name for tool in sides[other]}
            for tool in tools:
                derived = invalid_arguments(json.loads(tool.parameters_json or "{}"))
                if (side, tool.name) in unchecked:
                    notes.append(
                        f"{side} tool {tool.name!r} declares validate_arguments: false (it answers "
                        "schema-invalid input itself), so INVALID_ARGUMENTS was not expected of it"
                    )
                elif derived is None:
                    notes.append(
                        f"{side} tool {tool.name!r}: no schema-invalid input can be derived from its "
                        "schema, so INVALID_ARGUMENTS was not exercised for it"
                    )
                else:
                    arguments, how = derived
                    await probe.expect(
                        f"{side} tool {tool.name!r} with {how} {json.dumps(arguments)}",
                        tool.name,
                        json.dumps(arguments),
                        side,
                        ExecutionStatus.INVALID_ARGUMENTS,
                        ToolErrorCategory.INVALID_ARGUMENTS,
                    )
                if tool.name not in other_names:
                    await probe.expect(
                        f"{side} tool {tool.name!r} called with executor {other!r}",
                        tool.name,
                        "{}",
                        other,
                        ExecutionStatus.TOOL_NOT_FOUND,
                    )
        for executor in ("agent", "user"):
            await probe.expect(
                f"unknown tool {UNKNOWN_TOOL!r} called with executor {executor!r}",
                UNKNOWN_TOOL,
                "{}",
                executor,
                ExecutionStatus.TOOL_NOT_FOUND,
            )
        if registered.agent_tools:
            first = registered.agent_tools[0].name
            await probe.expect(
                f"agent tool {first!r} with arguments that are not JSON",
                first,
                "{not json",
                "agent",
                ExecutionStatus.INVALID_ARGUMENTS,
                ToolErrorCategory.INVALID_ARGUMENTS,
            )
    finally:
        await connection.client.release(spec.trial_id)
    if probe.violations:
        count = len(probe.violations)
        raise CheckFailure(
            f"{count} error-taxonomy violation(s): {probe.violations[0]}",
            "\n".join([f"{count} error-taxonomy violation(s) in trial {spec.trial_id}:", *probe.violations]),
        )
    return notes
