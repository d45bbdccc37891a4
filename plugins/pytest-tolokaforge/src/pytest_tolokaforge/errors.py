"""The one error a check raises on purpose, and how its item reports it::

    CheckFailure        a contract does not hold: ``summary`` is one line, ``details`` the full story
    FailureRepr         the failed item's report: ``details`` in the failures section, ``summary`` as the
                        crash message (the short test summary's reason, junit-xml's ``message``)

Anything else a check raises is a bug in the check or the harness and is reported by pytest as is.
"""

from __future__ import annotations

from dataclasses import dataclass

from _pytest._code.code import TerminalRepr
from _pytest._io import TerminalWriter

__all__ = ["CheckFailure", "FailureRepr"]


class CheckFailure(Exception):
    """A check found a broken contract. ``str()`` is the summary line; ``details`` is what the failed item reports."""

    def __init__(self, summary: str, details: str = "") -> None:
        super().__init__(summary)
        self.summary = summary
        self.details = details or summary

    def __str__(self) -> str:
        return self.summary


@dataclass(frozen=True)
class _Crash:
    message: str


class FailureRepr(TerminalRepr):
    """A failed check as pytest reports it: a plain string report would make pytest take the first
    line of ``details`` as the reason, cut to the terminal's width."""

    def __init__(self, summary: str, details: str) -> None:
        self.summary = summary
        self.details = details
        self.reprcrash = _Crash(summary)

    def toterminal(self, tw: TerminalWriter) -> None:
        for line in self.details.splitlines():
            tw.line(line)
