"""Environments stepped on Ray workers: the policy stays in the caller's process, the episodes do not.

Each worker is a Ray actor with its own embedded runner (as a ``tolokaforge run --ray`` worker has)
holding many episodes at once; an environment here is a proxy that sends reset, step and finish to one
worker and keeps the conversation the caller reads. Finished trials come back whole (the TrialOutcome)
and are written by the driver, so a Ray run folder is the same as an embedded one. Environments are
spread over the workers round robin.

Calls are batched by default: the resets, the steps and the finishes bound for one worker within one
turn of the caller's event loop go as one actor call per kind (:meth:`EnvWorker.batch`), and the answers
are handed back to each caller. A Ray actor call costs about 1 ms of CPU across driver and worker,
more than a step's own work on the embedded runner; with many episodes in flight, batching pays it once
per kind, worker and loop turn. A batch's calls for one episode run in order, a call's error is its
caller's alone, and a reset or step whose caller was cancelled before its batch was sent is left out.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import traceback
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from tolokaforge.host import (
    AgentRecipe,
    LoadedTask,
    Pack,
    TrialOutcome,
    TrialSettings,
    llm_session,
    open_runner,
    ray_api,
    ray_connection,
)

from .episode import EnvParts, LocalEnv
from .shapes import Observation, Reward, StepInfo

__all__ = ["EnvWorker", "EnvWorkerError", "RayEnv", "RayEnvPool", "open_ray_pool"]

ray = ray_api()

StepAnswer = tuple[Observation, bool, StepInfo, list[dict[str, Any]]]
"""What a worker's step returns: the observation, done, the step's info, the messages it recorded."""


class EnvWorkerError(RuntimeError):
    """An error raised on a worker that could not travel back as itself (it does not pickle)."""

    def __init__(self, kind: str, text: str) -> None:
        super().__init__(f"{kind} on a Ray env worker: {text}")
        self.kind = kind
        self.text = text

    def __reduce__(self) -> tuple[type[EnvWorkerError], tuple[str, str]]:
        return (EnvWorkerError, (self.kind, self.text))


@dataclass(frozen=True)
class _Reset:
    key: int
    task_id: str
    index: int
    seed: int


@dataclass(frozen=True)
class _Step:
    key: int
    message: dict[str, Any]


@dataclass(frozen=True)
class _Finish:
    key: int


_Call = _Reset | _Step | _Finish
_Answer = tuple[bool, Any]
"""One item's answer in a batch: (True, its result) or (False, the exception it raised)."""


def _portable(error: Exception) -> Exception:
    """``error`` as it can cross back to the driver: itself (with the worker's traceback as a note) when
    it pickles, else an :class:`EnvWorkerError` naming it. One item that does not unpickle would fail
    the whole batch's answer, so this is checked here, on the worker."""
    where = "".join(traceback.format_exception(error)).rstrip()
    try:
        portable = cast(Exception, ray.cloudpickle.loads(ray.cloudpickle.dumps(error)))
    except Exception:
        return EnvWorkerError(type(error).__name__, str(error))
    portable.add_note(f"raised on a Ray env worker:\n{where}")
    return portable


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
        self._batches = self._batched = 0

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

    async def step(self, key: int, message: dict[str, Any]) -> StepAnswer:
        env = self._envs[key]
        before = len(env.messages)
        observation, done, info = await env.step(message)
        return observation, done, info, env.messages[before:]

    async def finish(self, key: int) -> TrialOutcome | None:
        """The episode's trial, graded when it ended gradeably, released; the environment forgotten."""
        env = self._envs.pop(key, None)
        return await env.close() if env is not None else None

    async def batch(self, calls: list[_Call]) -> list[_Answer]:
        """Many calls in one: each episode's calls in the order given, episodes concurrently; each call
        answers with its result or its own exception, so one episode's failure is not another's."""
        self._batches += 1
        self._batched += len(calls)
        answers: list[_Answer] = [(False, None)] * len(calls)
        by_key: dict[int, list[int]] = {}
        for number, call in enumerate(calls):
            by_key.setdefault(call.key, []).append(number)

        async def run(numbers: list[int]) -> None:
            for number in numbers:
                try:
                    answers[number] = (True, await self._one(calls[number]))
                except Exception as error:
                    answers[number] = (False, _portable(error))

        await asyncio.gather(*(run(numbers) for numbers in by_key.values()))
        return answers

    async def counts(self) -> dict[str, int]:
        """How many batches this worker took, how many calls they held, how many episodes it holds."""
        return {"batches": self._batches, "calls": self._batched, "episodes": len(self._envs)}

    async def _one(self, call: _Call) -> Observation | StepAnswer | TrialOutcome | None:
        match call:
            case _Reset(key, task_id, index, seed):
                return await self.reset(key, task_id, index, seed)
            case _Step(key, message):
                return await self.step(key, message)
            case _Finish(key):
                return await self.finish(key)

    async def shutdown(self) -> None:
        for key in list(self._envs):
            await self.finish(key)
        await self._stack.aclose()


class _Direct:
    """Each call its own actor call (``ray_batch=False``)."""

    def __init__(self, worker: Any) -> None:
        self._worker = worker

    async def call(self, call: _Call) -> Any:
        match call:
            case _Reset(key, task_id, index, seed):
                return await self._worker.reset.remote(key, task_id, index, seed)
            case _Step(key, message):
                return await self._worker.step.remote(key, message)
            case _Finish(key):
                return await self._worker.finish.remote(key)


class _Batched:
    """Calls bound for one worker, coalesced: those of one kind made in one turn of the loop go as one
    actor call.

    The first call of a kind in a turn schedules that kind's flush with ``call_soon``, so it runs after
    every callback already ready in this turn, the ones that will make more calls included. Resets,
    steps and finishes travel apart because a batch answers when its slowest call is done: a finish
    waits for its grade and a reset for its registration, and a step should not wait for either. A batch
    is awaited by a task of its own, not by any caller's, so a caller cancelled meanwhile loses only its
    own answer.
    """

    def __init__(self, worker: Any) -> None:
        self._worker = worker
        self._pending: dict[type[_Call], list[tuple[_Call, asyncio.Future[Any]]]] = {}
        self._sending: set[asyncio.Task[None]] = set()

    async def call(self, call: _Call) -> Any:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Any] = loop.create_future()
        kind = type(call)
        pending = self._pending.setdefault(kind, [])
        pending.append((call, answer))
        if len(pending) == 1:
            loop.call_soon(self._flush, kind)
        return await answer

    def _flush(self, kind: type[_Call]) -> None:
        # A reset or step whose caller was cancelled is not sent; a finish always is: its caller has
        # already let go of the episode's key, so nothing else would release the trial.
        pending = self._pending.pop(kind, [])
        batch = [(call, answer) for call, answer in pending if kind is _Finish or not answer.done()]
        if batch:
            sending = asyncio.ensure_future(self._send(batch))
            self._sending.add(sending)  # held: the loop keeps only a weak reference to a task
            sending.add_done_callback(self._sending.discard)

    async def _send(self, batch: list[tuple[_Call, asyncio.Future[Any]]]) -> None:
        try:
            answers = cast(list[_Answer], await self._worker.batch.remote([call for call, _ in batch]))
        except Exception as error:  # the worker died, or the batch could not be sent or fetched
            for _, answer in batch:
                if not answer.done():
                    answer.set_exception(error)
            return
        except BaseException:  # this task cancelled (the loop is closing): so are the calls it carried
            for _, answer in batch:
                answer.cancel()
            raise
        for (_, answer), (ok, value) in zip(batch, answers, strict=True):
            if answer.done():  # its caller was cancelled while the batch was out
                continue
            if ok:
                answer.set_result(value)
            else:
                answer.set_exception(cast(Exception, value))


class RayEnv:
    """One environment whose episodes run on a Ray worker (the :class:`~.episode.Env` interface)."""

    def __init__(self, pool: RayEnvPool, calls: _Direct | _Batched) -> None:
        self._pool = pool
        self._calls = calls
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
        observation = cast(Observation, await self._calls.call(_Reset(self._key, task_id, index, seed)))
        self._view, self._done = list(observation.messages), observation.done
        return observation

    async def step(self, message: Mapping[str, Any]) -> tuple[Observation, bool, StepInfo]:
        if self._key is None or self._done:
            raise RuntimeError("step() needs an episode in progress: call reset() first")
        answer = await self._calls.call(_Step(self._key, dict(message)))
        observation, done, info, recorded = cast(StepAnswer, answer)
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
        assert key is not None
        outcome = cast(TrialOutcome | None, await self._calls.call(_Finish(key)))
        if outcome is not None and self._pool.on_outcome is not None:
            self._pool.on_outcome(outcome)
        return outcome


class RayEnvPool:
    def __init__(
        self, pack: Pack, workers: list[Any], trial_index: Callable[[str, int], int], batch: bool = True
    ) -> None:
        self.tasks = {loaded.task_id: loaded for loaded in pack.tasks}
        self.workers = workers
        self.trial_index = trial_index
        self.keys = itertools.count()
        self.on_outcome: Callable[[TrialOutcome], None] | None = None
        self.facts: dict[str, Any] = {}
        calls = [_Batched(worker) if batch else _Direct(worker) for worker in workers]
        self._next = itertools.cycle(calls)  # one batcher per worker, shared by its environments

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
    batch: bool = True,
) -> AsyncGenerator[RayEnvPool]:
    """Connected to the cluster at ``address``, one worker per CPU (at most ``workers``), each health-checked.
    ``batch``: coalesce the calls bound for one worker within one loop turn into one actor call."""
    with ray_connection(address) as how:
        cpus = int(float(cast(dict[str, float], ray.cluster_resources()).get("CPU", 1.0)))
        count = max(1, min(cpus, workers) if workers is not None else cpus)
        actor = ray.remote(EnvWorker).options(num_cpus=1, max_concurrency=4096, max_restarts=0)
        tasks = {loaded.task_id: loaded for loaded in pack.tasks}
        handles = [actor.remote(tasks, settings, isolation, recipe) for _ in range(count)]
        try:
            health = [await handle.health.remote() for handle in handles]
            pool = RayEnvPool(pack, handles, trial_index, batch)
            pool.facts = {
                "mode": "ray",
                "address": address,
                "connection": how,
                "workers": count,
                "batched_calls": batch,
                "version": cast(Mapping[str, Any], health[0])["version"],
            }
            yield pool
        finally:
            for handle in handles:
                with contextlib.suppress(Exception):
                    await handle.shutdown.remote()
                with contextlib.suppress(Exception):
                    ray.kill(handle, no_restart=True)
