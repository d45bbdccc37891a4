"""Read a results folder into the plain data the HTML report renders: no HTML here.

Trials come from ``run.yaml`` (every selected task x trial index, so unfinished ones show too), or,
for a folder without one, from the ``trials/`` tree. Grade fields this module does not know (a judge's
verdict, trace-check results, anything added later) are passed through as ``extra`` and rendered
generically, so new grade content appears in the report without a change here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ..errors import ConfigError
from ..manifest import read_manifest
from ..results import trial_dir
from ..summary import DEFINITIONS, RunSummary, summarise
from ..trial_rows import TrialRow
from ..yaml_files import read_yaml

__all__ = ["ReportData", "TrialView", "collect"]

_SHOWN_GRADE_KEYS = frozenset(
    {"graded", "binary_pass", "score", "components", "reasons", "state_diff", "custom_checks", "trial_id"}
)


@dataclass
class TrialView:
    row: TrialRow
    anchor: str
    grade: dict[str, Any]
    trajectory: dict[str, Any]
    metrics: dict[str, Any]
    calls_by_id: dict[str, dict[str, Any]]
    extra: dict[str, str] = field(default_factory=dict[str, str])
    """Grade fields beyond the known ones, each as indented JSON text."""


@dataclass
class ReportData:
    run_dir: Path
    manifest: dict[str, Any] | None
    summary: RunSummary
    trials: list[TrialView]
    definitions: dict[str, str]


def _keys_from_tree(run_dir: Path) -> tuple[list[tuple[str, int]], int]:
    keys: list[tuple[str, int]] = []
    for task in sorted((run_dir / "trials").glob("*")):
        keys.extend((task.name, int(index.name)) for index in task.glob("*") if index.name.isdigit())
    keys.sort()
    per_task: dict[str, int] = {}
    for task_id, _ in keys:
        per_task[task_id] = per_task.get(task_id, 0) + 1
    return keys, max(per_task.values(), default=1)


def _read(path: Path) -> dict[str, Any]:
    return read_yaml(path) if path.is_file() else {}


def collect(run_dir: Path) -> ReportData:
    if not (run_dir / "trials").is_dir() and not (run_dir / "run.yaml").is_file():
        raise ConfigError(f"{run_dir} is not a results folder (no run.yaml, no trials/)")
    manifest = read_manifest(run_dir)
    if manifest and manifest.get("tasks"):
        per_task = int(manifest.get("trials_per_task") or 1)
        keys = [(str(task), index) for task in manifest["tasks"] for index in range(per_task)]
    else:
        keys, per_task = _keys_from_tree(run_dir)
    saved = _read(run_dir / "summary.yaml")
    summary = RunSummary(
        pack=str((manifest or {}).get("pack", {}).get("name") or saved.get("pack") or run_dir.name),
        agent=str((manifest or {}).get("agent") or saved.get("agent") or "?"),
        trials_per_task=per_task,
        wall_time_s=float(saved.get("wall_time_s") or 0.0),
        ran=int(saved.get("ran") or 0),
        skipped=int(saved.get("skipped_by_resume") or 0),
    )
    summarise(run_dir, keys, summary)
    trials: list[TrialView] = []
    for row in summary.rows:
        directory = trial_dir(run_dir, row.task_id, row.trial_index)
        grade = _read(directory / "grade.yaml")
        trajectory = _read(directory / "trajectory.yaml")
        calls = cast(list[dict[str, Any]], trajectory.get("tool_calls") or [])
        trials.append(
            TrialView(
                row=row,
                anchor=f"trial-{row.task_id}-{row.trial_index}",
                grade=grade,
                trajectory=trajectory,
                metrics=_read(directory / "metrics.yaml"),
                calls_by_id={str(call.get("call_id")): call for call in calls},
                extra={
                    key: json.dumps(value, indent=2, sort_keys=True, default=str)
                    for key, value in grade.items()
                    if key not in _SHOWN_GRADE_KEYS and value
                },
            )
        )
    return ReportData(run_dir, manifest, summary, trials, DEFINITIONS)
