"""The golden path must satisfy every trace constraint on the route it takes.

A component score of 1.0 is not enough: under ``combine: any`` a short component is only noted, and a
constraint the golden path fails is a constraint no correct agent can be expected to pass. Every
shared constraint and every constraint of the winning route must pass; the other routes' constraints
are what the golden path did not do, and are left alone.
"""

from __future__ import annotations

from tolokaforge.contracts.runner import Grade
from tolokaforge.core.models import TaskDescription

__all__ = ["unmet_trace_constraints"]


def unmet_trace_constraints(task: TaskDescription, grade: Grade) -> list[str]:
    """``<id>: <message>`` for each constraint the golden path had to pass and did not."""
    config = task.grading.trace_checks
    if config is None:
        return []
    winner = grade.trace_checks_summary.winning_path if grade.trace_checks_summary is not None else ""
    owed = {c.id for c in config.constraints}
    owed |= {c.id for path in config.alternatives or [] if path.id == winner for c in path.constraints}
    return [
        f"{row.id}{' (undecided)' if row.undecided else ''}: {row.message}"
        for row in grade.trace_checks
        if row.id in owed and not row.passed
    ]
