"""One row per selected trial, read back from its result files, with what became of it and why.

What became of a trial (its *kind*) decides the exit status and the failure table:

=============  ===============================================================================
passed         graded, and the grade passed
failed         graded, and the grade did not pass (the agent's failure, not the harness's)
not_gradeable  finished without a grade: an ending GradeTrial does not accept (error,
               tool_not_found, ...) or a grade the runner refused (a broken golden action)
lost           a grade of an earlier version for a trial lost on its last attempt (now unfinished)
unfinished     no ``grade.yaml``: the run stopped before the trial ended, the host failed on it, or
               the infrastructure ended it (runner or state store unreachable, the runner lost
               the trial on every attempt, the model provider refused the key or model, could not
               be reached or failed past its retries); --resume runs it
=============  ===============================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from .trial_files import trial_dir
from .yaml_files import read_yaml

__all__ = ["TRIAL_KINDS", "TrialKind", "TrialRow", "read_row", "row_of"]

TrialKind = Literal["passed", "failed", "not_gradeable", "lost", "unfinished"]
TRIAL_KINDS: tuple[TrialKind, ...] = ("passed", "failed", "not_gradeable", "lost", "unfinished")

_BASE_GRADE_KEYS = frozenset(
    {"graded", "binary_pass", "score", "components", "unscored", "reasons", "state_diff", "trial_id"}
)


@dataclass(frozen=True)
class TrialRow:
    task_id: str
    trial_index: int
    kind: TrialKind
    reason: str
    """One line: why it did not pass (empty for a pass)."""
    score: float | None = None
    termination: str | None = None
    grading_error: str | None = None
    tokens: int = 0
    cost_usd: float | None = 0.0
    wall_time_s: float = 0.0
    tool_calls: int = 0
    llm_retries: int = 0
    components: dict[str, float | None] = field(default_factory=dict[str, float | None])
    """Grade components by name; None when the runner did not evaluate that one."""
    grade_fields: tuple[str, ...] = ()
    """What this grade carries beyond score and components (custom_checks, judge or trace results, ...)."""
    by_model: dict[str, dict[str, Any]] = field(default_factory=dict[str, dict[str, Any]])
    unscored: tuple[str, ...] = ()
    """Components the task configured that this trial's grade left unscored."""
    judge: dict[str, Any] | None = None
    """grade.yaml's ``judge`` block (the rubric judge's calls, tokens, cost); None when no judge ran."""
    trace_gate_failed: bool = False
    """A trace-check gate shut the trial (grade.yaml trace_checks_summary.gate_failed)."""
    infrastructure: bool = False
    """Unfinished because the infrastructure ended it (runner, state store, model provider)."""

    @property
    def passed(self) -> bool:
        return self.kind == "passed"

    @property
    def graded(self) -> bool:
        return self.kind in ("passed", "failed")


def _one_line(text: str, limit: int = 240) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _carried(grade: dict[str, Any]) -> tuple[str, ...]:
    # An empty list or None carries nothing: a grade "has custom checks" only when it lists some.
    return tuple(sorted(key for key, value in grade.items() if key not in _BASE_GRADE_KEYS and value))


def read_row(
    output: Path, task_id: str, index: int, crash: str | None = None, *, infrastructure: bool = False
) -> TrialRow:
    """The row of one trial; ``crash`` says why it has no grade (the host failed on it, or the
    infrastructure ended it, then ``infrastructure``), when known."""
    directory = trial_dir(output, task_id, index)
    if not (directory / "grade.yaml").is_file():
        why = crash or "no grade.yaml: the run stopped before it ended"
        return TrialRow(task_id, index, "unfinished", _one_line(why), infrastructure=infrastructure)
    grade = read_yaml(directory / "grade.yaml")
    trajectory = read_yaml(directory / "trajectory.yaml")
    metrics = read_yaml(directory / "metrics.yaml")
    return row_of(task_id, index, grade, trajectory, metrics)


def row_of(
    task_id: str, index: int, grade: dict[str, Any], trajectory: dict[str, Any], metrics: dict[str, Any]
) -> TrialRow:
    """The row of a finished trial from its three documents, as written (a run that just wrote them)
    or as read back (a summary of files): the same documents give the same row."""
    termination = trajectory.get("termination_reason")
    reasons = [str(reason) for reason in cast(list[Any], grade.get("reasons") or [])]
    if grade.get("graded"):
        kind: TrialKind = "passed" if grade.get("binary_pass") else "failed"
        reason = "" if kind == "passed" else "; ".join(reasons) or f"score {grade.get('score')}"
    elif termination == "trial_lost":
        kind, reason = "lost", str(trajectory.get("error") or "the runner lost the trial")
    else:
        kind, reason = "not_gradeable", "; ".join(reasons) or f"not graded (ended {termination})"
    components = cast(dict[str, float | None], grade.get("components") or {})
    return TrialRow(
        task_id=task_id,
        trial_index=index,
        kind=kind,
        reason=_one_line(reason),
        score=grade.get("score"),
        termination=termination,
        grading_error=trajectory.get("grading_error"),
        tokens=int(metrics.get("total_tokens") or 0),
        cost_usd=metrics.get("cost_usd"),
        wall_time_s=float(metrics.get("wall_time_s") or 0.0),
        tool_calls=int(metrics.get("tool_calls") or 0),
        llm_retries=int(metrics.get("llm_retries") or 0),
        components=dict(components),
        grade_fields=_carried(grade),
        by_model=cast(dict[str, dict[str, Any]], metrics.get("by_model") or {}),
        unscored=tuple(str(name) for name in cast(list[Any], grade.get("unscored") or [])),
        judge=cast(dict[str, Any] | None, grade.get("judge")),
        trace_gate_failed=_trace_gate_failed(grade),
    )


def _trace_gate_failed(grade: dict[str, Any]) -> bool:
    summary: Any = grade.get("trace_checks_summary")
    return isinstance(summary, dict) and bool(cast(dict[str, Any], summary).get("gate_failed"))
