"""What a loaded pack is: its tasks (runner-form TaskDescriptions), where they came from, what broke.

Built by the pack loader (loader.py) from a pack folder, or by the τ² adapter (tau2/) from installed
τ²-bench; everything downstream (run, validate, the pytest plugin) sees only these types.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tolokaforge.core.models import TaskDescription, ToolCode

from ..errors import PackProblem

__all__ = ["BrokenTask", "LoadedTask", "Pack", "PackReport", "SkippedTask"]


@dataclass(frozen=True)
class LoadedTask:
    """One task of a pack: the runner's TaskDescription plus where it came from."""

    task: TaskDescription
    task_file: Path

    @property
    def task_id(self) -> str:
        return self.task.task_id


@dataclass(frozen=True)
class SkippedTask:
    """A task that loads but cannot run on this machine (a terminal task whose container it cannot
    provide): never run, never counted as passed, listed with why in the run's output and summary."""

    task_id: str
    task_file: Path
    reason: str


@dataclass(frozen=True)
class Pack:
    root: Path
    name: str
    version: str
    tasks: tuple[LoadedTask, ...]
    tool_code: ToolCode | None
    requires: tuple[str, ...] = ()
    """pack.yaml ``requires``: the Python distributions the pack's code needs."""
    parts: tuple[Pack, ...] = ()
    """The packs a multi-pack run combined into this one (matrix.py); then ``root`` means nothing."""
    skipped: tuple[SkippedTask, ...] = ()
    """Tasks that load but cannot run here, each with its reason (docs/terminal.md)."""

    def task(self, task_id: str) -> LoadedTask:
        for loaded in self.tasks:
            if loaded.task_id == task_id:
                return loaded
        raise KeyError(task_id)


@dataclass(frozen=True)
class BrokenTask:
    """A task that did not load: its file, its id (the folder name when task.yaml gives none) and why."""

    task_file: Path
    task_id: str
    problems: tuple[PackProblem, ...]


@dataclass(frozen=True)
class PackReport:
    """What :func:`inspect_pack` found: the loadable part of the pack and every problem, by task."""

    pack: Pack
    """The pack with only the tasks that loaded."""
    broken: tuple[BrokenTask, ...]
    pack_problems: tuple[PackProblem, ...]
    """Problems of the pack as a whole (pack.yaml, a missing tasks/ folder), not of one task."""

    @property
    def problems(self) -> tuple[PackProblem, ...]:
        return self.pack_problems + tuple(p for task in self.broken for p in task.problems)
