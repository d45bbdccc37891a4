"""Several packs x several agent models as one run: one manifest, one ledger, one summary, one report.

Each (pack, model) pair is a *cell*. Every task of every pack becomes one task of the run per model,
named ``<pack>.<model>.<task_id>`` (``<pack>.<task_id>`` without models), so the run's usual machinery
-- trial files, signatures, the ledger, ``--resume`` -- works unchanged, and two packs may each have a
task with the same id. ``cells`` maps each run task back to its pack, model and own id: run.yaml records
it (under ``options.cells``), and the summary and the HTML report show one row per cell from it.

The agent of a trial is picked by its run task (:class:`CellAgents`), and sees the task under its own id
(a scripted agent's ``tasks:`` keys and a pack's checks read the pack's ids).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tolokaforge.core.models import TaskDescription

from ..agents.base import Agent, AgentFactory
from ..errors import ConfigError
from ..packs import LoadedTask, Pack

__all__ = ["Cell", "CellAgents", "combine_packs", "run_task_id"]

_MAX_TASK_ID = 160
"""TaskDescription's limit: a run task id longer than it is refused here, not at registration."""


@dataclass(frozen=True)
class Cell:
    pack: str
    model: str | None
    task_id: str
    """The task's id in its own pack."""


def _label(text: str) -> str:
    """A name as a task-id part: characters a task id may not hold become '-'."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", text).strip("-.") or "x"


def run_task_id(pack: str, model: str | None, task_id: str) -> str:
    return ".".join(part for part in (_label(pack), _label(model) if model else None, task_id) if part)


def combine_packs(packs: Sequence[Pack], models: Sequence[str | None]) -> tuple[Pack, dict[str, Cell]]:
    """One pack holding every task of ``packs`` once per model, and the cell of each of its tasks."""
    names = [pack.name for pack in packs]
    doubled = sorted({name for name in names if names.count(name) > 1})
    if doubled:
        raise ConfigError(
            f"evaluation.task_packs: two packs are named {', '.join(doubled)}; cells need distinct packs"
        )
    tasks: list[LoadedTask] = []
    cells: dict[str, Cell] = {}
    for pack in packs:
        for model in models:
            for loaded in pack.tasks:
                task_id = run_task_id(pack.name, model, loaded.task_id)
                if len(task_id) > _MAX_TASK_ID:
                    raise ConfigError(
                        f"the run task {task_id!r} is longer than a task id may be ({_MAX_TASK_ID})"
                    )
                if task_id in cells:
                    raise ConfigError(f"two cells name the run task {task_id!r}: rename a pack or a model")
                cells[task_id] = Cell(pack.name, model, loaded.task_id)
                task = loaded.task.model_copy(update={"task_id": task_id})
                tasks.append(LoadedTask(task=task, task_file=loaded.task_file))
    combined = Pack(
        root=Path("."),
        name="+".join(names),
        version="",
        tasks=tuple(tasks),
        tool_code=None,
        requires=tuple(r for pack in packs for r in pack.requires),
        parts=tuple(packs),
    )
    return combined, cells


class CellAgents:
    """Hands each trial the agent of its cell's model; the agent sees the task under its own id."""

    def __init__(
        self, name: str, by_model: Mapping[str | None, AgentFactory], cells: Mapping[str, Cell]
    ) -> None:
        self._name = name
        self._by_model = dict(by_model)
        self._cells = dict(cells)

    @property
    def name(self) -> str:
        return self._name

    @property
    def model(self) -> str | None:
        models = [model for model in self._by_model if model]
        return ", ".join(models) or None

    def for_trial(self, task: TaskDescription) -> Agent:
        cell = self._cells[task.task_id]
        own = task.model_copy(update={"task_id": cell.task_id})
        return self._by_model[cell.model].for_trial(own)
