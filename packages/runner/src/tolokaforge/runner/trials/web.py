"""A trial's web record: every page load of its browser, and the page it is on now (web checks)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..browser.pages import PageSnapshot, StepResult

__all__ = ["WebRecord"]


@dataclass
class WebRecord:
    """Filled by the trial's recorded ``browser`` calls (golden replays leave it alone)."""

    visited: list[str] = field(default_factory=lambda: [])
    """Main-frame URLs loaded, in order, across the trial's calls."""
    refused: list[str] = field(default_factory=lambda: [])
    final: PageSnapshot | None = None
    """The page after the last call; None: the browser was never used."""

    def add(self, step: StepResult) -> None:
        self.visited.extend(step.visited)
        self.refused.extend(step.refused)
        self.final = step.snapshot
