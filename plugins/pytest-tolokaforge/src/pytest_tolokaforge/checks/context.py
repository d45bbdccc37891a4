"""What a per-task check is given, and the session memo the golden-path checks share."""

from __future__ import annotations

from dataclasses import dataclass

from tolokaforge.contracts.runner import ToolSchema
from tolokaforge.core.runner_api import RunnerError
from tolokaforge.host import HostError, LoadedTask, Pack, build_trial_spec

from ..errors import CheckFailure
from ..replay import RUN_ID, GoldenReplay, golden_replay, judged_task
from ..session import ToloSession

__all__ = ["TaskContext"]


@dataclass(frozen=True)
class TaskContext:
    session: ToloSession
    pack: Pack
    loaded: LoadedTask

    @property
    def key(self) -> str:
        return f"{self.pack.root}::{self.loaded.task_id}"

    async def first_replay(self) -> GoldenReplay:
        """The task's first golden replay (graded), shared by the golden and determinism checks."""
        memo: dict[str, GoldenReplay] = self.session.caches.setdefault("golden", {})
        if self.key not in memo:
            task, _ = judged_task(self.loaded.task)
            memo[self.key] = await golden_replay(self.session, task)
        return memo[self.key]

    async def agent_tools(self) -> tuple[ToolSchema, ...]:
        """The agent tools the runner registers for this task (from a replay when one ran)."""
        replay = self.session.caches.setdefault("golden", {}).get(self.key)
        if replay is not None and replay.registered is not None:
            return replay.registered.agent_tools
        client = (await self.session.connection()).client
        spec = build_trial_spec(self.loaded.task, run_id=RUN_ID, trial_index=self.session.next_trial_index())
        try:
            registered = await client.register(spec)
        except (HostError, RunnerError) as error:
            raise CheckFailure(f"the runner refused to register the task: {error}") from error
        try:
            return registered.agent_tools
        finally:
            await client.release(spec.trial_id)
