"""GradeTrial: the grading engine."""

from __future__ import annotations

from .engine import grade_trial

__all__ = ["grade_trial"]
