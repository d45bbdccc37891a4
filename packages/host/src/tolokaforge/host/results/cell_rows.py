"""Per pack x model figures of a multi-pack run (matrix.py), side by side in summary.yaml and the report.

``cells`` maps each run task id to ``{pack, model, task_id}`` as run.yaml records it; a row is every
trial of one (pack, model) pair.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .trial_rows import TrialRow

__all__ = ["CellRow", "cell_rows"]


@dataclass(frozen=True)
class CellRow:
    pack: str
    model: str | None
    tasks: int
    trials: int
    passed: int
    graded: int
    mean_score: float | None
    tokens: int
    cost_usd: float | None

    @property
    def pass_rate(self) -> float:
        return self.passed / self.trials if self.trials else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "pack": self.pack,
            "model": self.model,
            "tasks": self.tasks,
            "trials": self.trials,
            "passed": self.passed,
            "graded": self.graded,
            "pass_rate": self.pass_rate,
            "mean_score": self.mean_score,
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
        }


def cell_rows(rows: Sequence[TrialRow], cells: Mapping[str, Mapping[str, Any]]) -> list[CellRow]:
    """One row per (pack, model), in the order the cells were listed."""
    grouped: dict[tuple[str, str | None], list[TrialRow]] = {}
    for cell in cells.values():
        grouped.setdefault((str(cell["pack"]), cell.get("model")), [])
    for row in rows:
        cell = cells.get(row.task_id)
        if cell is not None:
            grouped[(str(cell["pack"]), cell.get("model"))].append(row)
    result: list[CellRow] = []
    for (pack, model), members in grouped.items():
        scores = [row.score for row in members if row.score is not None]
        costs = [row.cost_usd for row in members]
        result.append(
            CellRow(
                pack=pack,
                model=model,
                tasks=len({row.task_id for row in members}),
                trials=len(members),
                passed=sum(row.passed for row in members),
                graded=sum(row.graded for row in members),
                mean_score=sum(scores) / len(scores) if scores else None,
                tokens=sum(row.tokens for row in members),
                cost_usd=None if any(cost is None for cost in costs) else sum(c or 0.0 for c in costs),
            )
        )
    return result
