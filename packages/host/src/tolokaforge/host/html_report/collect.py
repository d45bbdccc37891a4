"""Read a results folder into the plain data the HTML report renders: no HTML here.

Trials come from ``run.yaml`` (every selected task x trial index, so unfinished ones show too), or,
for a folder without one, from the ``trials/`` tree. Grade fields this module does not know (a judge's
verdict, trace-check results, anything added later) are passed through as ``extra`` and rendered
generically, so new grade content appears in the report without a change here. Task categories are
``run.yaml``'s ``categories``; ``per_category`` cuts the run's summary by them.

The run is verified first (run_keys.verify_run): its key and ledger head found by the ``run_id`` of
``run.yaml``, ``run.yaml`` checked against its signature, the run's ledger against its chain and head.
Then every trial the ledger accepted a record of, and every trial that looks finished, is checked
against its signature and the ledger (records.py): a trial whose record fails (altered, deleted, an
earlier record put back, one the ledger never accepted) is shown as tampered: its numbers are not
counted (it is a trial without a trusted grade) and its files are not rendered. A run that cannot be
verified is marked ``NOT VERIFIED`` (``verification``, ``unverifiable``): without its key nothing is
checked and the files are shown as they are; with its key, each record is still checked against its
own signature (and the ledger, when that can be read), but nothing on the page is vouched for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, cast

from ..errors import ConfigError
from ..results.ledger import LedgerState
from ..results.manifest import read_manifest
from ..results.records import RecordSigner, check_record
from ..results.run_keys import Unverifiable, verify_run
from ..results.summary import DEFINITIONS, RunSummary
from ..results.trial_files import trial_dir
from ..results.trial_rows import TrialRow, read_row, row_of
from ..results.yaml_files import parse_yaml, read_yaml
from .filmstrip import Frame, filmstrip, trial_folder

__all__ = ["UNCATEGORISED", "ReportData", "TrialView", "collect"]

UNCATEGORISED = "(no category)"
"""The category of a task whose run recorded none."""

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
    folder: str = ""
    """The trial's folder relative to the run folder (URL-quoted, ending in ``/``): its attachments' base."""
    frames: list[Frame] = field(default_factory=list[Frame])
    """Its screenshots, in call order (filmstrip.py)."""


@dataclass
class ReportData:
    run_dir: Path
    manifest: dict[str, Any] | None
    summary: RunSummary
    trials: list[TrialView]
    definitions: dict[str, str]
    verification: str | None = None
    """``NOT VERIFIED: <why>`` when the report cannot vouch for the run (no key here, run.yaml unsigned
    or edited, a ledger that cannot be trusted); None: the run was verified and every trial's record
    checked."""
    unverifiable: Unverifiable | None = None
    """Why the run could not be verified: ``key`` (this machine lacks the run's key or ledger head),
    ``manifest`` (run.yaml missing, unsigned or edited), ``ledger`` (its chain breaks, or it was cut
    short); None when it was."""

    @property
    def tampered(self) -> list[TrialView]:
        return [trial for trial in self.trials if trial.tampered is not None]

    @cached_property
    def categories(self) -> dict[str, str]:
        """Task id -> category, as ``run.yaml`` records them (empty for a run that recorded none)."""
        recorded = (self.manifest or {}).get("categories")
        if not isinstance(recorded, dict):
            return {}
        return {str(task): str(category) for task, category in cast(dict[Any, Any], recorded).items()}

    def category(self, task_id: str) -> str:
        return self.categories.get(task_id) or UNCATEGORISED

    def per_category(self) -> dict[str, RunSummary]:
        """The run's summary cut by task category (sorted by name): every figure of a category is the
        summary's own, computed over that category's trials only."""
        categories = self.categories
        rows: dict[str, list[TrialRow]] = {}
        for row in self.summary.rows:
            rows.setdefault(categories.get(row.task_id) or UNCATEGORISED, []).append(row)
        return {name: replace(self.summary, rows=rows[name]) for name in sorted(rows)}


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


def _documents(
    directory: Path, signer: RecordSigner | None, ledger: LedgerState | None, task_id: str, index: int
) -> tuple[dict[str, dict[str, Any]], str | None]:
    """grade, trajectory and metrics of a trial, and why its record is not to be trusted (None: it is,
    or there is no key to tell). A checked record is parsed from the very bytes checked; an unfinished
    trial's files (never counted) are shown as they are."""
    names = ("grade.yaml", "trajectory.yaml", "metrics.yaml")
    finished = (directory / "grade.yaml").is_file()
    as_they_are = {name: _read(directory / name) for name in names if finished or name != "grade.yaml"}
    if signer is None:
        return as_they_are, None
    accepted = ledger.accepted(task_id, index) if ledger is not None else None
    if ledger is not None and accepted is None:
        # Never finished (or its record revoked, and not run again): unfinished. A grade here is not one
        # the ledger accepted.
        return (as_they_are, None) if not finished else ({}, ledger.not_accepted(task_id, index))
    if accepted is None and not finished:
        return as_they_are, None
    check = check_record(directory, signer, task_id, index, accepted)
    if not check.intact:
        return {}, check.problem
    return {name: parse_yaml(check.contents[name]) for name in names}, None


def _cells(manifest: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """A multi-pack run's cells, as its signed run.yaml records them (``options.cells``)."""
    options = cast(dict[str, Any], (manifest or {}).get("options") or {})
    cells = options.get("cells")
    if not isinstance(cells, dict):
        return {}
    return {
        str(k): dict(cast(dict[str, Any], v))
        for k, v in cast(dict[Any, Any], cells).items()
        if isinstance(v, dict)
    }


def collect(run_dir: Path) -> ReportData:
    if not (run_dir / "trials").is_dir() and not (run_dir / "run.yaml").is_file():
        raise ConfigError(f"{run_dir} is not a results folder (no run.yaml, no trials/)")
    manifest = read_manifest(run_dir)
    verified = verify_run(run_dir, manifest)
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
        cells=_cells(manifest),
    )
    trials: list[TrialView] = []
    for task_id, index in keys:
        directory = trial_dir(run_dir, task_id, index)
        documents, tampered = _documents(directory, verified.signer, verified.ledger, task_id, index)
        grade = documents.get("grade.yaml") or {}
        trajectory = documents.get("trajectory.yaml") or {}
        # The page's spend line reads these two of every trial, one with no metrics shown too.
        metrics = documents.get("metrics.yaml") or {"cost_usd": None, "wall_time_s": None}
        if tampered is not None:  # counted as a trial without a grade, whatever its files say
            row = TrialRow(task_id, index, "unfinished", f"record tampered: {tampered}")
        elif grade:
            row = row_of(task_id, index, grade, trajectory, metrics)
        else:  # no grade.yaml (or none to trust: the row says the trial is unfinished)
            row = read_row(run_dir, task_id, index)
        summary.rows.append(row)
        calls = cast(list[dict[str, Any]], trajectory.get("tool_calls") or [])
        anchor, folder = f"trial-{task_id}-{index}", trial_folder(task_id, index)
        trials.append(
            TrialView(
                row=row,
                anchor=anchor,
                grade=grade,
                trajectory=trajectory,
                metrics=metrics,
                calls_by_id={str(call.get("call_id")): call for call in calls},
                extra={
                    key: json.dumps(value, indent=2, sort_keys=True, default=str)
                    for key, value in grade.items()
                    if key not in _SHOWN_GRADE_KEYS and value
                },
                tampered=tampered,
                folder=folder,
                frames=filmstrip(trajectory, anchor, folder),
            )
        )
    verification = f"NOT VERIFIED: {verified.problem}" if verified.problem is not None else None
    return ReportData(run_dir, manifest, summary, trials, DEFINITIONS, verification, verified.unverifiable)
