"""The values the browser engine hands the runner: site requests and answers, page snapshots, steps.

Plain data, no Playwright: the calls layer (calls/browser_calls.py), the trial's web record
(trials/web.py) and grading (grading/web_checks.py) use these without touching the browser.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

__all__ = ["ElementProbe", "PageSnapshot", "SiteHandler", "SiteRequest", "SiteResponse", "StepResult"]


@dataclass(frozen=True, slots=True)
class SiteRequest:
    """One request the page sent to a declared site (intercepted: nothing goes on the network)."""

    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes = b""


@dataclass(frozen=True, slots=True)
class SiteResponse:
    status: int
    headers: Mapping[str, str]
    body: bytes = b""


SiteHandler = Callable[[SiteRequest], Awaitable[SiteResponse]]
"""Answers a trial's site requests (the runner: through the trial's worker)."""


@dataclass(frozen=True, slots=True)
class ElementProbe:
    """What one CSS selector found on a page: how many elements, and the first one's text."""

    count: int
    text: str = ""


@dataclass(frozen=True, slots=True)
class PageSnapshot:
    """The page as a call left it: what web checks read."""

    url: str
    title: str
    text: str
    """The page's whole visible text (not cut to the viewport)."""
    elements: Mapping[str, ElementProbe] = field(default_factory=lambda: {})
    """The probed selectors (the task's web checks name them) -> what each found."""


@dataclass(frozen=True, slots=True)
class StepResult:
    """One ``browser`` call: what the model reads, and what the runner keeps."""

    observation: str
    """The public tool's text: one line per action, then the page (title, content, elements)."""
    error: str | None
    """Why an action failed (the actions after it did not run); None when all ran."""
    snapshot: PageSnapshot
    visited: tuple[str, ...] = ()
    """Main-frame URLs loaded during the call, in order."""
    refused: tuple[str, ...] = ()
    """URLs the page asked for outside the declared sites (refused before anything was sent)."""
    screenshot: bytes | None = None
    """A JPEG of the viewport after the call, when asked for."""
