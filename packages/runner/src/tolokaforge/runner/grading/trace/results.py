"""Trace-check outcomes as the Grade carries them: per-constraint results, the summary, the reasons."""

from __future__ import annotations

from tolokaforge.contracts.runner import (
    GradeReason,
    GradeReasonVerdict,
    TraceChecksSummary,
    TraceConstraintResult,
    TracePathResult,
)

from ..component import verdict_of
from .scoring import ConstraintOutcome, TraceOutcome

__all__ = ["constraint_result", "reasons_segment", "summary"]


def constraint_result(outcome: ConstraintOutcome) -> TraceConstraintResult:
    constraint = outcome.constraint
    verdict = outcome.verdict
    return TraceConstraintResult(
        id=constraint.id,
        kind=constraint.require.kind,
        passed=verdict.value is True,
        # A gate stands outside the weighted sum, so no weight of it entered the fold.
        weight=0.0 if outcome.gate else constraint.effective_weight,
        message="" if verdict.value is True else verdict.message,
        matched_positions=list(verdict.positions),
        severity=constraint.severity,
        undecided=verdict.value is None,
    )


def summary(outcome: TraceOutcome) -> TraceChecksSummary:
    return TraceChecksSummary(
        winning_path=outcome.winning_route,
        gate_failed=outcome.gate_failed,
        failed_gate_ids=list(outcome.failed_gates),
        paths=[TracePathResult(id=r.id, score=r.score, gate_failed=r.gate_failed) for r in outcome.routes],
    )


def reasons_segment(outcome: TraceOutcome) -> list[GradeReason]:
    """``Trace checks: score=…``, the tripped gates, one reason per failing constraint of the deciding set."""
    head = f"Trace checks: score={outcome.score:.4g}"
    if outcome.winning_route:
        head += f" (route {outcome.winning_route})"
    parts = [head]
    if outcome.failed_gates:
        parts.append(f"FAILED trace gates: {', '.join(outcome.failed_gates)}")
    for item in outcome.outcomes:
        # A losing route's constraints are what the agent did not do: its verdicts stay in the results.
        if item.passed or item.route not in (None, outcome.winning_route):
            continue
        where = f"{item.route}.{item.constraint.id}" if item.route else item.constraint.id
        state = " (undecided)" if item.verdict.value is None else ""
        parts.append(f"Trace check {where}{state}: {item.verdict.message}")
    failed = GradeReasonVerdict.FAILED
    return [
        GradeReason(
            kind="trace_checks", verdict=verdict_of(outcome.score) if i == 0 else failed, message=part
        )
        for i, part in enumerate(parts)
    ]
