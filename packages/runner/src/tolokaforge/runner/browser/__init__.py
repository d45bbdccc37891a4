"""The browser engine behind the ``browser`` tool: one warm, confined Chromium per runner process,
one fresh context per trial, every request answered by the trial's site or refused.

The plain shapes (pages.py) import nothing heavy; the engine (Playwright, half a second to import)
is loaded on first use of one of its names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .pages import ElementProbe, PageSnapshot, SiteHandler, SiteRequest, SiteResponse, StepResult

if TYPE_CHECKING:
    from .confined import BrowserUnavailableError, PageCrashed, find_chromium
    from .pool import BrowserPool
    from .session import BrowserSession

__all__ = [
    "BrowserPool",
    "BrowserSession",
    "BrowserUnavailableError",
    "ElementProbe",
    "PageCrashed",
    "PageSnapshot",
    "SiteHandler",
    "SiteRequest",
    "SiteResponse",
    "StepResult",
    "find_chromium",
]

_LAZY = {
    "BrowserUnavailableError": "confined",
    "PageCrashed": "confined",
    "find_chromium": "confined",
    "BrowserPool": "pool",
    "BrowserSession": "session",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{module}"), name)
