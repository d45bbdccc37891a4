"""Trace-check verdicts as grade.yaml carries them, and the check that the runner's payload is readable.

The runner's per-constraint verdicts are the only record of which constraint failed, so a payload the
host cannot read (an unknown kind or severity, a verdict both passed and undecided, a summary naming a
gate no constraint reports) fails the grade instead of being dropped or written half-understood.
"""

from __future__ import annotations

from typing import Any

from tolokaforge.contracts.runner import Grade
from tolokaforge.core.models.trace_checks import CONSTRAINT_KINDS

__all__ = ["check_trace_payload", "trace_results_dict", "trace_summary_dict"]

_SEVERITIES = ("scored", "gate", "")


def check_trace_payload(grade: Grade) -> None:
    """Raise ValueError naming what is unreadable in the grade's trace-check fields."""
    ids: set[str] = set()
    for row in grade.trace_checks:
        where = f"trace_checks[{row.id or '?'}]"
        if not row.id:
            raise ValueError(f"{where}: a verdict with no constraint id")
        if row.kind not in CONSTRAINT_KINDS:
            raise ValueError(f"{where}: unknown kind {row.kind!r}")
        if row.severity not in _SEVERITIES:
            raise ValueError(f"{where}: unknown severity {row.severity!r}")
        if row.passed and row.undecided:
            raise ValueError(f"{where}: passed and undecided at once")
        ids.add(row.id)
    summary = grade.trace_checks_summary
    if summary is not None:
        unknown = [gate for gate in summary.failed_gate_ids if gate not in ids]
        if unknown:
            raise ValueError(f"trace_checks_summary names failed gates with no verdict: {', '.join(unknown)}")
        if summary.gate_failed != bool(summary.failed_gate_ids):
            raise ValueError("trace_checks_summary.gate_failed disagrees with failed_gate_ids")


def trace_results_dict(grade: Grade) -> list[dict[str, Any]]:
    return [
        {
            "id": row.id,
            "kind": row.kind,
            "severity": row.severity or None,
            "passed": row.passed,
            "undecided": row.undecided,
            "weight": row.weight,
            "message": row.message,
            "matched_positions": list(row.matched_positions),
        }
        for row in grade.trace_checks
    ]


def trace_summary_dict(grade: Grade) -> dict[str, Any] | None:
    summary = grade.trace_checks_summary
    if summary is None:
        return None
    return {
        "winning_path": summary.winning_path or None,
        "gate_failed": summary.gate_failed,
        "failed_gate_ids": list(summary.failed_gate_ids),
        "paths": [{"id": p.id, "score": p.score, "gate_failed": p.gate_failed} for p in summary.paths],
    }
