"""The runner's registered trials: atomic registration, lookup, cleanup, and their lease in the store.

Registration either completes or leaves nothing behind -- no registry entry, no state in the store --
so the same trial_id can always be registered again after a failure.

Each runner incarnation has its own owner id and claims the trials it registers in the store with a
lease it renews every third of its length (docs/faults.md). A killed runner stops renewing: once its
lease runs out another runner may register or clean up the same ids, while a trial under a live lease
is never touched by anyone but its owner. CleanupTrial answers success only when the store holds
nothing of the trial.

Leases follow what the runner holds, not what the store says it owns: each renewal names the trials
registered (or being registered) here. State the runner could not delete -- the store was unreachable
at CleanupTrial or while a failed registration was undone, or an init's answer was lost -- is
remembered as left behind: never renewed, deleted at the next renewal once the store answers, and
deleted before the same id is registered here again. What escapes even that runs out with its lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import shutil
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from tolokaforge.contracts.runner import ExecutionStatus
from tolokaforge.core.models import TaskDescription, TrialSpec
from tolokaforge.db import (
    ConflictError,
    DBServiceError,
    NotFoundError,
    StateClient,
    StateHashes,
    StoreUnreachableError,
    VersionedState,
)

from ..calls.browser_calls import BROWSER_TOOL_NAME, browser_tool
from ..calls.executor import ToolExecutor
from ..calls.isolated import worker_code
from ..errors import (
    DuplicateTrialError,
    RegistrationError,
    StateStoreError,
    ToolLoadError,
    TrialNotFoundError,
)
from ..process.cgroups import TrialCgroup
from ..state.endpoint import StateDoor
from ..state.gateway import StateGateway
from ..state.mirror import TrialMirror
from ..tools import ToolRegistry, load_python_tool
from ..tools.code_loader import CodeBundle, load_code
from ..tools.python_tools import WorkerTool, worker_tool
from ..tools.remote import ToolSourceSession
from ..tools.servers import ServerPlaces, start_tool_servers
from ..tools.state_sync import bind_state, push_state
from ..trials.context import (
    INITIALIZED_SNAPSHOT,
    TrialContext,
    TrialFiles,
    TrialProcesses,
    TrialState,
    TrialTools,
)
from ..trials.golden_memo import GoldenReplay
from ..trials.task_cache import KnownTask, TaskCache
from ..trials.web import WebRecord
from ..trials.workspace import seed_workspace
from ..workers.worker import WorkerCode

__all__ = ["TrialRegistry"]

log = logging.getLogger(__name__)

RENEWAL_BATCH = 10_000
"""Trial ids per lease renewal request (the contract's ``LeaseRequest.trial_ids`` maxItems)."""


class TrialRegistry:
    def __init__(
        self,
        client: StateClient,
        executor: ToolExecutor,
        work_dir: Path,
        default_timeout_s: float,
        *,
        state_door: Callable[[], Awaitable[StateDoor]] | None = None,
        lease_seconds: float = 30.0,
        golden_replay: GoldenReplay = "task",
    ) -> None:
        self.client = client
        self.executor = executor
        self.work_dir = work_dir
        self.default_timeout_s = default_timeout_s
        self.owner = f"runner-{uuid.uuid4().hex}"
        """This incarnation's owner id in the store: a restarted runner is a new owner."""
        self.lease_seconds = lease_seconds
        self.golden_replay: GoldenReplay = golden_replay
        self._state_door = state_door
        self.gateway = StateGateway(self._require_state_door, own=executor.confinement.own)
        """Each MCP server's way to its own trial's tables (and no other's)."""
        self._trials: dict[str, TrialContext] = {}
        self._pending: set[str] = set()
        self.tasks = TaskCache()
        self._renewal: asyncio.Task[None] | None = None
        self._left: set[str] = set()
        """Ids whose state this runner may have left in the store without holding them (module doc)."""
        self._left_lock = asyncio.Lock()
        """Held while left state is deleted, so that no deletion can overtake a new registration's init."""

    def start_lease_renewal(self) -> None:
        """Renew this owner's lease every third of its length until :meth:`close`."""
        if self._renewal is None:
            self._renewal = asyncio.get_running_loop().create_task(self._renew_forever())

    async def _renew_forever(self) -> None:
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            try:
                await self.renew_leases()
            except Exception:  # a bug here must not end renewing: every lease would run out with it
                log.exception("renewing the leases of %s failed", self.owner)

    def left_behind(self) -> frozenset[str]:
        """Ids whose state this runner left in the store and has not managed to delete yet."""
        return frozenset(self._left)

    async def renew_leases(self) -> None:
        """One renewal: delete the state left behind, then renew the lease of the trials held here.

        Only the trials registered or being registered here are named, so a trial this runner dropped
        is never renewed, whatever the store still holds under its owner id. A failure is logged: the
        next renewal may get through before the lease runs out; if none does, the trials become
        reclaimable, which is the point of a lease.
        """
        if self._left:
            await self._delete_left()
        held = [*self._trials, *self._pending]
        for start in range(0, len(held), RENEWAL_BATCH):
            try:
                renewal = await self.client.renew_lease(self.owner, held[start : start + RENEWAL_BATCH])
            except DBServiceError as error:
                log.warning("renewing the lease of %s failed: %s", self.owner, error.message)
                return
            # A pending registration's init may not have landed yet: only registered trials count.
            gone = [trial_id for trial_id in renewal.not_renewed if trial_id in self._trials]
            if gone:
                log.warning(
                    "the store no longer holds %d trial(s) of %s for it (deleted, or reclaimed after its "
                    "lease ran out): %s",
                    len(gone),
                    self.owner,
                    ", ".join(gone[:10]),
                )

    def __len__(self) -> int:
        return len(self._trials)

    def trial_ids(self) -> list[str]:
        return list(self._trials)

    def get(self, trial_id: str) -> TrialContext:
        trial = self._trials.get(trial_id)
        if trial is None:
            raise TrialNotFoundError(trial_id)
        return trial

    async def register(
        self, spec: TrialSpec, *, default_tool_timeout_s: float = 0.0, tables_from_json: bool = False
    ) -> TrialContext:
        """Register ``spec``'s trial; ``tables_from_json``: its tables were parsed from JSON text, so the
        store need not check that JSON can hold them."""
        trial_id = spec.trial_id
        if not trial_id:
            raise RegistrationError("trial_id is empty")
        known = self.tasks.known(spec.task)
        if trial_id in self._trials or trial_id in self._pending:
            raise DuplicateTrialError(f"Trial '{trial_id}' is already registered; CleanupTrial it first")
        self._pending.add(trial_id)
        mirror: TrialMirror | None = None
        trial: TrialContext | None = None
        sources: list[ToolSourceSession] = []
        workspace = self._workspace_path(trial_id)
        cgroup: TrialCgroup | None = None
        try:
            if known.code_loaded:
                # A fraction of a millisecond: a thread would cost more in waiting for one (and for
                # the GIL) than it saves, when hundreds of trials register at once.
                agent_tools, user_tools, bundle, code = self._prepare(spec.task, known, workspace)
            else:  # the first load of the task's code may import it: slow, so off the loop
                agent_tools, user_tools, bundle, code = await asyncio.to_thread(
                    self._prepare, spec.task, known, workspace
                )
                known.code_loaded = True
            code_root = bundle.root if bundle is not None else None
            cgroup = self.executor.confinement.trial_cgroup("trial", self.executor.isolated.limits)
            mirror = await self._create_state(spec, known, tables_from_json)
            # Servers start after the state exists: an MCP server may read its tables while starting.
            sources = await self._start_servers(
                spec.task, trial_id, workspace, code_root, agent_tools, user_tools, cgroup
            )
            # A server keeping its tables in-process starts from the trial's, and reports back after each call.
            bind_state(sources, mirror)
            await push_state(sources, mirror.tables)
            trial = TrialContext(
                spec=spec,
                state=TrialState(mirror, initial_tables=known.initial, initial_hash=known.full_hash),
                tools=TrialTools(
                    agent_tools,
                    user_tools,
                    default_timeout_s=default_tool_timeout_s
                    if default_tool_timeout_s > 0
                    else spec.default_tool_timeout_s or self.default_timeout_s,
                    sources=sources,
                    shared=known if known.tools is not None and not sources else None,
                ),
                processes=TrialProcesses(self.executor.confinement, cgroup, worker_code=code),
                files=TrialFiles(
                    workspace, code_root, code_package=bundle.package if bundle is not None else None
                ),
                golden_memo=known.golden if self.golden_replay == "task" else None,
            )
            await self.executor.prepare(trial)
            if spec.task.initial_state.initialization_actions:
                await self.run_initialization_actions(trial)
                # Golden replay starts from the initialised state, not from the raw tables.
                await self.client.create_snapshot(trial_id, INITIALIZED_SNAPSHOT)
                trial.state.has_initialized_snapshot = True
                trial.state.initialized_tables = mirror.share()
        except BaseException:
            if trial is not None:
                await self.executor.release(trial)
            await _stop_sources(sources)
            await self.gateway.close(trial_id)
            if cgroup is not None:
                await asyncio.to_thread(self.executor.confinement.release_cgroup, cgroup)
            if mirror is not None:
                try:
                    await self._forget_state(trial_id)
                except DBServiceError as error:  # left behind: deleted once the store answers again
                    log.warning("could not undo trial %s in the store: %s", trial_id, error.message)
            shutil.rmtree(workspace, ignore_errors=True)
            self._pending.discard(trial_id)
            raise
        self._trials[trial_id] = trial
        self._pending.discard(trial_id)
        return trial

    async def read_state(
        self, trial_id: str, *, tables: list[str] | None, stable: bool
    ) -> tuple[VersionedState, StateHashes]:
        """GetState: the trial's tables and hashes, read as of one version (under the trial's lock)."""
        trial = self.get(trial_id)
        async with trial.lock:
            state = await self.client.get_state(trial_id, tables=tables, stable=stable)
            hashes = await self.client.get_hashes(trial_id)
        return state, hashes

    async def reset(self, trial_id: str, *, run_init_actions: bool) -> StateHashes:
        """ResetTrial: the initial state again (keeping the registration), optionally re-initialised."""
        trial = self.get(trial_id)
        async with trial.lock:
            hashes = await self.client.reset(trial_id)
            trial.state.mirror.start_from(trial.state.initial_tables, hashes.version)
            # The page starts over too: a fresh browser context at the next call, nothing seen yet.
            await self.executor.browser.release(trial)
            trial.web = WebRecord()
            # A server keeping its tables in-process gets the initial state too; the workspace its files.
            await push_state(trial.tools.sources, trial.state.mirror.tables)
            if trial.files.workspace is not None:
                seed_workspace(
                    trial.files.workspace,
                    trial.files.code_root,
                    trial.spec.task.initial_state.workspace_files,
                )
                trial.processes.confinement.own(trial.files.workspace)
        if run_init_actions:
            await self.run_initialization_actions(trial)
            hashes = await self.client.get_hashes(trial_id)
        return hashes

    async def cleanup(self, trial_id: str) -> bool:
        """Forget the trial and delete its state; False when it was not registered here.

        The store is asked to delete the id whether or not this runner holds the registration, so a
        trial left by a dead runner (lease expired) is cleaned too; one under another runner's live
        lease is refused (ConflictError). Any failure to delete raises, so a retry finds it again.
        """
        if trial_id in self._pending:
            raise StateStoreError(
                f"Trial '{trial_id}' is being registered; clean it up afterwards", retryable=True
            )
        trial = self._trials.pop(trial_id, None)
        if trial is not None:
            async with trial.lock:  # let a call in flight finish before its state disappears
                try:
                    await self.executor.release(trial)
                    await _stop_sources(trial.tools.sources)
                finally:
                    await self.gateway.close(trial_id)
                    await _end_processes(trial)
                    if trial.files.workspace is not None:
                        shutil.rmtree(trial.files.workspace, ignore_errors=True)
        await self._forget_state(trial_id)
        return trial is not None

    async def close(self) -> None:
        """Stop every trial's tool processes and give up their state (runner shutdown)."""
        if self._renewal is not None:
            self._renewal.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewal
            self._renewal = None
        trials = list(self._trials.items())
        self._trials.clear()
        try:
            await self._close_trials(trials)
        finally:
            await self.gateway.aclose()
        if self._left:  # a last try; what stays runs out with its lease, never renewed again
            await self._delete_left()

    async def _close_trials(self, trials: list[tuple[str, TrialContext]]) -> None:
        for trial_id, trial in trials:
            await self.executor.release(trial)
            await _stop_sources(trial.tools.sources)
            await self.gateway.close(trial_id)
            await _end_processes(trial)
            if trial.files.workspace is not None:
                shutil.rmtree(trial.files.workspace, ignore_errors=True)
            try:
                await self._forget_state(trial_id)
            except DBServiceError as error:  # the lease frees it later; shutdown goes on
                log.warning("could not delete trial %s on shutdown: %s", trial_id, error.message)

    async def run_initialization_actions(self, trial: TrialContext) -> None:
        for index, action in enumerate(trial.spec.task.initial_state.initialization_actions):
            outcome = await self.executor.call(
                trial,
                call_id=f"init-{index}",
                tool_name=action.tool_name,
                arguments_json=json.dumps(action.arguments),
                executor="user" if action.env_type == "user" else "agent",
                record=False,
            )
            if outcome.status != ExecutionStatus.SUCCESS:
                reason = outcome.failure.message if outcome.failure else outcome.status.name
                if outcome.failure is not None and outcome.failure.infrastructure:
                    raise StateStoreError(
                        f"initialization_actions[{index}] ({action.tool_name}): {reason}", retryable=True
                    )
                raise RegistrationError(
                    f"initialization_actions[{index}] ({action.tool_name}) failed: {reason}"
                )

    def _build_registries(
        self, task: TaskDescription, known: KnownTask
    ) -> tuple[ToolRegistry, ToolRegistry, CodeBundle | None, WorkerCode | None]:
        agent, user = ToolRegistry("agent"), ToolRegistry("user")
        if task.tool_code is None:
            return agent, user, None, None
        if known.tools is not None and known.bundle is not None:
            agent_tools, user_tools, code = known.tools
            for tool in agent_tools:
                agent.add(tool)
            for tool in user_tools:
                user.add(tool)
            return agent, user, known.bundle, code
        bundle = self.tasks.bundle(task.tool_code)  # written out and digested for another task
        if bundle is None:
            bundle = load_code(task.tool_code, self.work_dir)
            if task.tool_code.path is None:  # a path is digested every time
                self.tasks.keep_bundle(task.tool_code, bundle)
        isolated: list[WorkerTool] = []
        for registry, descriptions in ((agent, task.agent_tools), (user, task.user_tools)):
            for description in descriptions:
                if self.executor.isolation == "thread":
                    registry.add(load_python_tool(description, bundle))
                else:
                    # The runner never imports pack code: the trial's worker does, at prepare().
                    tool = worker_tool(description)
                    registry.add(tool)
                    isolated.append(tool)
        code = worker_code(bundle.root, bundle.package, isolated) if isolated else None
        # Code sent as files is part of the task: digested and its tools found once (the tools are
        # immutable; each trial gets registries of its own, which its tool servers add to). Code at a
        # path is digested at every registration, so that an edit on disk is picked up by the next trial.
        if task.tool_code.path is None:
            known.bundle = bundle
            known.tools = (tuple(agent), tuple(user), code)
        return agent, user, bundle, code

    def _workspace_path(self, trial_id: str) -> Path:
        # Named by a digest of the id: ids differing only in characters a directory name cannot hold
        # (':' '/' '#' '@') must never share a workspace.
        return self.work_dir / "workspaces" / hashlib.sha256(trial_id.encode("utf-8")).hexdigest()[:32]

    def _prepare(
        self, task: TaskDescription, known: KnownTask, workspace: Path
    ) -> tuple[ToolRegistry, ToolRegistry, CodeBundle | None, WorkerCode | None]:
        """The trial's tool registries, and its workspace made and seeded (blocking: run in a thread)."""
        built = self._build_registries(task, known)
        if task.browser is not None:  # served by the runner (calls/browser_calls.py), offered like any tool
            agent = built[0]
            if agent.get(BROWSER_TOOL_NAME) is not None:
                raise ToolLoadError(
                    f"the task enables the runner's {BROWSER_TOOL_NAME!r} tool and declares an agent tool "
                    f"named {BROWSER_TOOL_NAME!r} too; rename the pack's tool"
                )
            agent.add(browser_tool(task.browser))
        try:
            workspace.mkdir(parents=True)
        except FileExistsError:  # left by a runner that died before cleaning up
            shutil.rmtree(workspace, ignore_errors=True)
            workspace.mkdir(parents=True)
        bundle = built[2]
        seed_workspace(
            workspace, bundle.root if bundle else None, task.initial_state.workspace_files, clear=False
        )
        self.executor.confinement.own(workspace)
        return built

    async def _start_servers(
        self,
        task: TaskDescription,
        trial_id: str,
        workspace: Path,
        code_root: Path | None,
        agent: ToolRegistry,
        user: ToolRegistry,
        cgroup: TrialCgroup | None,
    ) -> list[ToolSourceSession]:
        if not task.tool_servers:
            return []
        places = ServerPlaces(
            trial_id=trial_id,
            workspace=workspace,
            code_root=code_root,
            log_dir=self.work_dir / "logs",
            trial_url=lambda: self.gateway.url(trial_id),
            limits=self.executor.isolated.limits.replace(network=True),
            confinement=self.executor.confinement,
            cgroup=cgroup,
            state_socket=lambda: self.gateway.open(trial_id, cgroup),
        )
        return await start_tool_servers(task.tool_servers, places, {"agent": agent, "user": user})

    async def _require_state_door(self) -> StateDoor:
        if self._state_door is None:
            raise RegistrationError("this runner has no DB service to give an MCP server")
        return await self._state_door()

    async def _init_state(self, spec: TrialSpec, known: KnownTask, tables_from_json: bool) -> TrialMirror:
        initial = spec.task.initial_state
        return await TrialMirror.create(
            spec.trial_id,
            self.client,
            known.initial,
            full_hash=known.full_hash,
            schemas=[schema.model_dump() for schema in initial.schemas],
            unstable_fields=[field.model_dump(exclude_none=True) for field in initial.unstable_fields],
            owner=self.owner,
            lease_seconds=self.lease_seconds,
            parsed_json=tables_from_json or known.tables_checked,
        )

    async def _create_state(self, spec: TrialSpec, known: KnownTask, tables_from_json: bool) -> TrialMirror:
        trial_id = spec.trial_id
        try:
            if trial_id in self._left:  # this runner left state under the id: delete it first
                async with self._left_lock:
                    if trial_id in self._left:
                        await self._delete_left_trial(trial_id)
            try:
                mirror = await self._init_state(spec, known, tables_from_json)
            except ConflictError as error:
                if error.details.get("owner") != self.owner:
                    raise
                # Held by this very runner, though not registered here (the registry never holds an id
                # twice): state an init left after its answer was lost. It is ours to delete.
                await self._delete_left_trial(trial_id)
                mirror = await self._init_state(spec, known, tables_from_json)
            known.tables_checked = True
            if known.full_hash is None:
                self.tasks.settle(spec.task, known, (await self.client.get_hashes(spec.trial_id)).full_hash)
                # Another task with the same tables was here first: start from its copy (same content).
                mirror.start_from(known.initial, mirror.version)
            return mirror
        except ConflictError as error:
            # Held under another runner's live lease: registrable once that lease runs out.
            raise StateStoreError(
                f"the state store already holds trial '{spec.trial_id}': {error.message}",
                retryable=error.details.get("owner") is not None,
            ) from error
        except StoreUnreachableError as error:
            # The init may have landed (its answer lost, or a read after it failed): take it back before
            # answering. If that fails too, the id is left behind, deleted once the store answers again.
            with contextlib.suppress(DBServiceError):
                await self._forget_state(trial_id)
            raise StateStoreError(
                f"the state store is unreachable: {error.message}", retryable=True
            ) from error
        except DBServiceError as error:
            raise StateStoreError(f"the state store refused the initial state: {error.message}") from error

    async def _forget_state(self, trial_id: str) -> None:
        """Delete the trial's state in the store (none there is fine).

        When that fails, the id is remembered as left behind (unless another runner's live lease holds
        it: then nothing there is this runner's), and the error is raised.
        """
        try:
            await self.client.delete_trial(trial_id, owner=self.owner)
        except NotFoundError:
            pass
        except ConflictError:
            self._left.discard(trial_id)
            raise
        except DBServiceError:
            self._left.add(trial_id)
            raise
        self._left.discard(trial_id)

    async def _delete_left_trial(self, trial_id: str) -> None:
        """Delete what this runner left under ``trial_id``; DBServiceError when the store failed."""
        with contextlib.suppress(ConflictError):  # another runner's now: nothing of it is ours
            await self._forget_state(trial_id)

    async def _delete_left(self) -> None:
        """Delete the state left behind, stopping at the first failure (the store is likely still
        unreachable: the next renewal tries again)."""
        async with self._left_lock:
            for trial_id in list(self._left):
                if trial_id in self._pending:  # being registered: the registration deletes it first
                    continue
                try:
                    await self._delete_left_trial(trial_id)
                except DBServiceError as error:
                    log.info("trial %s left in the store is not deleted yet: %s", trial_id, error.message)
                    return


async def _end_processes(trial: TrialContext) -> None:
    """Kill every process still in the trial's cgroup (a daemon a tool double-forked) and remove it."""
    if trial.processes.cgroup is not None:
        cgroup, trial.processes.cgroup = trial.processes.cgroup, None
        await asyncio.to_thread(trial.processes.confinement.release_cgroup, cgroup)


async def _stop_sources(sources: list[ToolSourceSession]) -> None:
    for source in sources:
        await source.cleanup()
