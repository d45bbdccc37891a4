"""The run summary: read every trial's result files back and aggregate them.

Computed from the files, not from memory, so a resumed run summarises the trials it skipped exactly
like the ones it ran. ``pass^k`` is tau-bench's: per task with n trials of which c passed,
C(c, k) / C(n, k), averaged over tasks — the chance that k trials drawn from the task all pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from math import comb
from pathlib import Path
from typing import Any

from .results import dump_yaml, read_yaml, trial_dir

__all__ = ["RunSummary", "TrialRow", "summarise", "write_summary"]


@dataclass(frozen=True)
class TrialRow:
    task_id: str
    trial_index: int
    passed: bool
    score: float | None
    termination: str | None
    grading_error: str | None
    tokens: int
    cost_usd: float | None
    wall_time_s: float
    tool_calls: int
    unscored: tuple[str, ...] = ()
    """Components the task configured that this trial's grade left unscored."""


@dataclass
class RunSummary:
    pack: str
    agent: str
    trials_per_task: int
    rows: list[TrialRow] = field(default_factory=list[TrialRow])
    wall_time_s: float = 0.0
    ran: int = 0
    skipped: int = 0

    @property
    def pass_rate(self) -> float:
        return sum(row.passed for row in self.rows) / len(self.rows) if self.rows else 0.0

    def pass_hat(self, k: int) -> float | None:
        """pass^k over tasks that have at least k trials; None when none has."""
        per_task: dict[str, list[bool]] = {}
        for row in self.rows:
            per_task.setdefault(row.task_id, []).append(row.passed)
        values = [comb(sum(r), k) / comb(len(r), k) for r in per_task.values() if len(r) >= k]
        return sum(values) / len(values) if values else None

    @property
    def mean_score(self) -> float | None:
        scores = [row.score for row in self.rows if row.score is not None]
        return sum(scores) / len(scores) if scores else None

    @property
    def tokens(self) -> int:
        return sum(row.tokens for row in self.rows)

    @property
    def cost_usd(self) -> float | None:
        costs = [row.cost_usd for row in self.rows]
        return None if any(cost is None for cost in costs) else sum(cost or 0.0 for cost in costs)

    def unscored(self) -> dict[str, int]:
        """Per component, how many graded trials left it unscored although the task configured it."""
        counts: dict[str, int] = {}
        for row in self.rows:
            for name in row.unscored:
                counts[name] = counts.get(name, 0) + 1
        return counts

    def terminations(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for row in self.rows:
            key = row.termination or "unknown"
            counts[key] = counts.get(key, 0) + 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        k = self.trials_per_task
        return {
            "pack": self.pack,
            "agent": self.agent,
            "trials": len(self.rows),
            "trials_per_task": k,
            "ran": self.ran,
            "skipped_by_resume": self.skipped,
            "passed": sum(row.passed for row in self.rows),
            "pass_rate": self.pass_rate,
            "pass^1": self.pass_hat(1),
            f"pass^{k}": self.pass_hat(k),
            "mean_score": self.mean_score,
            "graded": sum(row.score is not None for row in self.rows),
            "unscored_components": self.unscored(),
            "grading_errors": sum(row.grading_error is not None for row in self.rows),
            "terminations": self.terminations(),
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
            "wall_time_s": round(self.wall_time_s, 3),
            "trials_per_second": round(self.ran / self.wall_time_s, 3) if self.wall_time_s > 0 else None,
            "per_trial": [
                {
                    "task_id": row.task_id,
                    "trial_index": row.trial_index,
                    "passed": row.passed,
                    "score": row.score,
                    "termination_reason": row.termination,
                    "grading_error": row.grading_error,
                    "unscored": list(row.unscored),
                }
                for row in self.rows
            ],
        }


def summarise(output: Path, keys: Sequence[tuple[str, int]], summary: RunSummary) -> RunSummary:
    """Fill ``summary.rows`` from the result files of the trials named by ``keys``."""
    for task_id, index in keys:
        directory = trial_dir(output, task_id, index)
        if not (directory / "grade.yaml").is_file():
            continue
        grade = read_yaml(directory / "grade.yaml")
        trajectory = read_yaml(directory / "trajectory.yaml")
        metrics = read_yaml(directory / "metrics.yaml")
        summary.rows.append(
            TrialRow(
                task_id=task_id,
                trial_index=index,
                passed=bool(grade.get("binary_pass")),
                score=grade.get("score"),
                termination=trajectory.get("termination_reason"),
                grading_error=trajectory.get("grading_error"),
                tokens=int(metrics.get("total_tokens") or 0),
                cost_usd=metrics.get("cost_usd"),
                wall_time_s=float(metrics.get("wall_time_s") or 0.0),
                tool_calls=int(metrics.get("tool_calls") or 0),
                unscored=tuple(str(name) for name in grade.get("unscored") or ()),
            )
        )
    return summary


def write_summary(output: Path, summary: RunSummary) -> Path:
    path = output / "summary.yaml"
    path.write_text(dump_yaml(summary.to_dict()), encoding="utf-8")
    return path
