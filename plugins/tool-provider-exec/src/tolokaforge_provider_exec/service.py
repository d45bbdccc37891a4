"""The exec provider's ToolProviderService: ``run`` a command, streaming its output, under a deadline."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import AsyncIterator
from typing import Any, cast

from tolokaforge.contracts.tool import (
    ExitStatus,
    InvokeRequest,
    InvokeResponse,
    InvokeResult,
    OperationSchema,
    OutputChunk,
    OutputStream,
    RiskClass,
    ToolError,
    ToolErrorCategory,
    ToolKind,
)
from tolokaforge.core.providers import ProviderBase

from .calculator import CALCULATOR, CalculatorError, evaluate

__all__ = ["ExecProvider"]

_KEEP_BYTES = 64 * 1024
_DEFAULT_DEADLINE_S = 30.0

RUN = OperationSchema(
    name="run",
    description="Run a command (an argv list, no shell) in the workspace and return its exit code and output.",
    input_schema_json=json.dumps(
        {
            "type": "object",
            "properties": {
                "command": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "timeout_seconds": {"type": "number", "exclusiveMinimum": 0},
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
            },
            "required": ["exit_code", "stdout", "stderr"],
        }
    ),
    kind=ToolKind.RESOURCE,
    risk=RiskClass.DESTRUCTIVE,
    # A command may do anything; running it twice is never assumed safe.
    idempotent=False,
    default_timeout_seconds=_DEFAULT_DEADLINE_S,
    streaming=True,
    process_backed=True,
)


class ExecProvider(ProviderBase):
    name = "exec"
    version = "0.1.0"
    description = "Run commands in the trial's workspace, with a deadline."
    operations = (RUN, CALCULATOR)

    async def invoke(self, message: InvokeRequest) -> AsyncIterator[InvokeResponse]:
        if message.operation == CALCULATOR.name:
            yield _calculate(message.arguments_json)
            return
        if message.operation != "run":
            yield _error(ToolErrorCategory.NOT_FOUND, f"no operation {message.operation!r}")
            return
        context = message.call_context
        workspace = context.working_directory if context else ""
        if not workspace or not os.path.isdir(workspace):
            yield _error(ToolErrorCategory.PERMISSION_DENIED, "the call names no existing workspace")
            return
        parsed = _arguments(message.arguments_json)
        if isinstance(parsed, str):
            yield _error(ToolErrorCategory.INVALID_ARGUMENTS, parsed)
            return
        argv, requested = parsed
        deadline = _deadline(requested, context.timeout_seconds if context else 0.0)
        async for event in _run(argv, workspace, deadline):
            yield event


def _calculate(text: str) -> InvokeResponse:
    try:
        value: object = json.loads(text or "{}")
    except json.JSONDecodeError as error:
        return _error(ToolErrorCategory.INVALID_ARGUMENTS, f"arguments are not JSON: {error}")
    arguments = cast(dict[str, object], value) if isinstance(value, dict) else {}
    expression = arguments.get("expression")
    if not isinstance(expression, str) or set(arguments) != {"expression"}:
        return _error(ToolErrorCategory.INVALID_ARGUMENTS, "the only argument is 'expression', a string")
    try:
        result = evaluate(expression)
    except CalculatorError as error:
        return _error(ToolErrorCategory.EXECUTION_FAILED, str(error))
    output = json.dumps({"expression": expression, "result": result})
    return InvokeResponse(result=InvokeResult(output_json=output))


def _arguments(text: str) -> tuple[list[str], float | None] | str:
    """The argv and the requested deadline, or what is wrong with the arguments."""
    try:
        value: Any = json.loads(text or "{}")
    except json.JSONDecodeError as error:
        return f"arguments are not JSON: {error}"
    if not isinstance(value, dict):
        return "arguments must be a JSON object"
    arguments = cast(dict[str, Any], value)
    command: Any = arguments.get("command")
    if not isinstance(command, list) or not command or not all(isinstance(part, str) for part in command):  # pyright: ignore[reportUnknownVariableType]
        return "'command' must be a non-empty list of strings"
    timeout: Any = arguments.get("timeout_seconds")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
    ):
        return "'timeout_seconds' must be a positive number"
    return [str(part) for part in command], (float(timeout) if timeout is not None else None)  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]


def _deadline(requested: float | None, budget: float) -> float:
    # Stop a little before the kernel's budget, so the kernel hears our timeout instead of killing us.
    ceiling = budget - min(0.5, budget * 0.1) if budget > 0 else _DEFAULT_DEADLINE_S
    return min(requested, ceiling) if requested is not None else ceiling


async def _run(argv: list[str], workspace: str, deadline: float) -> AsyncIterator[InvokeResponse]:
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=workspace,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            # Its own group: a deadline kills the command and whatever it started.
            start_new_session=True,
        )
    except FileNotFoundError:
        yield _error(ToolErrorCategory.NOT_FOUND, f"command {argv[0]!r} not found")
        return
    except PermissionError:
        yield _error(ToolErrorCategory.PERMISSION_DENIED, f"command {argv[0]!r} is not executable")
        return
    queue: asyncio.Queue[tuple[OutputStream, bytes] | None] = asyncio.Queue()
    kept = {OutputStream.STDOUT: bytearray(), OutputStream.STDERR: bytearray()}
    assert process.stdout is not None and process.stderr is not None
    readers = [
        asyncio.create_task(_pump(process.stdout, OutputStream.STDOUT, queue)),
        asyncio.create_task(_pump(process.stderr, OutputStream.STDERR, queue)),
    ]
    open_streams = len(readers)
    timed_out = False
    loop = asyncio.get_running_loop()
    ends_at = loop.time() + deadline
    try:
        # No yield inside a timeout scope: the scope would cancel whoever is awaiting the stream.
        while open_streams:
            try:
                item = await asyncio.wait_for(queue.get(), max(ends_at - loop.time(), 0.0))
            except TimeoutError:
                timed_out = True
                break
            if item is None:
                open_streams -= 1
                continue
            stream, data = item
            if len(kept[stream]) < _KEEP_BYTES:
                kept[stream].extend(data[: _KEEP_BYTES - len(kept[stream])])
            yield InvokeResponse(output_chunk=OutputChunk(stream=stream, data=data))
        if not timed_out:
            try:
                await asyncio.wait_for(process.wait(), max(ends_at - loop.time(), 0.0))
            except TimeoutError:
                timed_out = True
    finally:
        # Also reached when the kernel abandons the stream: the command never outlives its call.
        _kill_group(process)
        for reader in readers:
            reader.cancel()
        await process.wait()
    code = process.returncode if process.returncode is not None else -1
    # asyncio reports death by signal N as -N; the contract carries the signal on its own.
    signal_number = -code if code < 0 else 0
    yield InvokeResponse(exit_status=ExitStatus(code=code, signal=signal_number))
    stdout = kept[OutputStream.STDOUT].decode("utf-8", errors="replace")
    stderr = kept[OutputStream.STDERR].decode("utf-8", errors="replace")
    if timed_out:
        yield _error(
            ToolErrorCategory.TIMEOUT,
            f"the command ran past its deadline of {deadline:g}s and was killed",
            retryable=True,
        )
    elif code != 0:
        yield _error(
            ToolErrorCategory.EXECUTION_FAILED,
            f"the command exited with status {code}",
            details={"exit_code": code, "stdout": stdout[-4096:], "stderr": stderr[-4096:]},
        )
    else:
        yield InvokeResponse(
            result=InvokeResult(output_json=json.dumps({"exit_code": 0, "stdout": stdout, "stderr": stderr}))
        )


async def _pump(
    stream: asyncio.StreamReader, which: OutputStream, queue: asyncio.Queue[tuple[OutputStream, bytes] | None]
) -> None:
    try:
        while data := await stream.read(65536):
            await queue.put((which, data))
    finally:
        queue.put_nowait(None)


def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


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
