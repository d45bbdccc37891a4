"""The rubric's score: binary 0/1, graded in [0, 1]; the weighted mean over non-required criteria.

A required criterion is a gate, never a share: one not met scores the component 0.0 and fails the
trial whatever the fold says. A rubric of required criteria only scores 1.0 or 0.0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tolokaforge.core.models import Rubric

from .report import Verdict

__all__ = ["RubricScore", "score_rubric"]


@dataclass(frozen=True)
class RubricScore:
    score: float
    met: int
    total: int
    failed_gates: list[str]

    @property
    def gate_failed(self) -> bool:
        return bool(self.failed_gates)


def score_rubric(rubric: Rubric, verdicts: Sequence[Verdict]) -> RubricScore:
    by_id = {verdict.id: verdict for verdict in verdicts}
    failed_gates = [c.id for c in rubric.criteria if c.required and not by_id[c.id].met]
    met = sum(by_id[c.id].met for c in rubric.criteria)
    if failed_gates:
        return RubricScore(0.0, met, len(rubric.criteria), failed_gates)
    shares = [(c.weight, by_id[c.id].score) for c in rubric.criteria if not c.required]
    if not shares:
        return RubricScore(1.0, met, len(rubric.criteria), [])
    total = sum(weight for weight, _ in shares)
    return RubricScore(sum(weight * score for weight, score in shares) / total, met, len(rubric.criteria), [])
