"""The ``bash`` operation: a command line run in the trial's persistent shell, answered with its status.

The argument is the public tool's: ``command``, one string of shell. The answer is the structured
``{exit_code, stdout, stderr, truncated, shell_restarted}`` and a text rendering for the model. A
non-zero status is the command's answer, not a failed call; only a deadline (``timeout``) and
arguments that are not a command (``invalid_arguments``) are tool errors.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from typing import Any, cast

from tolokaforge.contracts.tool import (
    ExitStatus,
    InvokeRequest,
    InvokeResponse,
    InvokeResult,
    OperationSchema,
    RiskClass,
    ToolError,
    ToolErrorCategory,
    ToolKind,
)

from .shell import HEAD_BYTES, TAIL_BYTES, ShellOutcome, ShellStartError, TrialShells

__all__ = ["BASH", "invoke_bash"]

_DEFAULT_DEADLINE_S = 30.0
_MAX_COMMAND_CHARS = 100_000

BASH = OperationSchema(
    name="bash",
    description=(
        "Run a bash command in this task's workspace. The shell persists between calls: the working "
        "directory, exported variables and files stay. Returns the exit code, stdout and stderr."
    ),
    input_schema_json=json.dumps(
        {
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": _MAX_COMMAND_CHARS,
                    "description": "The bash command to execute",
                }
            },
            "required": ["command"],
            "additionalProperties": False,
        }
    ),
    output_schema_json=json.dumps(
        {
            "type": "object",
            "properties": {
                "exit_code": {"type": "integer"},
                "stdout": {"type": "string"},
                "stderr": {"type": "string"},
                "truncated": {
                    "type": "object",
                    "description": (
                        f"Whether the middle of the stream was cut (its first {HEAD_BYTES} and last "
                        f"{TAIL_BYTES} bytes are kept)."
                    ),
                    "properties": {"stdout": {"type": "boolean"}, "stderr": {"type": "boolean"}},
                    "required": ["stdout", "stderr"],
                },
                "shell_restarted": {
                    "type": "boolean",
                    "description": "The command ended the shell; the next call starts a fresh one.",
                },
            },
            "required": ["exit_code", "stdout", "stderr", "truncated", "shell_restarted"],
        }
    ),
    kind=ToolKind.RESOURCE,
    risk=RiskClass.DESTRUCTIVE,
    # A command may do anything; running it twice is never assumed safe.
    idempotent=False,
    # No default of its own: the budget is the tool server's timeout_s where the pack's loader sets one
    # (a terminal task's), else the runner's default tool timeout (30 s, the public tool's too).
    process_backed=True,
)


async def invoke_bash(shells: TrialShells, message: InvokeRequest) -> AsyncIterator[InvokeResponse]:
    context = message.call_context
    workspace = context.working_directory if context else ""
    if not workspace or not os.path.isdir(workspace):
        yield _error(ToolErrorCategory.PERMISSION_DENIED, "the call names no existing workspace")
        return
    command = _command(message.arguments_json)
    if not isinstance(command, tuple):
        yield _error(ToolErrorCategory.INVALID_ARGUMENTS, command)
        return
    deadline = _deadline(context.timeout_seconds if context else 0.0)
    trial = (context.trial_id if context else "") or workspace
    try:
        outcome = await shells.run(trial, workspace, command[0], deadline)
    except ShellStartError as error:
        yield _error(ToolErrorCategory.EXECUTION_FAILED, str(error))
        return
    if outcome.exit_code is None:
        yield InvokeResponse(exit_status=ExitStatus(code=128 + outcome.signal, signal=outcome.signal))
        yield _error(
            ToolErrorCategory.TIMEOUT,
            f"the command ran past its deadline of {deadline:g}s: it was killed with everything it "
            "started, and the next call starts a fresh shell (working directory and variables reset)",
            retryable=True,
            details={"deadline_seconds": deadline, **_streams(outcome)},
        )
        return
    yield InvokeResponse(exit_status=ExitStatus(code=outcome.exit_code, signal=outcome.signal))
    output = {"exit_code": outcome.exit_code, **_streams(outcome), "shell_restarted": outcome.shell_ended}
    yield InvokeResponse(result=InvokeResult(output_json=json.dumps(output), text=render(output)))


def render(output: dict[str, Any]) -> str:
    """What the model reads: stdout, then stderr and the status when there is something to say."""
    parts: list[str] = [output["stdout"]] if output["stdout"] else []
    if output["stderr"]:
        parts.append(f"[stderr]\n{output['stderr']}")
    if output["exit_code"] != 0:
        parts.append(f"[exit code: {output['exit_code']}]")
    cut = [name for name, was in output["truncated"].items() if was]
    if cut:
        parts.append(
            f"[output cut in the middle: {', '.join(cut)}; first {HEAD_BYTES} and last {TAIL_BYTES} bytes kept]"
        )
    if output["shell_restarted"]:
        parts.append("[the shell exited; the next command starts a fresh shell in the workspace]")
    if not parts:  # an empty text would make the kernel show the JSON instead
        parts.append("[no output]")
    return "".join(part if part.endswith("\n") else part + "\n" for part in parts).rstrip("\n")


def _streams(outcome: ShellOutcome) -> dict[str, Any]:
    return {
        "stdout": outcome.stdout.text(),
        "stderr": outcome.stderr.text(),
        "truncated": {"stdout": outcome.stdout.cut > 0, "stderr": outcome.stderr.cut > 0},
    }


def _command(text: str) -> tuple[str] | str:
    """The command, or what is wrong with the arguments."""
    try:
        value: object = json.loads(text or "{}")
    except json.JSONDecodeError as error:
        return f"arguments are not JSON: {error}"
    arguments = cast(dict[str, object], value) if isinstance(value, dict) else None
    if arguments is None or set(arguments) != {"command"}:
        return "the only argument is 'command', a string of bash"
    command = arguments["command"]
    if not isinstance(command, str) or not command.strip():
        return "'command' must be a non-empty string"
    if len(command) > _MAX_COMMAND_CHARS:
        return f"'command' is longer than {_MAX_COMMAND_CHARS} characters"
    if "\x00" in command:
        return "'command' contains a NUL character"
    try:
        command.encode("utf-8")
    except UnicodeEncodeError:
        return "'command' is not valid Unicode (a lone surrogate)"
    return (command,)


def _deadline(budget: float) -> float:
    # Stop a little before the kernel's budget, so the kernel hears our timeout instead of killing us.
    return budget - min(0.5, budget * 0.1) if budget > 0 else _DEFAULT_DEADLINE_S


def _error(
    category: ToolErrorCategory,
    message: str,
    *,
    retryable: bool = False,
    details: dict[str, Any] | None = None,
) -> InvokeResponse:
    return InvokeResponse(
        error=ToolError(
            category=category,
            message=message,
            retryable=retryable,
            details_json=json.dumps(details) if details else "",
        )
    )
