"""The driver's side of a Ray run: a pool of TrialWorker actors and the scheduler that feeds them.

* Back-pressure: ``workers x concurrency`` lanes, each with at most one trial in flight, pull from one
  queue; Ray never holds more trials than the pool can run, and each outcome comes back (and is
  written by the caller) as soon as it finishes.
* A worker that dies (its process killed, its node gone) fails every call in flight on it with a
  RayActorError: each of those trials has lost an attempt, is queued again with the next attempt
  number, and runs on a fresh worker that replaces the dead one. After ``max_attempts`` the trial is
  written as ``trial_lost``. A trial reaches ``on_outcome`` exactly once.
* Leaving the pool (normally, on error or on Ctrl-C) kills every worker, so no trial keeps running on
  the cluster after the driver is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from tolokaforge.core.termination import TerminationReason

from ...errors import RunnerUnavailableError
from ...packs.loader import LoadedTask
from ...results.outcome import Episode, LostAttempt, TrialOutcome
from ..conductor import TrialSettings
from ..trial_spec import trial_id
from .cluster import RayActorError, RayTaskError, WorkerCrashedError, connected, ray, worker_count
from .settings import CREDENTIAL_VARIABLES, RaySettings
from .worker import GoldenReplay, Isolation, TrialWorker

__all__ = ["STARTUP_BUDGET_S", "RayPool", "ray_pool"]

STARTUP_BUDGET_S = 180.0
"""How long the workers may take to be placed, started and answer their first HealthCheck."""

_TrialActor = ray.remote(TrialWorker)
_WORKER_DIED = (RayActorError, WorkerCrashedError)


@dataclass
class _Slot:
    handle: Any
    generation: int = 0


@dataclass
class _Job:
    loaded: LoadedTask
    index: int
    first_attempt: int = 0
    lost: list[LostAttempt] = field(default_factory=list[LostAttempt])


async def _get(ref: Any) -> Any:
    return await ref


def _credentials(trial_settings: TrialSettings) -> dict[str, str]:
    judge = trial_settings.judge_model
    names = [*CREDENTIAL_VARIABLES, *(judge.api_key_env if judge is not None else ())]
    return {name: value for name in dict.fromkeys(names) if (value := os.environ.get(name))}


class RayPool:
    def __init__(
        self,
        settings: RaySettings,
        concurrency: int,
        trial_settings: TrialSettings,
        transport_budget_s: float,
        isolation: Isolation = "sandbox",
        golden_replay: GoldenReplay = "task",
        sandbox_without: tuple[str, ...] = (),
    ) -> None:
        self.settings = settings
        self.isolation: Isolation = isolation
        self.sandbox_without = sandbox_without
        self.golden_replay: GoldenReplay = golden_replay
        self.concurrency = concurrency
        self.trial_settings = trial_settings
        self.transport_budget_s = transport_budget_s
        self.slots: list[_Slot] = []
        self.facts: dict[str, Any] = {}

    def _new_actor(self) -> Any:
        credentials = _credentials(self.trial_settings)
        options: dict[str, Any] = {
            "num_cpus": self.settings.worker_cpus,
            "max_concurrency": self.concurrency + 2,  # the trials, plus health and close
            "max_restarts": 0,  # a dead worker is replaced by the driver, which knows what it held
        }
        if credentials:  # the key travels in the runtime environment only, never as an argument
            options["runtime_env"] = {"env_vars": credentials}
        return _TrialActor.options(**options).remote(
            self.settings.recipe,
            self.transport_budget_s,
            self.isolation,
            self.concurrency,
            self.golden_replay,
            self.sandbox_without,
        )

    async def start(self, connection: str, preflight_budget_s: float) -> None:
        workers = worker_count(self.settings)
        self.slots = [_Slot(self._new_actor()) for _ in range(workers)]
        calls = [_get(slot.handle.health.remote(preflight_budget_s)) for slot in self.slots]
        try:
            health = await asyncio.wait_for(asyncio.gather(*calls), STARTUP_BUDGET_S)
        except TimeoutError as error:
            raise RunnerUnavailableError(
                f"the {workers} Ray workers did not start within {STARTUP_BUDGET_S:g}s: is "
                "tolokaforge-host[ray] (the same version, the same Python) installed on every node?"
            ) from error
        except _WORKER_DIED as error:
            raise RunnerUnavailableError(f"a Ray worker died while starting: {error}") from error
        first = cast(dict[str, Any], health[0])
        self.facts = {
            "mode": "ray",
            "address": self.settings.address,
            "connection": connection,
            "ray_version": ray.__version__,
            "workers": workers,
            "worker_nodes": len({cast(dict[str, Any], h)["node"] for h in health}),
            "concurrency_per_worker": self.concurrency,
            "version": first["version"],
            "status": first["status"],
            "isolation": "one embedded runner per Ray worker process, state in its memory; "
            f"python tools: {self.isolation}",
            "db_service_connected": first["db_service_connected"],
            "tool_adapters": first["tool_adapters"],
        }

    def worker_pids(self) -> list[int]:
        """The workers' process ids, as they are now (tests kill one)."""
        return [
            int(cast(dict[str, Any], ray.get(slot.handle.health.remote(5.0)))["pid"]) for slot in self.slots
        ]

    def _replace(self, slot: _Slot, generation: int) -> None:
        if slot.generation != generation:  # another lane of the same dead worker got here first
            return
        with contextlib.suppress(Exception):
            ray.kill(slot.handle, no_restart=True)
        slot.handle = self._new_actor()
        slot.generation += 1

    def stop(self) -> None:
        for slot in self.slots:
            with contextlib.suppress(Exception):
                ray.kill(slot.handle, no_restart=True)
        self.slots = []

    async def run(
        self,
        todo: Sequence[tuple[LoadedTask, int]],
        on_outcome: Callable[[TrialOutcome], None],
        on_crash: Callable[[tuple[str, int], str], None],
    ) -> None:
        """Run every trial of ``todo``; each one ends in exactly one ``on_outcome`` or ``on_crash``."""
        queue: asyncio.Queue[_Job | None] = asyncio.Queue()
        for loaded, index in todo:
            queue.put_nowait(_Job(loaded, index))
        lanes = [(slot, lane) for slot in self.slots for lane in range(self.concurrency)]
        unfinished = len(todo)

        def finished() -> None:
            nonlocal unfinished
            unfinished -= 1
            if unfinished == 0:
                for _ in lanes:
                    queue.put_nowait(None)

        async def lane(slot: _Slot) -> None:
            while (job := await queue.get()) is not None:
                generation = slot.generation
                call = slot.handle.run_trial.remote(
                    job.loaded, job.index, self.trial_settings, job.first_attempt
                )
                key = (job.loaded.task_id, job.index)
                try:
                    outcome = cast(TrialOutcome, await _get(call))
                except _WORKER_DIED as error:
                    self._replace(slot, generation)
                    lost = self._lost(job, error)
                    if lost is not None:
                        on_outcome(lost)
                        finished()
                    else:
                        queue.put_nowait(job)
                    continue
                except RayTaskError as error:  # a host defect on one trial must not sink the others
                    cause = error.cause if isinstance(error.cause, BaseException) else error
                    on_crash(key, f"{type(cause).__name__}: {cause}")
                    finished()
                    continue
                outcome.lost_attempts = [*job.lost, *outcome.lost_attempts]
                on_outcome(outcome)
                finished()

        if not todo:
            return
        async with asyncio.TaskGroup() as group:
            for slot, _ in lanes:
                group.create_task(lane(slot))

    def _lost(self, job: _Job, error: BaseException) -> TrialOutcome | None:
        """Record the attempt the dead worker held; the final outcome once no attempt is left."""
        attempt_id = trial_id(job.loaded.task_id, job.index, job.first_attempt)
        reason = f"the Ray worker running it died: {type(error).__name__}"
        if job.first_attempt + 1 < self.trial_settings.max_attempts:
            job.lost.append(LostAttempt(attempt_id, reason))
            job.first_attempt += 1
            return None
        episode = Episode(termination=TerminationReason.TRIAL_LOST, error=reason)
        return TrialOutcome(job.loaded.task_id, job.index, attempt_id, episode, lost_attempts=job.lost)


@contextlib.asynccontextmanager
async def ray_pool(
    settings: RaySettings,
    *,
    concurrency: int,
    trial_settings: TrialSettings,
    transport_budget_s: float,
    preflight_budget_s: float,
    isolation: Isolation = "sandbox",
    golden_replay: GoldenReplay = "task",
    sandbox_without: tuple[str, ...] = (),
) -> AsyncGenerator[RayPool]:
    """Connected, workers started and health-checked; every worker killed on the way out."""
    with connected(settings.address) as connection:
        pool = RayPool(
            settings,
            concurrency,
            trial_settings,
            transport_budget_s,
            isolation,
            golden_replay,
            sandbox_without,
        )
        try:
            await pool.start(connection, preflight_budget_s)
            yield pool
        finally:
            pool.stop()
