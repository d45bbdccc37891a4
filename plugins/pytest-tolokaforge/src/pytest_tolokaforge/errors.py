"""The one error a check raises on purpose::

    CheckFailure        a contract does not hold: ``summary`` is one line, ``details`` the full story

Anything else a check raises is a bug in the check or the harness and is reported by pytest as is.
"""

from __future__ import annotations

__all__ = ["CheckFailure"]


class CheckFailure(Exception):
    """A check found a broken contract. ``str()`` is the summary line; ``details`` is what the failed item reports."""

    def __init__(self, summary: str, details: str = "") -> None:
        super().__init__(summary)
        self.summary = summary
        self.details = details or summary

    def __str__(self) -> str:
        return self.summary
