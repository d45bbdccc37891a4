"""What every grading component evaluator returns, and the ledger of keys they account for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tolokaforge.contracts.runner import GradeReason, GradeReasonVerdict

__all__ = ["ITEMS", "ComponentResult", "ItemResult", "KeyLedger", "note", "verdict_of"]

ITEMS = "items"
"""The ComponentResult.extra key of a list-shaped component's rows (Grade.component_items)."""


@dataclass
class ComponentResult:
    """One component's verdict. ``score`` None means "not scored" (excluded from the fold)."""

    name: str
    score: float | None
    segment: str = ""
    """This component's part of Grade.reasons ("" when it has nothing to say)."""
    notes: list[str] = field(default_factory=lambda: [])
    """Extra lines for Grade.reasons: recorded skips and unconsulted settings."""
    extra: dict[str, Any] = field(default_factory=lambda: {})
    """Component-specific payload for the Grade (state diff, custom check rows)."""
    verdict: GradeReasonVerdict | None = None
    """The segment's verdict when the score does not say it (an errored judge); None: from the score."""
    parts: list[GradeReason] = field(default_factory=lambda: [])
    """The segment as typed reasons, when it is made of several (``segment`` is their messages
    joined); empty: the segment is one reason."""

    def reasons(self) -> list[GradeReason]:
        """The segment as typed reasons (the notes are the caller's: they come later in a grade)."""
        if self.parts:
            return list(self.parts)
        if not self.segment:
            return []
        verdict = self.verdict if self.verdict is not None else verdict_of(self.score)
        return [GradeReason(kind=self.name, verdict=verdict, message=self.segment)]


def verdict_of(score: float | None) -> GradeReasonVerdict:
    if score is None:
        return GradeReasonVerdict.NOTE
    if score >= 1.0:
        return GradeReasonVerdict.MET
    return GradeReasonVerdict.FAILED if score <= 0.0 else GradeReasonVerdict.PARTIAL


def note(kind: str, message: str) -> GradeReason:
    return GradeReason(kind=kind, verdict=GradeReasonVerdict.NOTE, message=message)


@dataclass(frozen=True)
class ItemResult:
    """One item of a list-shaped component (an env assertion, a τ² action, a τ² communicate string)."""

    component: str
    index: int
    """The item's position in the component's list."""
    label: str
    met: bool
    message: str = ""
    details: dict[str, Any] = field(default_factory=lambda: {})
    """Evidence as JSON: the matching call, the message that said it, the value an assertion got."""


class KeyLedger:
    """Which author-facing grading keys an evaluator ran for or deliberately skipped (with why)."""

    def __init__(self) -> None:
        self.evaluated: set[str] = set()
        self.skipped: dict[str, str] = {}

    def evaluate(self, *keys: str) -> None:
        self.evaluated.update(keys)

    def skip(self, reason: str, *keys: str) -> None:
        for key in keys:
            self.skipped[key] = reason

    def accounts_for(self, key: str) -> bool:
        return key in self.evaluated or key in self.skipped

    def skip_notes(self) -> list[str]:
        """One line per distinct skip reason, naming its keys."""
        by_reason: dict[str, list[str]] = {}
        for key, reason in self.skipped.items():
            by_reason.setdefault(reason, []).append(key)
        return [f"{reason} ({', '.join(sorted(keys))})" for reason, keys in by_reason.items()]
