"""When a page is done: what a call waits for after an action before it reads the page.

A page is settled when no navigation of its main frame is still to commit, the document it shows
has fired ``load`` (its stylesheets, scripts and images are in: positions and screenshots are then
the styled page's), and none of its requests to a site is still being answered. Playwright delivers
each of those as an event, in the browser's order, so the page is never polled for them. What no
event says in time is that the page is *about to* leave: a click's navigation request reaches the
browser after the click returns, and a form's submission is a task the page queued. The session
asks the page that once after an action (one round trip); :meth:`PageActivity.expect_leaving`
records the answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from playwright.async_api import Request

__all__ = ["PageActivity"]

LEAVING_GRACE_S = 1.0
"""How long a page that said it is leaving may take to send its navigation request."""


class PageActivity:
    """One page's navigations, document loads and open site requests, kept from its events."""

    def __init__(self, is_main_frame: Callable[[Request], bool]) -> None:
        self._is_main_frame = is_main_frame
        self._navigations: set[Request] = set()
        """Main-frame navigations answered by the site (or being answered) that have not committed."""
        self._redirecting = False
        """A redirect's stand-in page committed; the navigation to its target comes next."""
        self._open: set[Request] = set()
        """Site requests sent and not yet answered."""
        self._loaded = True
        """The main frame's document fired ``load`` (the first, blank one counts as loaded)."""
        self._leaving = False
        """The page said it is leaving and its navigation request has not come yet."""
        self._changed = asyncio.Event()

    @property
    def quiet(self) -> bool:
        return not (self._leaving or self._navigations or self._redirecting or self._open) and self._loaded

    def expect_leaving(self) -> None:
        """The page fired beforeunload or submitted a form: a navigation request should follow."""
        self._leaving = True

    def requested(self, request: Request, *, on_site: bool) -> None:
        """Any request the page sent (an event, before its route handler runs)."""
        if request.is_navigation_request() and self._is_main_frame(request):
            self._leaving = False
            self._redirecting = False
            if on_site:
                self._navigations.add(request)
        if on_site:
            self._open.add(request)
        self._changed.set()

    def answered(self, request: Request, *, document: bool) -> None:
        """The route handler answered ``request``; ``document``: a page the frame will commit."""
        self._open.discard(request)
        if not document:
            self._navigations.discard(request)  # a 204 or a refusal: nothing commits
        self._changed.set()

    def failed(self, request: Request) -> None:
        self._open.discard(request)
        self._navigations.discard(request)
        self._changed.set()

    def committed(self, *, stand_in: bool) -> None:
        """The main frame committed a document (or a same-document navigation)."""
        if stand_in:
            self._redirecting = True
        elif self._navigations or self._redirecting:
            # A navigation of ours committed: the new document's load is still to come. (A same-document
            # navigation, or an error page after a refused one, commits with none open.)
            self._loaded = False
            self._redirecting = False
        self._navigations.clear()
        self._leaving = False
        self._changed.set()

    def loaded(self) -> None:
        self._loaded = True
        self._changed.set()

    def poke(self) -> None:
        """Something the waiter must look at (the page crashed)."""
        self._changed.set()

    async def wait_quiet(self, deadline: float, *, stop: Callable[[], bool]) -> None:
        """Until :attr:`quiet` (or ``stop()``), by the loop's clock ``deadline`` at the latest."""
        loop = asyncio.get_running_loop()
        while not self.quiet and not stop():
            self._changed.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            only_leaving = self._leaving and not (self._navigations or self._redirecting or self._open)
            wait = min(remaining, LEAVING_GRACE_S) if only_leaving and self._loaded else remaining
            try:
                # Not asyncio.wait_for: on Python 3.11 it swallows a cancellation (the call's budget)
                # that lands in the same loop turn as the event, and a busy page sets it every turn.
                async with asyncio.timeout(wait):
                    await self._changed.wait()
            except TimeoutError:
                if only_leaving:
                    self._leaving = False  # beforeunload without a navigation (cancelled, or a new window's)
