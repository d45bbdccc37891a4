"""Trusted mode (``--isolation thread``): a python tool call runs on one of the runner's threads.

For people who run their own code and want in-process speed. The tool works on copy-on-write views
of the mirror, committed only when it returns inside its budget (with its text, or with an error
it reports itself, a ReportedError). What is fixed relative to a plain
thread pool: an overstaying call is abandoned and its slot handed to a fresh daemon thread (so others
never queue behind it, and the process can always exit); ``SystemExit``, ``KeyboardInterrupt`` and
other ``BaseException`` fail the call instead of the runner. What it cannot do: stop a tool that
spins or calls ``os._exit``, or keep it from the runner's memory -- that is what isolated mode is for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from tolokaforge.contracts.runner import ExecutionStatus
from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.sdk.tool_result import ReportedError

from ..errors import ToolFailure, checked_text
from ..state.cow import TableShapeError
from ..tools import Tool
from ..tools.python_tools import Finished
from ..trials.context import TrialContext
from ..workers.child import kept_traceback
from ..workers.threads import DaemonPool

__all__ = ["ThreadRunner", "classify_tool_exception"]

Commit = Callable[[TrialContext, list[dict[str, Any]]], Awaitable[None]]


class _Raised:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class ThreadRunner:
    def __init__(self, max_workers: int) -> None:
        self.pool = DaemonPool(max_workers)

    def shutdown(self) -> None:
        self.pool.shutdown()

    async def run(
        self, trial: TrialContext, tool: Tool, arguments: Mapping[str, Any], budget: float, commit: Commit
    ) -> Finished:
        data = trial.state.mirror.open_call()

        def work() -> tuple[str | ReportedError, list[dict[str, Any]]] | _Raised:
            try:
                output = tool.invoke(data, arguments)
                return output, data.changes()
            except BaseException as error:  # SystemExit & co. must not reach the event loop
                return _Raised(error)

        future, job = self.pool.submit(work)
        try:
            result = await asyncio.wait_for(asyncio.wrap_future(future), timeout=budget)
        except TimeoutError as error:
            self.pool.abandon(job)
            trial.state.mirror.close_call(data, finished=False)
            raise ToolFailure(
                ExecutionStatus.TIMEOUT,
                ToolErrorCategory.TIMEOUT,
                f"tool {tool.description.name!r} exceeded its budget of {budget:g}s; its changes were discarded",
                retryable=True,
                details={"budget_seconds": budget},
            ) from error
        except BaseException:
            self.pool.abandon(job)
            trial.state.mirror.close_call(data, finished=future.done())
            raise
        try:
            if isinstance(result, _Raised):
                if isinstance(result.error, TableShapeError):
                    raise ToolFailure(
                        ExecutionStatus.ERROR, ToolErrorCategory.EXECUTION_FAILED, str(result.error)
                    )
                raise classify_tool_exception(tool, result.error)
            output, changes = result
            # A reported error is an answer, not a failure: its changes are committed like a success's.
            reported = output.message if isinstance(output, ReportedError) else None
            text = output if isinstance(output, str) else ""
            # Before the commit: an output the wire cannot carry fails the call.
            checked_text(text if reported is None else reported)
            await commit(trial, changes)
            return Finished(text, changes, reported)
        finally:
            trial.state.mirror.close_call(data, finished=True)


def classify_tool_exception(tool: Tool, error: BaseException) -> ToolFailure:
    if isinstance(error, SystemExit):
        message = f"SystemExit: the tool called sys.exit({error.code!r})"
    else:
        message = f"{type(error).__name__}: {error}"
    if isinstance(error, FileNotFoundError):
        category = ToolErrorCategory.NOT_FOUND
    elif isinstance(error, PermissionError):
        category = ToolErrorCategory.PERMISSION_DENIED
    else:
        # A tool raising is the tool failing on its own terms: ordinary tool-result content.
        category = ToolErrorCategory.EXECUTION_FAILED
    return ToolFailure(
        ExecutionStatus.ERROR,
        category,
        message,
        details={
            "exception": type(error).__name__,
            "tool": tool.description.name,
            "traceback": kept_traceback(error),
        },
    )
