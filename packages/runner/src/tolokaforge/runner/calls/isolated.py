"""Isolated mode (the default): a python tool call runs in the trial's worker process.

The worker answers with the call's output and changes; the runner commits them (one atomic batch,
as in trusted mode) and only then counts the worker in step. An error the tool reported itself (a
ReportedError) arrives the same way, its message as ``reported_error``: its changes are committed too. A call past its budget kills the worker
(TIMEOUT); a worker that dies mid-call is ``process_crashed`` (synthesized here, never by the tool);
either way nothing of the call is committed and the next call gets a fresh worker built from the
mirror, which is in step with the store.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, cast

import orjson

from tolokaforge.contracts.runner import ExecutionStatus
from tolokaforge.contracts.tool import ToolErrorCategory

from ..errors import ToolFailure, ToolLoadError, checked_text
from ..process.confinement import Confinement
from ..process.sandbox import Limits
from ..process.supervisor import probe_limits
from ..tools.python_tools import Finished, WorkerTool
from ..trials.context import TrialContext
from ..workers.code import WorkerBase
from ..workers.slots import TrialWorkers
from ..workers.worker import ToolWorker, WorkerCode, WorkerCrashed, WorkerError, WorkerTimeout
from ..workers.zygotes import Zygotes

__all__ = ["IsolatedRunner"]

log = logging.getLogger(__name__)

Commit = Callable[[TrialContext, list[dict[str, Any]]], Awaitable[None]]

BASES_CAPACITY = 64
"""Initial states kept written out for the zygotes, least recently used forgotten first (as
trials/task_cache.py bounds its shared parts). A forgotten one is written again when a trial needs it."""

_CATEGORIES = {
    "execution_failed": ToolErrorCategory.EXECUTION_FAILED,
    "not_found": ToolErrorCategory.NOT_FOUND,
    "permission_denied": ToolErrorCategory.PERMISSION_DENIED,
}


class IsolatedRunner:
    def __init__(
        self,
        limits: Limits,
        log_dir: Path,
        *,
        fork_server: bool = True,
        confinement: Confinement | None = None,
    ) -> None:
        self.limits = limits
        self.log_dir = log_dir
        self.confinement = confinement or Confinement.process()
        self.last_report: dict[str, str] = {}
        """What held in the last worker started (sandbox.apply's report)."""
        self.zygotes = (
            Zygotes(limits, log_dir.parent / "zygotes", log_dir, confinement=self.confinement)
            if fork_server and (self.confinement.landlock_abi > 0 or not self.confinement.sandboxed)
            else None
        )
        """Sandboxed, workers are forked only where Landlock keeps each to its own workspace."""
        """Workers are forked from a zygote per code (workers/zygotes.py); None: each is spawned afresh."""
        self.bases_capacity = BASES_CAPACITY
        """How many settled entries of ``_bases`` are kept (one being written is never forgotten)."""
        self._bases: OrderedDict[str, asyncio.Future[WorkerBase | None]] = OrderedDict()
        """Each task's initial tables written once for the zygotes to read, by full hash, least
        recently used first. Not cachetools' LRUCache: that would evict a state still being written,
        and the next trial of it would write the same file alongside."""
        self._loaded: set[str] = set()
        """Codes (by _tools_key) a worker has loaded every tool of: their next trials start workers lazily."""
        self._warming: set[asyncio.Task[None]] = set()
        """Zygotes being started ahead of a registered trial's first call (:meth:`_warm`)."""

    async def close(self) -> None:
        """Stop the zygotes (runner shutdown, after every trial's workers were released)."""
        for warming in list(self._warming):
            warming.cancel()
        await asyncio.gather(*self._warming, return_exceptions=True)
        if self.zygotes is not None:
            await self.zygotes.close()

    async def prepare(self, trial: TrialContext) -> None:
        """Start the trial's first worker, which imports its tools: a tool that cannot load fails registration.

        Code whose every tool a worker has loaded already (the same bundle content, the same tools) is
        not checked again: its trials' workers start at their first call, so registering the 2nd..Nth
        trial of a task, or a trial of another task of the same pack, waits for no process. The zygote
        that call forks from is started meanwhile, if it is not running (:meth:`_warm`).
        """
        code = trial.processes.worker_code
        if code is None or not code.tools:
            return
        trial.processes.workers = TrialWorkers(lambda tables, version: self._launch(trial, tables, version))
        key = _tools_key(code, self.limits)
        if key in self._loaded:
            self._warm(trial, code)
            return
        try:
            worker = await self._worker(trial)
        except ToolFailure as failure:
            raise ToolLoadError(failure.message) from failure
        if worker.problems:
            names = {tool.key: tool.description.name for tool in _worker_tools(trial)}
            raise ToolLoadError(
                "; ".join(
                    f"tool {names.get(tool, tool)!r}: {why}" for tool, why in sorted(worker.problems.items())
                )
            )
        self._loaded.add(key)

    def _warm(self, trial: TrialContext, code: WorkerCode) -> None:
        """Start the zygote of the trial's code and initial state in the background, unless it runs
        holding that state: the trial's first call, usually a model turn later, then only forks.

        A task never seen before needs its own zygote (zygotes.py: one per initial state), and that
        zygote's start and its read of the initial state cost about as much as parsing the task.
        """
        zygotes, full_hash = self.zygotes, trial.state.initial_hash
        if zygotes is None or full_hash is None:
            return
        known = self._used_base(full_hash)
        if known is not None and known.done():
            base = known.result()
            if base is None or zygotes.holding(code, base):
                return
        task = asyncio.get_running_loop().create_task(zygotes.warm(code, full_hash, self._base(trial)))
        self._warming.add(task)
        task.add_done_callback(_warmed)
        task.add_done_callback(self._warming.discard)

    async def report(self) -> dict[str, str]:
        """What holds for a worker on this machine: the last worker's report, or a probe's."""
        if not self.last_report:
            self.last_report = await probe_limits(
                self.limits, self.confinement, self.log_dir.parent / "probe"
            )
        return self.last_report

    async def release(self, trial: TrialContext) -> None:
        if trial.processes.workers is not None:
            await trial.processes.workers.close()

    async def run(
        self,
        trial: TrialContext,
        tool: WorkerTool,
        arguments: Mapping[str, Any],
        budget: float,
        commit: Commit,
    ) -> Finished:
        worker = await self._worker(trial)
        name = tool.description.name
        try:
            reply = await worker.call(tool.key, arguments, budget)
        except WorkerTimeout as error:
            raise ToolFailure(
                ExecutionStatus.TIMEOUT,
                ToolErrorCategory.TIMEOUT,
                f"tool {name!r} exceeded its budget of {budget:g}s; its worker was killed and its changes discarded",
                retryable=True,
                details={"budget_seconds": budget},
            ) from error
        except WorkerCrashed as error:
            raise ToolFailure(
                ExecutionStatus.ERROR,
                ToolErrorCategory.PROCESS_CRASHED,
                f"tool {name!r}: {error}; its changes were discarded",
                details={"tool": name, "exit_code": error.exit_code},
            ) from error
        if not reply["ok"]:
            raise ToolFailure(
                ExecutionStatus.ERROR,
                _CATEGORIES.get(str(reply.get("category")), ToolErrorCategory.EXECUTION_FAILED),
                str(reply.get("message", "")),
                details={
                    "exception": str(reply.get("exception", "")),
                    "tool": name,
                    **({"traceback": str(reply["traceback"])} if reply.get("traceback") else {}),
                },
            )
        output, changes, reported = reply.get("output"), reply.get("changes"), reply.get("reported_error")
        if not isinstance(output, str) or not _is_changes(changes) or not isinstance(reported, str | None):
            assert trial.processes.workers is not None
            await trial.processes.workers.discard(worker)
            raise ToolFailure(
                ExecutionStatus.ERROR,
                ToolErrorCategory.PROCESS_CRASHED,
                f"tool {name!r}: its worker answered with a malformed reply; the worker was killed",
                details={"tool": name},
            )
        typed = cast(list[dict[str, Any]], changes)
        try:
            # A reply is JSON, which cannot carry a lone surrogate; checked anyway, before the commit.
            checked_text(output)
            if reported is not None:
                checked_text(reported)
            await commit(trial, typed)
        except (KeyError, IndexError, TypeError, ValueError) as error:
            # Changes the store took but the mirror cannot apply: the store is the truth, so reload.
            await trial.state.mirror.reload()
            assert trial.processes.workers is not None
            await trial.processes.workers.discard(worker)
            raise ToolFailure(
                ExecutionStatus.ERROR,
                ToolErrorCategory.PROCESS_CRASHED,
                f"tool {name!r}: its worker sent changes the runner cannot apply ({type(error).__name__}: {error})",
                details={"tool": name},
            ) from error
        except BaseException:
            assert trial.processes.workers is not None
            await trial.processes.workers.discard(worker)  # it applied changes the store did not take
            raise
        worker.version = trial.state.mirror.version
        return Finished(output, typed, reported)

    async def _worker(self, trial: TrialContext) -> ToolWorker:
        assert trial.processes.workers is not None, "prepare() starts a trial's workers"
        try:
            return await trial.processes.workers.for_state(
                trial.state.mirror.tables, trial.state.mirror.version
            )
        except WorkerError as error:
            raise ToolFailure(
                ExecutionStatus.ERROR,
                ToolErrorCategory.PROCESS_CRASHED,
                f"the trial's tool worker could not be started: {error}",
            ) from error

    async def _launch(self, trial: TrialContext, tables: dict[str, Any], version: int) -> ToolWorker:
        assert trial.processes.worker_code is not None and trial.files.workspace is not None
        safe_id = re.sub(r"[^A-Za-z0-9_.-]", "_", trial.trial_id)
        worker = await ToolWorker.start(
            trial.processes.worker_code,
            tables,
            version,
            workspace=trial.files.workspace,
            log_path=self.log_dir / f"{safe_id}.worker.log",
            limits=self.limits,
            env={},
            zygotes=self.zygotes,
            base=await self._base(trial),
            confinement=self.confinement,
            cgroup=trial.processes.cgroup,
        )
        self.last_report = worker.limits
        return worker

    async def _base(self, trial: TrialContext) -> WorkerBase | None:
        """The trial's initial tables as a base for forked workers, written to a file the first time."""
        if self.zygotes is None or trial.state.initial_hash is None:
            return None
        full_hash = trial.state.initial_hash
        known = self._used_base(full_hash)
        if known is None:
            known = asyncio.get_running_loop().create_future()
            self._bases[full_hash] = known
            path = self.zygotes.directory / "states" / f"{full_hash}.json"
            try:
                await asyncio.to_thread(_write_tables, path, trial.state.initial_tables)
                known.set_result(WorkerBase(full_hash, trial.state.initial_tables, path))
            except (OSError, TypeError) as error:  # no room, or a value orjson cannot write (huge ints)
                del self._bases[full_hash]
                known.set_result(None)
                log.warning("initial state %s is sent to each worker: %s", full_hash, error)
                return None
            except BaseException as error:
                del self._bases[full_hash]
                known.set_exception(error)
                known.exception()  # retrieved: the next launch tries again
                raise
            else:
                self._forget_bases()
        shared = await asyncio.shield(known)
        if shared is None or shared.tables is trial.state.initial_tables:
            return shared
        # The same content (the same full hash) in another task's objects: a task sent whole in each
        # TrialSpec is parsed anew per trial. Its own tables stand for the zygote's copy, so a worker
        # is sent only what this trial changed, not every table again.
        return WorkerBase(full_hash, trial.state.initial_tables, shared.file)

    def _used_base(self, full_hash: str) -> asyncio.Future[WorkerBase | None] | None:
        known = self._bases.get(full_hash)
        if known is not None:
            self._bases.move_to_end(full_hash)
        return known

    def _forget_bases(self) -> None:
        """Past the capacity, forget the least recently used settled states. Their files stay: a zygote
        or a fork may be about to read one, and the next write of it replaces it whole."""
        excess = len(self._bases) - self.bases_capacity
        if excess > 0:
            for full_hash in [key for key, known in self._bases.items() if known.done()][:excess]:
                del self._bases[full_hash]


def _warmed(task: asyncio.Task[None]) -> None:
    """Log why a zygote could not be started ahead of need: the first call starts it, or spawns."""
    if not task.cancelled() and task.exception() is not None:
        log.warning("starting a zygote ahead of a trial's first call failed: %r", task.exception())


def worker_code(root: Path, package: str, tools: list[WorkerTool]) -> WorkerCode:
    return WorkerCode(root, package, {tool.key: (tool.module_path, tool.class_name) for tool in tools})


def _worker_tools(trial: TrialContext) -> list[WorkerTool]:
    return [
        tool
        for registry in (trial.tools.agent, trial.tools.user)
        for tool in registry
        if isinstance(tool, WorkerTool)
    ]


def _is_changes(value: Any) -> bool:
    if not isinstance(value, list):
        return False
    for change in cast(list[Any], value):
        if not isinstance(change, dict):
            return False
        typed = cast(dict[str, Any], change)
        if not isinstance(typed.get("table_name"), str) or not isinstance(typed.get("operations"), list):
            return False
    return True


def _write_tables(path: Path, tables: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.partial")
    partial.write_bytes(orjson.dumps(tables))
    os.replace(partial, path)  # a zygote never reads half a file


def _tools_key(code: WorkerCode, limits: Limits) -> str:
    """The same bundle (its package name digests root and content), the same tool classes, the same limits."""
    return json.dumps([str(code.root), code.package, sorted(code.tools.items()), limits.to_json()])
