"""The exec provider in process (grpclib.testing.ChannelFor): streaming, exit status, deadline."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from grpclib.testing import ChannelFor
from tolokaforge_provider_exec.service import MAX_OUTPUT_BYTES, ExecProvider

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


async def test_the_deadline_comes_from_the_calls_budget(tmp_path: Path) -> None:
    # A command longer than any fixed deadline finishes under a budget that covers it.
    done = await _run(tmp_path, {"command": ["sh", "-c", "sleep 1.5; echo late"]}, budget=4.0)
    assert done[-1].result is not None, done[-1]
    assert json.loads(done[-1].result.output_json)["stdout"] == "late\n"
    # A longer request is held under the budget: it stops a little before it, answering timeout.
    started = time.monotonic()
    events = await _run(tmp_path, {"command": ["sleep", "30"], "timeout_seconds": 100}, budget=1.0)
    elapsed = time.monotonic() - started
    error = events[-1].error
    assert error is not None and error.category == ToolErrorCategory.TIMEOUT and error.retryable
    assert "deadline of 0.9s" in error.message and elapsed < 1.0, (error.message, elapsed)


async def test_the_deadline_kills_the_whole_process_group(tmp_path: Path) -> None:
    script = "sleep 30 & echo $! > child.pid; sleep 30"
    events = await _run(tmp_path, {"command": ["sh", "-c", script]}, budget=0.8)
    assert events[-1].error is not None and events[-1].error.category == ToolErrorCategory.TIMEOUT
    child = int((tmp_path / "child.pid").read_text())
    assert not _alive(child), "the command's background child outlived the deadline"


async def test_a_command_that_exits_is_done_even_if_a_child_holds_its_output(tmp_path: Path) -> None:
    started = time.monotonic()
    events = await _run(tmp_path, {"command": ["sh", "-c", "sleep 30 & echo $! > child.pid; echo bye"]})
    assert events[-1].result is not None, events[-1]
    assert json.loads(events[-1].result.output_json)["stdout"] == "bye\n"
    assert time.monotonic() - started < 5
    assert not _alive(int((tmp_path / "child.pid").read_text()))


async def test_output_is_capped_per_stream_and_marked_truncated(tmp_path: Path) -> None:
    script = f"head -c {3 * MAX_OUTPUT_BYTES} /dev/zero | tr '\\0' a; echo small >&2"
    events = await _run(tmp_path, {"command": ["sh", "-c", script]})
    result = events[-1].result
    assert result is not None
    output = json.loads(result.output_json)
    assert output["stdout"] == "a" * MAX_OUTPUT_BYTES and output["stderr"] == "small\n"
    assert output["truncated"] == {"stdout": True, "stderr": False}
    streamed = sum(len(e.output_chunk.data) for e in events if e.output_chunk is not None)
    assert streamed == MAX_OUTPUT_BYTES + len("small\n")


async def test_failures_carry_the_output_in_their_details(tmp_path: Path) -> None:
    failed = await _run(tmp_path, {"command": ["sh", "-c", "echo out; echo err >&2; exit 2"]})
    assert failed[-1].error is not None
    assert json.loads(failed[-1].error.details_json) == {
        "exit_code": 2,
        "stdout": "out\n",
        "stderr": "err\n",
        "truncated": {"stdout": False, "stderr": False},
    }
    slow = await _run(tmp_path, {"command": ["sh", "-c", "echo before; sleep 30"]}, budget=0.8)
    assert slow[-1].error is not None and slow[-1].error.category == ToolErrorCategory.TIMEOUT
    assert json.loads(slow[-1].error.details_json)["stdout"] == "before\n"


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs 2 s on (a SIGKILL takes a moment to land; a zombie does not run)."""
    until = time.monotonic() + 2.0
    while time.monotonic() < until:
        try:
            with open(f"/proc/{pid}/stat") as file:
                if file.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return False
        except FileNotFoundError:
            return False
        time.sleep(0.02)
    return True


async def test_bad_arguments_are_invalid_arguments(tmp_path: Path) -> None:
    for command in ([], ["echo", "a\0b"]):
        [event] = await _run(tmp_path, {"command": command})
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
