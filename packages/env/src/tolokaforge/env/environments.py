"""A pack opened as environments: loaded once, one runner shared, every trial written to one run folder.

``Environments.open`` loads the pack, opens the runner (the embedded one by default, a running one by
address, or a :class:`Runner` the caller already holds) or a pool of Ray workers, and, given an
``output`` folder, records every finished trial there as ``tolokaforge run --output`` does. Each
:meth:`Environments.env` is one gym-style environment over them.
"""

from __future__ import annotations

import contextlib
import os
import weakref
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from tolokaforge.core.runner_api import Runner
from tolokaforge.host import (
    AgentRecipe,
    LLMOptions,
    LoadedTask,
    Pack,
    RunRecorder,
    TrialSettings,
    UserRouter,
    UserSimulatorFactory,
    llm_session,
    load_pack,
    open_runner,
)

from .episode import Env, EnvParts, LocalEnv

if TYPE_CHECKING:
    from .ray_envs import RayEnvPool

__all__ = ["Environments", "Isolation"]

Isolation = Literal["sandbox", "process", "thread"]
_DEFAULT_BASE_URL = "https://api.openai.com/v1"


@dataclass
class _TrialIndices:
    """Trial indices by task: the seed when it is free (so a seed names its trial), else the next free one."""

    used: dict[str, set[int]] = field(default_factory=dict[str, set[int]])

    def __call__(self, task_id: str, seed: int) -> int:
        taken = self.used.setdefault(task_id, set())
        index = seed if seed >= 0 and seed not in taken else max(taken, default=-1) + 1
        taken.add(index)
        return index


def user_recipe(user: str | None, pack: Pack) -> AgentRecipe:
    """Who plays the simulated users: an LLM user on model ``user`` (key and endpoint as the CLI reads
    them), else the scripted users, and the stand-in user for tasks that want an LLM user."""
    base_url = (
        os.environ.get("TOLOKAFORGE_LLM_BASE_URL") or os.environ.get("OPENAI_BASE_URL") or _DEFAULT_BASE_URL
    )
    llm = LLMOptions(model=None, user_model=user, base_url=base_url, prices=None)
    llm_users = any(t.task.user_simulator and t.task.user_simulator.mode == "llm" for t in pack.tasks)
    return AgentRecipe.of("golden", llm, None, llm_users)


class Environments:
    """The pack's tasks as environments; open with ``async with Environments.open(pack) as envs``."""

    def __init__(
        self,
        pack: Pack,
        parts: EnvParts | None,
        recorder: RunRecorder | None,
        ray_pool: RayEnvPool | None = None,
    ) -> None:
        self.pack = pack
        self._parts = parts
        self._ray = ray_pool
        self.recorder = recorder
        self.tasks: dict[str, LoadedTask] = {loaded.task_id: loaded for loaded in pack.tasks}
        self._live: weakref.WeakSet[Any] = weakref.WeakSet()
        """Every environment made, while referenced: an episode left going is ended on the way out."""

    @property
    def task_ids(self) -> list[str]:
        return list(self.tasks)

    @property
    def output(self) -> Path | None:
        return self.recorder.output if self.recorder is not None else None

    def env(self) -> Env:
        """A new environment (one episode at a time); make as many as you run episodes at once."""
        env: Env
        if self._ray is not None:
            env = self._ray.env()
        else:
            assert self._parts is not None
            env = LocalEnv(self._parts)
        self._live.add(env)
        return env

    async def aclose_envs(self) -> None:
        """End every episode still going (recorded as ``error``, not graded) and release its trial."""
        for env in list(self._live):
            with contextlib.suppress(Exception):
                await cast(Env, env).close()

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls,
        pack: str | Path | Pack,
        *,
        output: str | Path | None = None,
        runner: str | Runner | None = None,
        ray: bool | str = False,
        ray_batch: bool = True,
        isolation: Isolation | None = None,
        user: str | UserSimulatorFactory | None = None,
        max_turns: int = 30,
        split: str | None = None,
    ) -> AsyncGenerator[Environments]:
        """Load ``pack`` (a folder, ``tau2:<domain>`` or a loaded :class:`Pack`) and open its runner.

        ``runner``: None starts the embedded runner (python tools isolated as ``isolation`` says, default
        ``sandbox``), a ``host:port`` string connects to a running one, a :class:`Runner` is used as is.
        ``ray``: True (a local cluster, or the connection this process already has) or a Ray address:
        episodes step on Ray workers, each with its own embedded runner; ``ray_batch``: the calls bound
        for one worker within one turn of the event loop go as one actor call (False: one call each).
        ``user``: the simulated user's
        model name for tasks with an LLM user (else the scripted users; an LLM-user task gets the
        stand-in user), or a user factory for those tasks. ``output``: a new folder that every finished
        trial is written to, with ``run.yaml`` and, on leaving, ``summary.yaml``.
        """
        loaded = (
            pack
            if isinstance(pack, Pack)
            else load_pack(Path(pack), split=split, isolation=isolation or "sandbox")
        )
        settings = TrialSettings(
            run_id=Path(output).name if output else "env", max_attempts=1, default_max_turns=max_turns
        )
        indices = _TrialIndices()
        async with contextlib.AsyncExitStack() as stack:
            facts: dict[str, Any]
            ray_pool: RayEnvPool | None = None
            parts: EnvParts | None = None
            if ray:
                if runner is not None or not (user is None or isinstance(user, str)):
                    raise ValueError("ray=... embeds a runner per worker and takes a user model name only")
                from .ray_envs import open_ray_pool  # Ray costs seconds to import: only when asked

                address = ray if isinstance(ray, str) else "local"
                ray_pool = await stack.enter_async_context(
                    open_ray_pool(
                        address,
                        loaded,
                        settings,
                        isolation or "sandbox",
                        user_recipe(user, loaded),
                        indices,
                        batch=ray_batch,
                    )
                )
                facts = ray_pool.facts
            else:
                if runner is None or isinstance(runner, str):
                    opened = await stack.enter_async_context(
                        open_runner(runner, isolation=isolation or "sandbox")
                    )
                    facts = {
                        "mode": "remote" if runner else "embedded",
                        "address": runner or "in this process",
                    }
                else:
                    opened = runner
                    facts = {"mode": "caller's runner", "address": runner.address}
                users: UserSimulatorFactory
                if user is None or isinstance(user, str):
                    session = await stack.enter_async_context(llm_session(64))
                    _, users = user_recipe(user, loaded).build(session)
                else:
                    users = UserRouter(llm=user)
                parts = EnvParts(opened, {t.task_id: t for t in loaded.tasks}, users, settings, indices)
            recorder: RunRecorder | None = None
            if output is not None:
                recorder = RunRecorder(
                    Path(output),
                    loaded,
                    agent="env",
                    runner=facts,
                    options={"called_from": "tolokaforge.env"},
                )
                recorder.open()
                if parts is not None:
                    parts = EnvParts(
                        parts.runner, parts.tasks, parts.users, settings, indices, on_outcome=recorder.write
                    )
                if ray_pool is not None:
                    ray_pool.on_outcome = recorder.write
            envs = cls(loaded, parts, recorder, ray_pool)
            try:
                yield envs
            finally:
                await envs.aclose_envs()
                if recorder is not None:
                    await recorder.close()
