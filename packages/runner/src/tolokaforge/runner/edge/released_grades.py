"""The answers of GradeTrial requests that released their trial, kept for a repeat of the request.

A GradeTrial with ``release`` forgets the trial once graded (docs/protocol/runner.md). If its reply is
lost in transit, the caller sends the same request again, and the trial is gone by then: the runner
answers it from here, the same grade, rather than TRIAL_NOT_FOUND (which would cost a graded trial).
An answer is dropped when its trial id is registered again or cleaned up, and the oldest go first.
"""

from __future__ import annotations

from cachetools import LRUCache

from tolokaforge.contracts.runner import GradeTrialResponse

__all__ = ["CAPACITY", "ReleasedGrades"]

CAPACITY = 4096
"""Answers kept: far more than the trials a caller has in flight, each a grade of a few kilobytes."""


class ReleasedGrades:
    def __init__(self, capacity: int = CAPACITY) -> None:
        self._answers: LRUCache[str, GradeTrialResponse] = LRUCache(capacity)

    def keep(self, trial_id: str, answer: GradeTrialResponse) -> None:
        self._answers[trial_id] = answer

    def get(self, trial_id: str) -> GradeTrialResponse | None:
        return self._answers.get(trial_id)

    def forget(self, trial_id: str) -> None:
        self._answers.pop(trial_id, None)
