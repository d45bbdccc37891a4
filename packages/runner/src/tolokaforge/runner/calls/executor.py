"""Run one tool call: validate, budget, execute off the event loop, commit, classify, record.

A python tool runs in the trial's worker process (isolated.py, the default) or, in trusted
mode, on one of the runner's threads (trusted.py); either way its changes are committed only
when it finishes inside its budget, as one atomic batch. Every call is banded: the budget is the
request's, else the tool's declared one, else the trial default, never more than
:data:`MAX_BUDGET_S` (non-finite values included). A remote tool (MCP server, tool provider) runs in its source's child process under the
kernel's reactions (reactions.py). The same rule holds for it: after a call that succeeded, a
syncing server's tables are committed, or the mirror is reloaded when the server moved the store's
version; after every attempt that failed, timed out or crashed, the store (and a syncing server) is
put back to the state before the call (:func:`~.undo.restore`). Every outcome is one of the
ExecutionStatus values with a classified ToolError, and the record says how many attempts it took.

A python tool may answer an error itself (it returns a ReportedError): that call's changes are
committed as a success's, and it answers ERROR / execution_failed with the tool's message, marked
``reported`` so the host shows exactly ``"Error: " + message``. A tool whose description says
``validate_arguments: false`` gets any JSON object unchecked. A hidden tool is found only by the
runner's own callers: a call ``offered_only`` (ExecuteTool from the host) does not see it.

The ``browser`` tool (web tasks) is served by the runner itself (browser_calls.py): its site
requests run the task's hidden site tool the python way, each committed as it returns; a browser
call past its budget has those changes undone as a remote tool's are.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from tolokaforge.contracts.runner import ExecutionStatus
from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.core.runner_api import Attachment
from tolokaforge.core.transcript.recorded import RecordedToolCall
from tolokaforge.db import DBServiceError, StoreUnreachableError, VersionConflictError

from ..errors import ToolFailure, checked_text
from ..process.confinement import Confinement
from ..process.sandbox import LIMIT_NAMES, Limits
from ..state.mirror import SetAside
from ..tools import Tool
from ..tools.python_tools import Finished, WorkerTool
from ..tools.reactions import KeyedLocks, RemoteOutcome, run_remote
from ..tools.remote import CallInfo, RemoteTool, ToolSourceSession
from ..tools.state_sync import StateSyncing, changes_to
from ..trials.context import TrialContext
from .browser_calls import BrowserAnswer, BrowserCalls, BrowserTool
from .isolated import IsolatedRunner
from .trusted import ThreadRunner
from .undo import RollbackFailed, infrastructure_failure, restore

__all__ = ["MAX_BUDGET_S", "CallOutcome", "Isolation", "ToolExecutor"]

Isolation = Literal["sandbox", "process", "thread"]

MAX_BUDGET_S = 600.0
"""The ceiling of every call's budget: larger, non-finite or NaN budgets are clamped to it."""

_RECORDED_STATUS = {
    ExecutionStatus.SUCCESS: "success",
    ExecutionStatus.ERROR: "error",
    ExecutionStatus.TIMEOUT: "timeout",
    ExecutionStatus.TOOL_NOT_FOUND: "tool_not_found",
    ExecutionStatus.INVALID_ARGUMENTS: "invalid_arguments",
}


@dataclass(frozen=True)
class CallOutcome:
    """What ExecuteTool answers: the output on success, or the classified failure."""

    status: ExecutionStatus
    output: str
    failure: ToolFailure | None
    latency_seconds: float
    state_mutations: int
    attempts: int = 1
    category: str | None = None
    """The recorded category: the failure's, or a non-failure's such as cancelled."""
    exit_code: int | None = None
    """A process-backed operation's exit code."""
    reported: bool = False
    """The failure is the tool's own error answer (a ReportedError): the call's changes were committed."""
    attachments: tuple[Attachment, ...] = ()
    """Files the call produced beside its text (a browser call's screenshot)."""


class ToolExecutor:
    """Executes calls for every trial of one runner: python tools in workers (or threads), remote tools in their sources."""

    def __init__(
        self,
        max_workers: int = 64,
        *,
        isolation: Isolation = "process",
        limits: Limits | None = None,
        log_dir: Path | None = None,
        fork_server: bool = True,
        confinement: Confinement | None = None,
    ) -> None:
        self.isolation: Isolation = isolation
        self.confinement = confinement or Confinement.process()
        """How every child of this runner is confined (process/confinement.py)."""
        self.isolated = IsolatedRunner(
            limits or Limits(),
            log_dir or Path("logs"),
            fork_server=fork_server and isolation != "thread",
            confinement=self.confinement,
        )
        # Sized well above the core count: threads mostly wait (I/O, sleeps). Only trusted mode uses them.
        self.threads = ThreadRunner(max_workers) if isolation == "thread" else None
        self._conflict_locks = KeyedLocks()
        # Confined wherever tools are: a sandboxed runner never runs an unconfined browser.
        sandboxed = isolation == "sandbox" and self.confinement.sandboxed
        self.browser = BrowserCalls(
            self._run_site,
            confined=isolation == "sandbox",
            confinement=self.confinement if sandboxed else None,
            memory_bytes=(limits or Limits()).memory_bytes,
        )

    def shutdown(self) -> None:
        if self.threads is not None:
            self.threads.shutdown()

    async def close(self) -> None:
        """Stop the browser, the zygotes and the thread pool (runner shutdown, after every trial was released)."""
        await self.browser.close()
        await self.isolated.close()
        self.shutdown()
        self.confinement.close()

    async def prepare(self, trial: TrialContext) -> None:
        """Ready a newly registered trial's python tools (isolated mode: start its worker)."""
        await self.isolated.prepare(trial)

    async def release(self, trial: TrialContext) -> None:
        """Stop whatever runs a trial's tools: its browser page, its workers (CleanupTrial, runner shutdown)."""
        await self.browser.release(trial)
        await self.isolated.release(trial)

    async def health(self) -> tuple[bool, list[str]]:
        """(healthy, what holds): the isolation mode and, for workers, each limit as the kernel granted it;
        once a web task started it, what the browser is and how it is confined."""
        browser = [f"browser:{name}={value}" for name, value in sorted(self.browser.report().items())]
        if self.threads is not None:
            abandoned = self.threads.pool.abandoned
            adapters = ["isolation:thread"] + ([f"abandoned_tool_threads:{abandoned}"] if abandoned else [])
            return abandoned == 0, adapters + browser
        report = await self.isolated.report()
        # What the sandbox is made of here, then what a worker got: its limits, and (sandboxed) its
        # uid and Landlock domain as the worker itself found them.
        layers = {**self.confinement.report, **{k: v for k, v in report.items() if k not in LIMIT_NAMES}}
        return True, [f"isolation:{self.confinement.level}"] + [
            f"sandbox:{name}={value}" for name, value in sorted(layers.items())
        ] + [
            f"limit:{name}={value}" for name, value in sorted(report.items()) if name in LIMIT_NAMES
        ] + browser

    async def call(
        self,
        trial: TrialContext,
        *,
        call_id: str,
        tool_name: str,
        arguments_json: str,
        executor: str,
        timeout_seconds: float = 0.0,
        record: bool = True,
        offered_only: bool = False,
    ) -> CallOutcome:
        """Run and (unless ``record`` is False, as for initialization actions) record one call.

        ``offered_only`` (ExecuteTool from the host) finds only the tools offered to the caller: a
        hidden tool is then TOOL_NOT_FOUND, answered as for a name no tool has.
        """
        async with trial.lock:
            return await self.call_locked(
                trial,
                call_id=call_id,
                tool_name=tool_name,
                arguments_json=arguments_json,
                executor=executor,
                timeout_seconds=timeout_seconds,
                record=record,
                offered_only=offered_only,
            )

    async def call_locked(
        self,
        trial: TrialContext,
        *,
        call_id: str,
        tool_name: str,
        arguments_json: str,
        executor: str,
        timeout_seconds: float = 0.0,
        record: bool = True,
        offered_only: bool = False,
    ) -> CallOutcome:
        """:meth:`call` for a caller that already holds ``trial.lock`` (golden replay)."""
        started_at = time.time()
        started = time.perf_counter()
        arguments: dict[str, Any] = {}
        mutations = 0
        try:
            await _refresh(trial)
            tool = self._resolve(trial, tool_name, executor, offered_only=offered_only)
            arguments = self._parse_arguments(tool, arguments_json)
            budget = self._budget(trial, tool, timeout_seconds)
            if isinstance(tool, RemoteTool):
                outcome = await self._run_remote(trial, tool, arguments, call_id, budget, started)
            else:
                attachments: tuple[Attachment, ...] = ()
                if isinstance(tool, BrowserTool):
                    answer = await self._run_browser(trial, tool, arguments, budget, record=record)
                    output, reported, mutations = answer.output, answer.reported, answer.mutations
                    attachments = answer.attachments
                else:
                    finished = await self._run_python(trial, tool, arguments, budget)
                    output, reported = finished.output, finished.reported
                    mutations = sum(len(change["operations"]) for change in finished.changes)
                if reported is None:
                    outcome = CallOutcome(
                        ExecutionStatus.SUCCESS,
                        output,
                        None,
                        time.perf_counter() - started,
                        mutations,
                        attachments=attachments,
                    )
                else:  # the tool's own error answer: committed above like a success, answered as an error
                    outcome = CallOutcome(
                        ExecutionStatus.ERROR,
                        "",
                        ToolFailure(
                            ExecutionStatus.ERROR,
                            ToolErrorCategory.EXECUTION_FAILED,
                            reported,
                            details={"tool": tool.description.name},
                        ),
                        time.perf_counter() - started,
                        mutations,
                        reported=True,
                        attachments=attachments,
                    )
        except ToolFailure as failure:
            code = failure.details.get("exit_code")  # a worker that died: its exit code or -signal
            outcome = CallOutcome(
                failure.status,
                "",
                failure,
                time.perf_counter() - started,
                0,
                exit_code=code if isinstance(code, int) else None,
            )
        if record:
            trial.history.append(
                RecordedToolCall(
                    call_id=call_id,
                    sequence=trial.next_sequence(),
                    tool_name=tool_name,
                    # An INVALID_ARGUMENTS call is recorded with empty arguments (docs/protocol/runner.md#executetool-statuses).
                    arguments=arguments if outcome.status != ExecutionStatus.INVALID_ARGUMENTS else {},
                    executor="user" if executor == "user" else "agent",
                    status=_RECORDED_STATUS[outcome.status],  # pyright: ignore[reportArgumentType]
                    output=outcome.output,
                    latency_seconds=outcome.latency_seconds,
                    timestamp=started_at,
                    error_message=outcome.failure.message if outcome.failure else "",
                    error_category=outcome.category or _category_name(outcome.failure),
                    attempts=outcome.attempts,
                )
            )
        return outcome

    async def _run_python(
        self, trial: TrialContext, tool: Tool, arguments: Mapping[str, Any], budget: float
    ) -> Finished:
        """A python tool: in the trial's worker (isolated) or on a thread (trusted), its changes committed."""
        if isinstance(tool, WorkerTool):
            return await self.isolated.run(trial, tool, arguments, budget, self._commit_parsed)
        assert self.threads is not None, "an in-process tool outside trusted mode"
        return await self.threads.run(trial, tool, arguments, budget, self._commit)

    async def _run_site(self, trial: TrialContext, tool: Tool, arguments: Mapping[str, Any]) -> Finished:
        """One site request of a browser call: the site tool within its own budget and what is left of
        the call's (a request the page sent late must not hold the call past its end)."""
        left = trial.browser.ends_at - asyncio.get_running_loop().time()
        budget = min(self._budget(trial, tool, 0.0), max(left, 0.05))
        return await self._run_python(trial, tool, arguments, budget)

    async def _run_browser(
        self,
        trial: TrialContext,
        tool: BrowserTool,
        arguments: Mapping[str, Any],
        budget: float,
        *,
        record: bool,
    ) -> BrowserAnswer:
        # Shared from here on, so the site's commits copy what they touch and this stays as it is.
        before = SetAside(trial.state.mirror.share(), {}, trial.state.mirror.version, frozenset())
        try:
            return await self.browser.run(trial, tool, arguments, budget, record=record)
        except ToolFailure as failure:
            if failure.status == ExecutionStatus.TIMEOUT:  # undone as any timed-out call's changes are
                try:
                    await restore(trial, None, before)
                except DBServiceError as error:
                    trial.state.mirror.stale = True
                    raise infrastructure_failure(
                        error, "the timed-out call's changes could not be undone"
                    ) from error
            raise

    async def _run_remote(
        self,
        trial: TrialContext,
        tool: RemoteTool,
        arguments: Mapping[str, Any],
        call_id: str,
        budget: float,
        started: float,
    ) -> CallOutcome:
        workspace = str(trial.files.workspace) if trial.files.workspace is not None else ""
        call = CallInfo(trial.trial_id, call_id, workspace, budget, attempt=1)
        before = trial.state.mirror.set_aside()

        async def rollback() -> None:
            try:
                await restore(trial, tool.source, before)
            except DBServiceError as error:
                trial.state.mirror.stale = True
                raise RollbackFailed(
                    infrastructure_failure(error, "the failed call's changes could not be undone")
                ) from error

        try:
            result = await run_remote(
                tool,
                arguments,
                call,
                breaker=trial.tools.breaker(tool.source.identity),
                locks=self._conflict_locks,
                rollback=rollback,
            )
            if result.failure is None:
                try:
                    checked_text(result.output)
                    await self._keep(trial, tool.source)
                except ToolFailure as failure:  # a reply the runner cannot keep is undone like a failure
                    await rollback()
                    result = RemoteOutcome("", failure, result.attempts)
        except RollbackFailed as error:
            result = RemoteOutcome("", error.failure, 1)
        except BaseException:
            # Cancelled mid-call: the source may have written; the store is re-read before the next call.
            trial.state.mirror.stale = True
            raise
        latency = time.perf_counter() - started
        if result.failure is not None:
            failure = result.failure
            return CallOutcome(
                failure.status,
                "",
                failure,
                latency,
                0,
                attempts=result.attempts,
                category=_category_name(failure),
                exit_code=result.exit_code,
            )
        return CallOutcome(
            ExecutionStatus.SUCCESS,
            result.output,
            None,
            latency,
            0,
            attempts=result.attempts,
            category=result.category,
            exit_code=result.exit_code,
        )

    async def _keep(self, trial: TrialContext, source: ToolSourceSession) -> None:
        """After a successful call: commit a syncing server's tables, or follow the store it wrote."""
        if isinstance(source, StateSyncing) and source.syncs_state:
            tables = source.take_state()
            if tables is not None:
                await self._commit(trial, changes_to(trial.state.mirror.tables, tables))
        elif source.writes_state:
            await self._reload_if_moved(trial)

    @staticmethod
    async def _reload_if_moved(trial: TrialContext) -> None:
        try:
            version = (await trial.state.mirror.client.get_hashes(trial.trial_id)).version
            if version != trial.state.mirror.version:
                await trial.state.mirror.reload()
        except DBServiceError as error:
            trial.state.mirror.stale = True
            raise infrastructure_failure(
                error, "the tool's changes could not be read back from the store"
            ) from error

    @classmethod
    async def _commit_parsed(cls, trial: TrialContext, changes: list[dict[str, Any]]) -> None:
        """A worker's changes: parsed from its JSON reply, so JSON already (no round trip to prove it)."""
        await cls._commit(trial, changes, parsed_json=True)

    @staticmethod
    async def _commit(
        trial: TrialContext, changes: list[dict[str, Any]], *, parsed_json: bool = False
    ) -> None:
        try:
            await trial.state.mirror.commit(changes, parsed_json=parsed_json)
        except DBServiceError as error:
            # The tool ran, but whether its effect was persisted is the store's matter, not the tool's.
            # A lost reply leaves the mirror stale: re-read it now (or before the next call).
            with contextlib.suppress(DBServiceError):
                await trial.state.mirror.refresh()
            if isinstance(error, StoreUnreachableError | VersionConflictError) or trial.state.mirror.stale:
                raise infrastructure_failure(error, "the call's changes could not be stored") from error
            raise ToolFailure(
                ExecutionStatus.ERROR,
                ToolErrorCategory.UNKNOWN,
                f"the call's changes could not be stored: {error.message}",
                details={"store_error": error.to_body()},
            ) from error

    @staticmethod
    def _resolve(trial: TrialContext, tool_name: str, executor: str, *, offered_only: bool = False) -> Tool:
        registry = trial.tools.registry(executor)
        tool = registry.get(tool_name, offered_only=offered_only) if registry is not None else None
        if tool is None:
            # Offered only: a hidden tool is not named, hinted at or listed, as if it did not exist.
            other = trial.tools.registry("user" if executor == "agent" else "agent")
            found = other is not None and other.get(tool_name, offered_only=offered_only) is not None
            hint = f"; it is a {other.actor} tool" if other is not None and found else ""
            offered = ", ".join(registry.names(offered_only=offered_only)) if registry is not None else ""
            raise ToolFailure(
                ExecutionStatus.TOOL_NOT_FOUND,
                ToolErrorCategory.NOT_FOUND,
                f"tool {tool_name!r} is not registered for executor {executor!r}{hint} (registered: {offered or 'none'})",
            )
        return tool

    @staticmethod
    def _parse_arguments(tool: Tool, arguments_json: str) -> dict[str, Any]:
        try:
            arguments: Any = json.loads(arguments_json) if arguments_json.strip() else {}
        except (json.JSONDecodeError, RecursionError) as error:  # RecursionError: nested too deep
            raise ToolFailure(
                ExecutionStatus.INVALID_ARGUMENTS,
                ToolErrorCategory.INVALID_ARGUMENTS,
                f"arguments are not valid JSON: {error}",
            ) from error
        if not isinstance(arguments, dict):
            raise ToolFailure(
                ExecutionStatus.INVALID_ARGUMENTS,
                ToolErrorCategory.INVALID_ARGUMENTS,
                f"arguments must be a JSON object, got {type(arguments).__name__}",
            )
        if not tool.description.validate_arguments:  # the tool itself refuses what it cannot take
            return cast(dict[str, Any], arguments)
        errors = tool.validator.errors(arguments)
        if errors:
            problems = "; ".join(
                f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}" for e in errors
            )
            raise ToolFailure(
                ExecutionStatus.INVALID_ARGUMENTS,
                ToolErrorCategory.INVALID_ARGUMENTS,
                f"arguments do not match the schema of {tool.description.name!r}: {problems}",
                details={"errors": [e.message for e in errors]},
            )
        return cast(dict[str, Any], arguments)

    @staticmethod
    def _budget(trial: TrialContext, tool: Tool, requested: float) -> float:
        if requested > 0:
            return clamp_budget(requested)
        if tool.description.timeout_s:
            return clamp_budget(tool.description.timeout_s)
        return clamp_budget(trial.tools.default_timeout_s)


def clamp_budget(seconds: float) -> float:
    """``seconds`` within (0, MAX_BUDGET_S]; inf, NaN and absurd values become the ceiling."""
    if math.isnan(seconds) or seconds <= 0 or seconds > MAX_BUDGET_S:
        return MAX_BUDGET_S
    return seconds


async def _refresh(trial: TrialContext) -> None:
    """Before a call: re-read a mirror a lost reply or conflict left out of step with the store."""
    try:
        await trial.state.mirror.refresh()
    except DBServiceError as error:
        raise infrastructure_failure(
            error, "the trial's state could not be re-read from the store"
        ) from error


def _category_name(failure: ToolFailure | None) -> str | None:
    if failure is None:
        return None
    return ToolErrorCategory(failure.category).name.lower()
