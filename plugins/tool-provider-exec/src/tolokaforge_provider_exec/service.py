"""The exec provider's ToolProviderService: ``run`` a command, streaming its output, under a deadline."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
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
from tolokaforge.sdk.providers import ProviderBase

from .bash import BASH, invoke_bash
from .calculator import CALCULATOR, CalculatorError, evaluate
from .shell import TrialShells

__all__ = ["MAX_OUTPUT_BYTES", "ExecProvider"]

MAX_OUTPUT_BYTES = 1024 * 1024
"""Output kept (and streamed) per stream, stdout and stderr each; past it the result says ``truncated``."""
_DEFAULT_DEADLINE_S = 30.0
_EXIT_DRAIN_S = 0.5
"""How long output is still read after the command exited, from whatever it left holding its pipes."""
_EXIT_POLL_S = 0.05

RUN = OperationSchema(
    name="run",
    description="Run a command (an argv list, no shell) in the workspace and return its exit code and output.",
    input_schema_json=json.dumps(
        {
            "type": "object",
            "properties": {
                "command": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "timeout_seconds": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "description": "Stop the command after this many seconds (never later than the call's budget).",
                },
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
                    "description": f"Whether the stream was cut at its first {MAX_OUTPUT_BYTES} bytes.",
                    "properties": {"stdout": {"type": "boolean"}, "stderr": {"type": "boolean"}},
                    "required": ["stdout", "stderr"],
                },
            },
            "required": ["exit_code", "stdout", "stderr", "truncated"],
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
    operations = (RUN, BASH, CALCULATOR)

    def __init__(self, protocol_version: int) -> None:
        super().__init__(protocol_version)
        self.shells = TrialShells()
        """The ``bash`` operation's persistent shells, one per trial; released when the provider stops."""

    async def invoke(self, message: InvokeRequest) -> AsyncIterator[InvokeResponse]:
        if message.operation == CALCULATOR.name:
            yield _calculate(message.arguments_json)
            return
        if message.operation == BASH.name:
            async for event in invoke_bash(self.shells, message):
                yield event
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


@dataclass
class _Capture:
    """One stream's output: the first :data:`MAX_OUTPUT_BYTES` kept, the rest counted and dropped."""

    kept: bytearray = field(default_factory=bytearray)
    dropped: int = 0

    def take(self, data: bytes) -> bytes:
        """The part of ``data`` kept (and streamed); the rest only counts."""
        part = data[: MAX_OUTPUT_BYTES - len(self.kept)]
        self.kept += part
        self.dropped += len(data) - len(part)
        return part

    def text(self) -> str:
        return self.kept.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class _Closed:
    stream: OutputStream


@dataclass(frozen=True)
class _Exited:
    pass


_Event = tuple[OutputStream, bytes] | _Closed | _Exited


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
    except OSError as error:  # e.g. ENOEXEC: not a program the kernel can run
        yield _error(ToolErrorCategory.EXECUTION_FAILED, f"command {argv[0]!r} cannot run: {error.strerror}")
        return
    except ValueError as error:  # a NUL byte in the argv
        yield _error(ToolErrorCategory.INVALID_ARGUMENTS, f"the command cannot be run: {error}")
        return
    queue: asyncio.Queue[_Event] = asyncio.Queue()
    captured = {OutputStream.STDOUT: _Capture(), OutputStream.STDERR: _Capture()}
    assert process.stdout is not None and process.stderr is not None
    tasks = [
        asyncio.create_task(_pump(process.stdout, OutputStream.STDOUT, queue)),
        asyncio.create_task(_pump(process.stderr, OutputStream.STDERR, queue)),
        asyncio.create_task(_watch(process, queue)),
    ]
    open_streams = 2
    timed_out = False
    loop = asyncio.get_running_loop()
    ends_at = loop.time() + deadline
    drain_until: float | None = None
    try:
        # No yield inside a timeout scope: the scope would cancel whoever is awaiting the stream.
        while open_streams:
            limit = ends_at if drain_until is None else min(ends_at, drain_until)
            try:
                item = await asyncio.wait_for(queue.get(), max(limit - loop.time(), 0.0))
            except TimeoutError:
                # Past the drain of an exited command, its pipes are held by something it left running:
                # the command is done (and that leftover is killed below). Otherwise: the deadline.
                timed_out = process.returncode is None
                break
            if isinstance(item, _Closed):
                open_streams -= 1
            elif isinstance(item, _Exited):
                drain_until = loop.time() + _EXIT_DRAIN_S
            else:
                stream, data = item
                kept = captured[stream].take(data)
                if kept:
                    yield InvokeResponse(output_chunk=OutputChunk(stream=stream, data=kept))
        if not timed_out and process.returncode is None:
            try:
                await asyncio.wait_for(process.wait(), max(ends_at - loop.time(), 0.0))
            except TimeoutError:
                timed_out = True
    finally:
        # Also reached when the kernel abandons the stream: the command never outlives its call.
        _kill_group(process)
        for task in tasks:
            task.cancel()
        await process.wait()
    code = process.returncode if process.returncode is not None else -1
    # asyncio reports death by signal N as -N; the contract carries the signal on its own.
    signal_number = -code if code < 0 else 0
    yield InvokeResponse(exit_status=ExitStatus(code=code, signal=signal_number))
    output: dict[str, Any] = {
        "stdout": captured[OutputStream.STDOUT].text(),
        "stderr": captured[OutputStream.STDERR].text(),
        "truncated": {
            "stdout": captured[OutputStream.STDOUT].dropped > 0,
            "stderr": captured[OutputStream.STDERR].dropped > 0,
        },
    }
    # The output travels once, in the terminal event (the chunks were its live view).
    if timed_out:
        yield _error(
            ToolErrorCategory.TIMEOUT,
            f"the command ran past its deadline of {deadline:g}s and was killed",
            retryable=True,
            details={"deadline_seconds": deadline, **output},
        )
    elif code != 0:
        yield _error(
            ToolErrorCategory.EXECUTION_FAILED,
            f"the command exited with status {code}",
            details={"exit_code": code, **output},
        )
    else:
        yield InvokeResponse(result=InvokeResult(output_json=json.dumps({"exit_code": 0, **output})))


async def _pump(stream: asyncio.StreamReader, which: OutputStream, queue: asyncio.Queue[_Event]) -> None:
    try:
        while data := await stream.read(65536):
            await queue.put((which, data))
    finally:
        queue.put_nowait(_Closed(which))


async def _watch(process: asyncio.subprocess.Process, queue: asyncio.Queue[_Event]) -> None:
    # Not process.wait(): it also waits for the pipes to close, which a leftover child may hold open
    # until the deadline. The return code is set as soon as the command itself is reaped.
    while process.returncode is None:
        await asyncio.sleep(_EXIT_POLL_S)
    queue.put_nowait(_Exited())


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
