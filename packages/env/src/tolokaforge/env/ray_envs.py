"""Environments stepped on Ray workers: the policy stays in the caller's process, the episodes do not.

Each worker is a Ray actor with its own embedded runner (as a ``tolokaforge run --ray`` worker has)
holding many episodes at once; an environment here is a proxy that sends reset, step and finish to one
worker and keeps the conversation the caller reads. Finished trials come back whole (the TrialOutcome)
and are written by the driver, so a Ray run folder is the same as an embedded one. Environments are
spread over the workers round robin.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any, cast

import ray as _ray_module

from tolokaforge.host import (
    AgentRecipe,
    LoadedTask,
    Pack,
    TrialOutcome,
    TrialSettings,
    llm_session,
    open_runner,
    ray_connection,
)

from .episode import EnvParts, LocalEnv
from .shapes import Observation, Reward, StepInfo

__all__ = ["EnvWorker", "RayEnv", "RayEnvPool", "open_ray_pool"]

ray = cast(Any, _ray_module)


class EnvWorker:
    """Ray makes this an actor (:class:`RayEnvPool`); its methods are called through Ray only."""

    def __init__(
        self, tasks: dict[str, LoadedTask], settings: TrialSettings, isolation: str, recipe: AgentRecipe
    ) -> None:
        self._tasks = tasks
        self._settings = settings
        self._isolation = isolation
        self._recipe = recipe
        self._stack = contextlib.AsyncExitStack()
        self._parts: EnvParts | None = None
        self._envs: dict[int, LocalEnv] = {}
        self._lock: asyncio.Lock | None = None

    async def _ready(self) -> EnvParts:
        if self._lock is None:  # made on the actor's own loop, which does not run in __init__
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._parts is None:
                runner = await self._stack.enter_async_context(
                    open_runner(None, isolation=cast(Any, self._isolation))
                )
                session = await self._stack.enter_async_context(llm_session(64))
                _, users = self._recipe.build(session)
                self._parts = EnvParts(runner, self._tasks, users, self._settings, lambda _task, seed: seed)
            return self._parts

    async def health(self) -> dict[str, Any]:
        parts = await self._ready()
        health = await parts.runner.health(budget_s=30.0)
        return {"version": health.version, "status": health.status}

    async def reset(self, key: int, task_id: str, index: int, seed: int) -> Observation:
        def given(_task: str, _seed: int) -> int:
            return index  # the driver numbers the trials of the whole run

        parts = dataclasses.replace(await self._ready(), trial_index=given)
        env = LocalEnv(parts)
        self._envs[key] = env
        return await env.reset(task_id, seed)

    async def step(
        self, key: int, message: dict[str, Any]
    ) -> tuple[Observation, bool, StepInfo, list[dict[str, Any]]]:
        env = self._envs[key]
        before = len(env.messages)
        observation, done, info = await env.step(message)
        return observation, done, info, env.messages[before:]

    async def finish(self, key: int) -> TrialOutcome | None:
        """The episode's trial, graded when it ended gradeably, released; the environment forgotten."""
        env = self._envs.pop(key, None)
        return await env.close() if env is not None else None

    async def shutdown(self) -> None:
        for key in list(self._envs):
            await self.finish(key)
        await self._stack.aclose()


class RayEnv:
    """One environment whose episodes run on a Ray worker (the :class:`~.episode.Env` interface)."""

    def __init__(self, pool: RayEnvPool, worker: Any) -> None:
        self._pool = pool
        self._worker = worker
        self._key: int | None = None
        self._view: list[dict[str, Any]] = []
        self._done = False
        self._reward: Reward | None = None
        self.trial_id = ""
        self.task_id = ""
        self.seed = 0

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self._view)

    @property
    def done(self) -> bool:
        return self._done

    async def reset(self, task_id: str, seed: int = 0) -> Observation:
        await self.close()
        if task_id not in self._pool.tasks:
            raise KeyError(f"no task {task_id!r} in this pack")
        index = self._pool.trial_index(task_id, seed)
        self._key = next(self._pool.keys)
        self.task_id, self.seed, self.trial_id = task_id, seed, f"{task_id}:{index}"
        self._reward = None
        observation = cast(Observation, await self._worker.reset.remote(self._key, task_id, index, seed))
        self._view, self._done = list(observation.messages), observation.done
        return observation

    async def step(self, message: Mapping[str, Any]) -> tuple[Observation, bool, StepInfo]:
        if self._key is None or self._done:
            raise RuntimeError("step() needs an episode in progress: call reset() first")
        answer = await self._worker.step.remote(self._key, dict(message))
        observation, done, info, recorded = cast(
            tuple[Observation, bool, StepInfo, list[dict[str, Any]]], answer
        )
        self._view.extend(recorded)
        self._done = done
        return observation, done, info

    async def reward(self) -> Reward:
        if self._reward is None:
            if self._key is None or not self._done:
                raise RuntimeError("the episode is not over yet: step() until done, or close() it")
            outcome = await self._finish()
            assert outcome is not None
            self._reward = Reward.of(outcome, self._pool.tasks[self.task_id].task.grading)
        return self._reward

    async def close(self) -> TrialOutcome | None:
        return await self._finish() if self._key is not None else None

    async def _finish(self) -> TrialOutcome | None:
        key, self._key = self._key, None
        self._done = True
        outcome = cast(TrialOutcome | None, await self._worker.finish.remote(key))
        if outcome is not None and self._pool.on_outcome is not None:
            self._pool.on_outcome(outcome)
        return outcome


class RayEnvPool:
    def __init__(self, pack: Pack, workers: list[Any], trial_index: Callable[[str, int], int]) -> None:
        self.tasks = {loaded.task_id: loaded for loaded in pack.tasks}
        self.workers = workers
        self.trial_index = trial_index
        self.keys = itertools.count()
        self.on_outcome: Callable[[TrialOutcome], None] | None = None
        self.facts: dict[str, Any] = {}
        self._next = itertools.cycle(workers)

    def env(self) -> RayEnv:
        return RayEnv(self, next(self._next))


@contextlib.asynccontextmanager
async def open_ray_pool(
    address: str,
    pack: Pack,
    settings: TrialSettings,
    isolation: str,
    recipe: AgentRecipe,
    trial_index: Callable[[str, int], int],
    workers: int | None = None,
) -> AsyncGenerator[RayEnvPool]:
    """Connected to the cluster at ``address``, one worker per CPU (at most ``workers``), each health-checked."""
    with ray_connection(address) as how:
        cpus = int(float(cast(dict[str, float], ray.cluster_resources()).get("CPU", 1.0)))
        count = max(1, min(cpus, workers) if workers is not None else cpus)
        actor = ray.remote(EnvWorker).options(num_cpus=1, max_concurrency=4096, max_restarts=0)
        tasks = {loaded.task_id: loaded for loaded in pack.tasks}
        handles = [actor.remote(tasks, settings, isolation, recipe) for _ in range(count)]
        try:
            health = [await handle.health.remote() for handle in handles]
            pool = RayEnvPool(pack, handles, trial_index)
            pool.facts = {
                "mode": "ray",
                "address": address,
                "connection": how,
                "workers": count,
                "version": cast(Mapping[str, Any], health[0])["version"],
            }
            yield pool
        finally:
            for handle in handles:
                with contextlib.suppress(Exception):
                    await handle.shutdown.remote()
                with contextlib.suppress(Exception):
                    ray.kill(handle, no_restart=True)
