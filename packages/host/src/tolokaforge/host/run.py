"""A run: every selected task x trial index, through one runner, ``concurrency`` trials at a time.

One event loop; an asyncio semaphore bounds the trials in flight. Each finished trial is written at
once (so an interrupted run can ``resume``), then the summary is computed from the files.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .agents.base import AgentFactory
from .conductor import TrialOutcome, TrialSettings, run_trial
from .errors import ConfigError
from .packs.loader import LoadedTask, Pack
from .results import configured_components, is_finished, trial_dir, write_outcome
from .runner_client import open_runner
from .summary import RunSummary, summarise, write_summary
from .users.base import UserSimulatorFactory

__all__ = ["RunObserver", "RunSettings", "run_pack"]


@dataclass(frozen=True)
class RunSettings:
    output: Path
    trials: int = 1
    concurrency: int = 4
    runner: str | None = None
    """``host:port`` of a running runner; None starts the embedded one."""
    resume: bool = False
    task_ids: tuple[str, ...] = ()
    max_attempts: int = 3
    default_max_turns: int = 30
    transport_budget_s: float = 30.0


class RunObserver(Protocol):
    def started(self, total: int, skipped: int) -> None: ...

    def trial_done(self, outcome: TrialOutcome) -> None: ...


class _Silent:
    def started(self, total: int, skipped: int) -> None:
        return None

    def trial_done(self, outcome: TrialOutcome) -> None:
        return None


def _select(pack: Pack, task_ids: tuple[str, ...]) -> list[LoadedTask]:
    if not task_ids:
        return list(pack.tasks)
    known = {loaded.task_id: loaded for loaded in pack.tasks}
    unknown = [task_id for task_id in task_ids if task_id not in known]
    if unknown:
        raise ConfigError(f"--task names no task of pack {pack.name}: {', '.join(unknown)}")
    return [known[task_id] for task_id in dict.fromkeys(task_ids)]


async def run_pack(
    pack: Pack,
    agents: AgentFactory,
    users: UserSimulatorFactory,
    settings: RunSettings,
    observer: RunObserver | None = None,
) -> RunSummary:
    """Run the pack and write results under ``settings.output``; returns the summary (also written)."""
    if settings.trials < 1 or settings.concurrency < 1:
        raise ConfigError("--trials and --concurrency must be at least 1")
    observer = observer or _Silent()
    tasks = _select(pack, settings.task_ids)
    keys = [(loaded, index) for loaded in tasks for index in range(settings.trials)]
    finished = [is_finished(trial_dir(settings.output, loaded.task_id, index)) for loaded, index in keys]
    if any(finished) and not settings.resume:
        raise ConfigError(
            f"{settings.output} already holds finished trials: pass --resume to continue that run, "
            "or choose another --output"
        )
    todo = [key for key, done in zip(keys, finished, strict=True) if not done]
    summary = RunSummary(pack=pack.name, agent=agents.name, trials_per_task=settings.trials)
    summary.skipped = len(keys) - len(todo)
    observer.started(len(keys), summary.skipped)
    settings.output.mkdir(parents=True, exist_ok=True)
    trial_settings = TrialSettings(
        run_id=settings.output.name,
        max_attempts=settings.max_attempts,
        default_max_turns=settings.default_max_turns,
    )
    started = time.perf_counter()
    if todo:
        async with open_runner(settings.runner, transport_budget_s=settings.transport_budget_s) as runner:
            gate = asyncio.Semaphore(settings.concurrency)

            async def one(loaded: LoadedTask, index: int) -> None:
                async with gate:
                    outcome = await run_trial(runner, loaded, index, agents, users, trial_settings)
                write_outcome(settings.output, outcome, configured_components(loaded.task.grading))
                observer.trial_done(outcome)

            async with asyncio.TaskGroup() as group:
                for loaded, index in todo:
                    group.create_task(one(loaded, index))
    summary.wall_time_s = time.perf_counter() - started
    summary.ran = len(todo)
    summarise(settings.output, [(loaded.task_id, index) for loaded, index in keys], summary)
    write_summary(settings.output, summary)
    return summary
