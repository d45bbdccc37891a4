"""Web tasks: the ``browser`` tool's settings (TaskDescription.browser) and the web checks (grading).

A task that enables ``browser`` gets one browser context per trial, reaching only the task's declared
sites (docs/web-tasks.md). Web checks grade what the browser saw: the final page's URL, its text,
the elements on it, and the URLs visited on the way.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Literal, get_args
from urllib.parse import urlsplit

from pydantic import Field, model_validator

from ._base import SpecModel

__all__ = [
    "BROWSER_ACTIONS",
    "BrowserActionType",
    "BrowserSettings",
    "WebCheck",
    "WebChecksConfig",
    "url_pattern_matches",
]

BrowserActionType = Literal[
    "open_web_browser",
    "navigate",
    "wait_5_seconds",
    "screenshot",
    "go_back",
    "go_forward",
    "search",
    "click_at",
    "select",
    "hover_at",
    "type_text_at",
    "key_combination",
    "scroll_document",
    "scroll_at",
    "drag_and_drop",
]
BROWSER_ACTIONS: tuple[BrowserActionType, ...] = get_args(BrowserActionType)
"""The public tool's action types, in its order."""


class BrowserSettings(SpecModel):
    """TaskDescription.browser: the agent is offered the ``browser`` tool, served by the runner."""

    initial_url: str | None = None
    """Opened before the agent's first call (the public ``tools.agent.browser.initial_url``)."""
    allowed_actions: list[BrowserActionType] | None = None
    """The action types offered; None: all of them."""
    viewport_width: int = Field(default=1440, ge=200, le=4096)
    viewport_height: int = Field(default=900, ge=200, le=4096)
    sites: list[str] = []
    """The origins (``scheme://host[:port]``) the browser may reach; a request anywhere else is refused
    inside the browser, before anything is sent."""
    site_tool: str | None = None
    """The hidden tool (in the trial's worker) that answers every request to ``sites``: arguments
    ``{method, url, headers, body_b64}``, output the JSON ``{status, headers, body_b64}``."""
    screenshots: bool = True
    """A JPEG of the page after each call, kept with the trial (the report's filmstrip)."""
    vision: bool = False
    """The screenshot is also shown to the model with the page text (vision models)."""

    @model_validator(mode="after")
    def _origins(self) -> BrowserSettings:
        for site in self.sites:
            parts = urlsplit(site)
            if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
                raise ValueError(f"sites: {site!r} is not an origin (scheme://host[:port])")
        return self


_CHECK_KINDS = (
    "final_url",
    "page_contains",
    "page_lacks",
    "element",
    "element_absent",
    "visited",
    "not_visited",
)


class WebCheck(SpecModel):
    """One web check: exactly one of its kinds, with an optional description naming it in the grade.

    URL patterns are globs (``*``, ``?``, ``[...]``); one that starts with ``/`` is matched against the
    URL's path (plus ``?query`` when the URL has one), any other against the whole URL.
    """

    description: str = ""
    final_url: str | None = None
    """The URL of the page the trial ended on matches this pattern."""
    page_contains: str | None = None
    """The final page's text contains this (case-insensitive)."""
    page_lacks: str | None = None
    """The final page's text does not contain this (case-insensitive)."""
    element: str | None = None
    """A CSS selector that matches at least one element of the final page."""
    element_text: str | None = None
    """With ``element``: the text of the first element it matches contains this (case-insensitive)."""
    element_absent: str | None = None
    """A CSS selector that matches nothing on the final page."""
    visited: list[str] | None = Field(default=None, min_length=1)
    """URL patterns the trial's page loads matched in this order (other loads may come between)."""
    not_visited: str | None = None
    """A URL pattern no page load of the trial matched."""

    @model_validator(mode="after")
    def _one_kind(self) -> WebCheck:
        kinds = [name for name in _CHECK_KINDS if getattr(self, name) is not None]
        if len(kinds) != 1:
            raise ValueError(
                f"a web check needs exactly one of {', '.join(_CHECK_KINDS)} (found {', '.join(kinds) or 'none'})"
            )
        if self.element_text is not None and self.element is None:
            raise ValueError("element_text goes with element")
        return self

    @property
    def kind(self) -> str:
        """The check's one kind (validated): the name of the key it sets."""
        return next(name for name in _CHECK_KINDS if getattr(self, name) is not None)

    @property
    def selectors(self) -> tuple[str, ...]:
        """The CSS selectors this check reads on the final page."""
        return tuple(s for s in (self.element, self.element_absent) if s is not None)


class WebChecksConfig(SpecModel):
    """grading.yaml: ``web_checks``, a list of :class:`WebCheck`; the score is the share that pass."""

    checks: list[WebCheck] = Field(min_length=1)

    @property
    def selectors(self) -> tuple[str, ...]:
        """Every CSS selector the checks read, once each, in order (the browser probes these)."""
        return tuple(dict.fromkeys(s for check in self.checks for s in check.selectors))


def url_pattern_matches(pattern: str, url: str) -> bool:
    """Whether ``url`` matches the glob ``pattern`` (see :class:`WebCheck` for the two forms)."""
    if pattern.startswith("/"):
        parts = urlsplit(url)
        target = parts.path or "/"
        if parts.query:
            target = f"{target}?{parts.query}"
        return fnmatchcase(target, pattern) or fnmatchcase(parts.path or "/", pattern)
    return fnmatchcase(url, pattern)
