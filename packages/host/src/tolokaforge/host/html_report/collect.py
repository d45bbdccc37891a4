"""Read a results folder into the plain data the HTML report renders: no HTML here.

Trials come from ``run.yaml`` (every selected task x trial index, so unfinished ones show too), or,
for a folder without one, from the ``trials/`` tree. Grade fields this module does not know (a judge's
verdict, trace-check results, anything added later) are passed through as ``extra`` and rendered
generically, so new grade content appears in the report without a change here.

Every finished trial's record is checked against its signature with the run's key (found by the
``run_id`` of ``run.yaml``; records.py, run_keys.py) and ``run.yaml`` against its own. A trial whose record
fails is shown as tampered: its numbers are not counted (it is a trial without a trusted grade) and its
files are not rendered. When the key is not on this machine nothing can be checked: the report says
so (``verification``) and shows the files as they are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ..errors import ConfigError
from ..manifest import read_manifest
from ..records import RecordSigner, check_manifest, check_record
from ..results import trial_dir
from ..run_keys import RunKeyError, key_path, load_run_key
from ..summary import DEFINITIONS, RunSummary
from ..trial_rows import TrialRow, read_row, row_of
from ..yaml_files import parse_yaml, read_yaml

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
    tampered: str | None = None
    """Why the trial's record failed its signature check (its files are then not shown); None if it did not."""


@dataclass
class ReportData:
    run_dir: Path
    manifest: dict[str, Any] | None
    summary: RunSummary
    trials: list[TrialView]
    definitions: dict[str, str]
    verification: str | None = None
    """What keeps the report from vouching for the run (no key here, an altered run.yaml); None: every
    finished trial's record was checked."""
    run_yaml_altered: bool = False
    """run.yaml fails its signature: it was edited after the run wrote it."""

    @property
    def tampered(self) -> list[TrialView]:
        return [trial for trial in self.trials if trial.tampered is not None]


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


def _signer(manifest: dict[str, Any] | None) -> tuple[RecordSigner | None, str | None]:
    """The run's signer when its key is here, and what keeps the report from vouching for the run."""
    run_id = (manifest or {}).get("run_id")
    if not isinstance(run_id, str):
        return (
            None,
            "not verified: run.yaml names no run_id (written by a version that did not sign results?)",
        )
    try:
        key = load_run_key(run_id)
    except RunKeyError as error:
        return None, f"not verified: {error}"
    if key is None:
        return None, f"not verified: the signing key of run {run_id} is not at {key_path(run_id)}"
    signer = RecordSigner(run_id, key)
    return signer, check_manifest(manifest or {}, signer)


def _documents(
    directory: Path, signer: RecordSigner | None, task_id: str, index: int
) -> tuple[dict[str, dict[str, Any]], str | None]:
    """grade, trajectory and metrics of a trial, and why its record is not to be trusted (None: it is,
    or there is no key to tell). A checked record is parsed from the very bytes checked."""
    names = ("grade.yaml", "trajectory.yaml", "metrics.yaml")
    if signer is None or not (directory / "grade.yaml").is_file():
        return {name: _read(directory / name) for name in names}, None
    check = check_record(directory, signer, task_id, index)
    if not check.intact:
        return {name: {} for name in names}, check.problem
    return {name: parse_yaml(check.contents[name]) for name in names}, None


def collect(run_dir: Path) -> ReportData:
    if not (run_dir / "trials").is_dir() and not (run_dir / "run.yaml").is_file():
        raise ConfigError(f"{run_dir} is not a results folder (no run.yaml, no trials/)")
    manifest = read_manifest(run_dir)
    signer, verification = _signer(manifest)
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
    trials: list[TrialView] = []
    for task_id, index in keys:
        directory = trial_dir(run_dir, task_id, index)
        documents, tampered = _documents(directory, signer, task_id, index)
        grade, trajectory = documents["grade.yaml"], documents["trajectory.yaml"]
        if tampered is not None:  # counted as a trial without a grade, whatever its files say
            row = TrialRow(task_id, index, "unfinished", f"record tampered: {tampered}")
        elif grade:
            row = row_of(task_id, index, grade, trajectory, documents["metrics.yaml"])
        else:
            row = read_row(run_dir, task_id, index)
        summary.rows.append(row)
        calls = cast(list[dict[str, Any]], trajectory.get("tool_calls") or [])
        trials.append(
            TrialView(
                row=row,
                anchor=f"trial-{task_id}-{index}",
                grade=grade,
                trajectory=trajectory,
                metrics=documents["metrics.yaml"],
                calls_by_id={str(call.get("call_id")): call for call in calls},
                extra={
                    key: json.dumps(value, indent=2, sort_keys=True, default=str)
                    for key, value in grade.items()
                    if key not in _SHOWN_GRADE_KEYS and value
                },
                tampered=tampered,
            )
        )
    altered = signer is not None and verification is not None
    return ReportData(run_dir, manifest, summary, trials, DEFINITIONS, verification, altered)
