"""Several results folders side by side (``tolokaforge report RUN RUN [...]``): plain data, no HTML.

Each run is collected and verified exactly as for its own report (collect.py), and every figure is its
``RunSummary``'s (pass^k, pass@k, pass rate, tokens, cost), per run and per task category, so a
comparison never disagrees with the single-run pages. ``k`` is the fewest trials per task of any run,
so the runs' pass^k and pass@k count the same draws.

Tasks are matched by id. The first run is the baseline: a task is *newly failing* when a later run
passes fewer of its trials (passed / trials) than the baseline did, *newly passing* when a later run
passes more and none fewer, *unchanged* when every run passes the same share, and *not in every run*
when some run did not select it. Newly failing tasks come first, the largest drop first.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from ..results.summary import RunSummary, TaskRow
from .collect import UNCATEGORISED, ReportData, collect

__all__ = ["CHANGES", "CategoryRow", "Change", "Comparison", "RunColumn", "TaskChange", "compare"]

Change = Literal["newly failing", "newly passing", "unchanged", "not in every run"]
CHANGES: tuple[Change, ...] = ("newly failing", "newly passing", "unchanged", "not in every run")


@dataclass(frozen=True)
class RunColumn:
    label: str
    """The run's folder name, or the path as given when two runs share a folder name."""
    data: ReportData

    @property
    def summary(self) -> RunSummary:
        return self.data.summary


@dataclass(frozen=True)
class CategoryRow:
    category: str
    per_run: list[RunSummary | None]
    """Each run's summary over this category's trials; None for a run without such a task."""


@dataclass(frozen=True)
class TaskChange:
    task_id: str
    category: str
    change: Change
    per_run: list[TaskRow | None]
    """The task's row in each run's summary; None for a run that did not select it."""
    drop: float
    """The baseline's pass share minus the lowest later one (how far it fell; 0 when it did not)."""


@dataclass(frozen=True)
class Comparison:
    runs: list[RunColumn]
    k: int
    categories: list[CategoryRow]
    changes: list[TaskChange]
    packs_differ: bool
    """The runs' packs differ in name, version or content: tasks are still matched by id."""

    def count(self, change: Change) -> int:
        return sum(task.change == change for task in self.changes)


def _labels(run_dirs: list[Path]) -> list[str]:
    names = [run_dir.name or str(run_dir) for run_dir in run_dirs]
    return [
        name if names.count(name) == 1 else str(run_dir)
        for name, run_dir in zip(names, run_dirs, strict=True)
    ]


def _change(rows: list[TaskRow | None]) -> tuple[Change, float]:
    if any(row is None for row in rows):
        return "not in every run", 0.0
    shares = [row.pass_rate for row in rows if row is not None]
    baseline, later = shares[0], shares[1:]
    if any(share < baseline for share in later):
        return "newly failing", baseline - min(later)
    if any(share > baseline for share in later):
        return "newly passing", 0.0
    return "unchanged", 0.0


def _categories(runs: list[RunColumn]) -> list[CategoryRow]:
    cuts = [run.data.per_category() for run in runs]
    names = sorted({name for cut in cuts for name in cut}, key=lambda name: (name == UNCATEGORISED, name))
    return [CategoryRow(name, [cut.get(name) for cut in cuts]) for name in names]


def _task_changes(runs: list[RunColumn]) -> list[TaskChange]:
    tables = [{task.task_id: task for task in run.summary.tasks()} for run in runs]
    task_ids = list(dict.fromkeys(task_id for table in tables for task_id in table))
    changes: list[TaskChange] = []
    for task_id in task_ids:
        rows = [table.get(task_id) for table in tables]
        change, drop = _change(rows)
        category = next(
            (run.data.categories[task_id] for run in runs if task_id in run.data.categories), UNCATEGORISED
        )
        changes.append(TaskChange(task_id, category, change, rows, drop))
    # Stable: within a group (and a drop), tasks keep the order the runs list them in.
    return sorted(changes, key=lambda task: (CHANGES.index(task.change), -task.drop))


def _pack_key(data: ReportData) -> tuple[object, object, object]:
    pack = cast(dict[str, Any], (data.manifest or {}).get("pack") or {})
    return (pack.get("name") or data.summary.pack, pack.get("version"), pack.get("digest"))


def compare(run_dirs: list[Path]) -> Comparison:
    runs = [
        RunColumn(label, collect(run_dir)) for label, run_dir in zip(_labels(run_dirs), run_dirs, strict=True)
    ]
    k = max(1, min(run.summary.trials_per_task for run in runs))
    return Comparison(
        runs=runs,
        k=k,
        categories=_categories(runs),
        changes=_task_changes(runs),
        packs_differ=len({_pack_key(run.data) for run in runs}) > 1,
    )
