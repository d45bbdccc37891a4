"""The exec provider in process (grpclib.testing.ChannelFor): streaming, exit status, deadline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grpclib.testing import ChannelFor
from tolokaforge_provider_exec.service import ExecProvider

from tolokaforge.contracts.tool import (
    CallContext,
    InvokeRequest,
    InvokeResponse,
    OutputStream,
    ToolErrorCategory,
    ToolProviderServiceStub,
)


async def _run(workspace: Path, arguments: dict[str, Any], budget: float = 10.0) -> list[InvokeResponse]:
    async with ChannelFor([ExecProvider(1)]) as channel:
        request = InvokeRequest(
            operation="run",
            arguments_json=json.dumps(arguments),
            call_context=CallContext(working_directory=str(workspace), timeout_seconds=budget, attempt=1),
        )
        return [event async for event in ToolProviderServiceStub(channel).invoke(request)]


async def test_output_streams_then_exit_status_then_result(tmp_path: Path) -> None:
    events = await _run(tmp_path, {"command": ["sh", "-c", "echo one; pwd; echo two >&2"]})
    chunks = [e.output_chunk for e in events if e.output_chunk is not None]
    assert (
        b"".join(c.data for c in chunks if c.stream == OutputStream.STDOUT) == f"one\n{tmp_path}\n".encode()
    )
    assert [c.data for c in chunks if c.stream == OutputStream.STDERR] == [b"two\n"]
    assert events[-2].exit_status is not None and events[-2].exit_status.code == 0
    assert events[-1].result is not None
    assert json.loads(events[-1].result.output_json)["stderr"] == "two\n"


async def test_non_zero_exit_is_execution_failed_with_the_status(tmp_path: Path) -> None:
    events = await _run(tmp_path, {"command": ["sh", "-c", "exit 4"]})
    assert events[-2].exit_status is not None and events[-2].exit_status.code == 4
    error = events[-1].error
    assert error is not None and error.category == ToolErrorCategory.EXECUTION_FAILED
    assert json.loads(error.details_json)["exit_code"] == 4


async def test_the_deadline_kills_the_command_and_answers_timeout(tmp_path: Path) -> None:
    events = await _run(tmp_path, {"command": ["sleep", "30"]}, budget=0.6)
    assert events[-2].exit_status is not None and events[-2].exit_status.signal == 9
    assert events[-1].error is not None and events[-1].error.category == ToolErrorCategory.TIMEOUT


async def test_bad_arguments_are_invalid_arguments(tmp_path: Path) -> None:
    [event] = await _run(tmp_path, {"command": []})
    assert event.error is not None and event.error.category == ToolErrorCategory.INVALID_ARGUMENTS


async def _calculate(arguments: dict[str, Any]) -> InvokeResponse:
    async with ChannelFor([ExecProvider(1)]) as channel:
        request = InvokeRequest(operation="calculator", arguments_json=json.dumps(arguments))
        [event] = [event async for event in ToolProviderServiceStub(channel).invoke(request)]
        return event


async def test_the_calculator_computes_arithmetic_and_nothing_else() -> None:
    done = await _calculate({"expression": "(168 - 24.5) * 2 / 4 + 2**3 % 5"})
    assert done.result is not None
    assert json.loads(done.result.output_json)["result"] == (168 - 24.5) * 2 / 4 + 2**3 % 5
    for expression, why in (
        ("__import__('os').system('true')", "is not arithmetic on numbers"),
        ("1 / 0", "division by zero"),
        ("2 ** 100000", "exponents above 1000 are refused"),
        ("1 +", "not an expression"),
        ("True + 1", "is not arithmetic on numbers"),
    ):
        failed = await _calculate({"expression": expression})
        assert failed.error is not None and failed.error.category == ToolErrorCategory.EXECUTION_FAILED
        assert why in failed.error.message, expression
    wrong = await _calculate({"expr": "1"})
    assert wrong.error is not None and wrong.error.category == ToolErrorCategory.INVALID_ARGUMENTS
