"""One trial's browser: a fresh context and page on the shared Chromium, its requests intercepted.

Every request the page makes goes through :meth:`BrowserSession._route`: one to a declared site is
answered by the trial's :data:`SiteHandler`, anything else is aborted and recorded. Nothing reaches a
network. :meth:`BrowserSession.run` does a call's actions, lets the page settle after each (activity.py
says when it has), and reads it once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from playwright.async_api import (
    Browser,
    BrowserContext,
    CDPSession,
    Frame,
    Page,
    Request,
    Route,
    WebSocketRoute,
)
from playwright.async_api import Error as PlaywrightError

from tolokaforge.core.models.web import BROWSER_ACTIONS, BrowserSettings

from .actions import ActionFailed, Surface, perform
from .activity import PageActivity
from .confined import BrowserUnavailableError, PageCrashed
from .observation import PageView, format_page, read_page, take_screenshot
from .pages import PageSnapshot, SiteHandler, SiteRequest, StepResult
from .routing import Answer, answer_site_request

__all__ = ["BrowserSession", "origin_of"]

NAVIGATION_TIMEOUT_MS = 15_000
SETTLE_LIMIT_S = 5.0
"""The longest a call waits for the page to settle after an action (then it reads it as it is)."""
_READS = 3
"""Reads of the page a call makes at most when the page keeps changing under them."""

# Set when the page is about to leave: beforeunload fires before the navigation request is sent, and a
# form submission is first a task the page queued (the probe lets queued tasks run before it looks).
# Read and cleared by the probe after each action: it closes the gap between the action's return and
# the first request of the navigation it caused.
_INIT_SCRIPT = """
addEventListener('beforeunload', () => { window.__tfLeaving = true; }, true);
addEventListener('submit', (e) => { if (!e.defaultPrevented) window.__tfLeaving = true; });
"""
_LEAVING_PROBE = """async () => {
  await new Promise((done) => setTimeout(done, 0));
  const leaving = !!window.__tfLeaving;
  window.__tfLeaving = false;
  return leaving;
}"""
_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> str | None:
    """``scheme://host:port`` with the default port spelled out; None for a URL that is not http(s)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return f"{parts.scheme}://{parts.hostname.lower()}:{port or _DEFAULT_PORTS[parts.scheme]}"


def _frame_of(request: Request) -> Frame | None:
    """The request's frame; None for a popup's first navigation, sent before its frame exists (there
    Playwright raises, which would leave the popup's request unanswered and its page never loaded)."""
    try:
        return request.frame
    except PlaywrightError:
        return None


class BrowserSession:
    """A trial's browser context; made by :meth:`BrowserPool.open_session`."""

    def __init__(
        self,
        context: BrowserContext,
        page: Page,
        alive: Callable[[], bool],
        on_close: Callable[[BrowserSession], None] | None = None,
    ) -> None:
        self._context = context
        self._page = page
        self._alive = alive
        self._on_close = on_close
        self._settings = BrowserSettings()
        self._serve: SiteHandler | None = None
        self._probes: tuple[str, ...] = ()
        self._origins: set[str] = set()
        """Empty until :meth:`bind`: a spare context refuses every request."""
        self._home: str | None = None
        self._allowed: set[str] = set()
        self._cdp: CDPSession | None = None
        self._opened = True
        self._visited: list[str] = []
        self._refused: list[str] = []
        self._activity = PageActivity(lambda request: _frame_of(request) is self._page.main_frame)
        self._settles = 0
        self._stubs: set[str] = set()
        """URLs whose page load was answered by a redirect's stand-in page (not visited themselves)."""
        self._crashed = False
        self._closed = False
        self._shot: bytes | None = None
        self._view: PageView | None = None
        self._unread: str | None = None
        """Why the last read found no document to read (the page kept replacing it), else None."""

    @property
    def page(self) -> Page:
        return self._page

    @property
    def browser(self) -> Browser | None:
        return self._context.browser

    async def prepare(self) -> None:
        """Route every request and watch the main frame (done ahead, on the pool's spare context)."""
        self._page.on("framenavigated", self._on_navigated)
        self._page.on("load", self._on_load)
        self._page.on("crash", self._on_crash)
        self._context.on("request", self._on_request)
        self._context.on("requestfailed", self._on_failed)
        await self._context.add_init_script(_INIT_SCRIPT)
        await self._context.route("**/*", self._route)
        # WebSockets bypass request routing; a site cannot serve one, so every one is refused. (The
        # dearest step of a context's preparation, which is why spare contexts are prepared ahead.)
        await self._context.route_web_socket("**/*", self._refuse_socket)

    def bind(self, settings: BrowserSettings, serve: SiteHandler, probes: Sequence[str]) -> None:
        """Give the prepared context to a trial: its sites, its site handler, its probes."""
        self._settings = settings
        self._serve = serve
        self._probes = tuple(probes)
        self._origins = {o for o in map(origin_of, settings.sites) if o is not None}
        self._home = settings.sites[0].rstrip("/") if settings.sites else None
        self._allowed = set(settings.allowed_actions or BROWSER_ACTIONS)
        self._opened = settings.initial_url is None

    async def run(self, actions: Sequence[Mapping[str, Any]], *, screenshot: bool) -> StepResult:
        """Do ``actions`` in order; the observation, what was visited and refused, the page's snapshot."""
        if self._closed:
            raise BrowserUnavailableError("this browser session is closed")
        self._visited, self._refused, self._shot = [], [], None
        lines: list[str] = []
        error: str | None = None
        try:
            if not self._opened:
                self._opened = True
                assert self._settings.initial_url is not None
                try:
                    await self._goto(self._settings.initial_url)
                except ActionFailed as failed:
                    error = f"the task's initial_url could not be opened: {failed}"
            for index, action in enumerate(actions):
                if error is not None:
                    break
                kind = action.get("type")
                try:
                    if kind not in self._allowed:
                        raise ActionFailed(
                            f"{kind!r} is not an allowed action (allowed: {', '.join(sorted(self._allowed))})"
                        )
                    settles = self._settles
                    lines.append(await perform(self._page, action, self._surface()))
                    if self._settles == settles:  # not settled by the action itself (a navigate)
                        await self._settle(probe=True)
                except ActionFailed as failed:
                    error = f"action {index} ({kind}) failed: {failed}"
                except PlaywrightError as failed:
                    self._check_alive(failed)
                    error = f"action {index} ({kind}) failed: {str(failed).splitlines()[0]}"
            view = await self._read()
            if self._unread is not None and error is None:
                # The page's own doing (a reload loop, a script that breaks the DOM methods the read
                # uses), not the browser's: the call's error, not a lost trial.
                error = f"the page could not be read: {self._unread}"
            if error is not None:
                lines.append(f"Error: {error}")
            if screenshot:
                await self._take_screenshot(view)
        except PlaywrightError as failed:
            self._check_alive(failed)
            raise BrowserUnavailableError(f"the page failed: {str(failed).splitlines()[0]}") from None
        return StepResult(
            observation="\n".join([*lines, "", format_page(view)]),
            error=error,
            snapshot=view.snapshot,
            visited=tuple(self._visited),
            refused=tuple(self._refused),
            screenshot=self._shot,
        )

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._on_close is not None:
            self._on_close(self)
        with contextlib.suppress(PlaywrightError):
            await self._context.close()

    def _surface(self) -> Surface:
        return Surface(
            width=self._settings.viewport_width,
            height=self._settings.viewport_height,
            home=self._home,
            goto=self._goto,
            screenshot=self._screenshot_now,
        )

    def _check_alive(self, failed: Exception) -> None:
        if not self._alive():
            raise BrowserUnavailableError(
                f"the browser died during the call ({str(failed).splitlines()[0]}); the next trial gets a new one"
            ) from None
        if self._crashed:
            raise PageCrashed(
                "the page crashed (its renderer ran out of memory or was killed): "
                + str(failed).splitlines()[0]
            ) from None

    async def _goto(self, url: str) -> None:
        if origin_of(url) not in self._origins:
            if origin_of(url) is not None:
                self._refused.append(url)
            sites = ", ".join(self._settings.sites) or "none"
            raise ActionFailed(f"navigation refused: {url} is not on the task's sites ({sites})")
        try:
            await self._page.goto(url, wait_until="domcontentloaded", timeout=NAVIGATION_TIMEOUT_MS)
        except PlaywrightError as failed:
            self._check_alive(failed)
            raise ActionFailed(f"{url} did not load: {str(failed).splitlines()[0]}") from None
        await self._settle(probe=False)

    async def _read(self) -> PageView:
        # A navigation or request the page starts on its own (a timer, a script's fetch at load) can
        # begin while it is read, or destroy the document mid-read: the page is read again once settled.
        self._unread = None
        for _ in range(_READS - 1):
            try:
                view = await read_page(self._page, self._probes)
            except PlaywrightError as failed:
                self._check_alive(failed)
                await self._settle(probe=True)
                continue
            if view.leaving:
                self._activity.expect_leaving()
            if self._activity.quiet:
                self._view = view
                return view
            await self._settle(probe=False)
        try:
            self._view = await read_page(self._page, self._probes)
        except PlaywrightError as failed:
            self._check_alive(failed)
            self._unread = str(failed).splitlines()[0]
            self._view = PageView(PageSnapshot(url=self._page.url, title="", text=""), (), (0.0, 0.0))
        return self._view

    async def _screenshot_now(self) -> None:
        await self._take_screenshot(await self._read())

    async def _take_screenshot(self, view: PageView) -> None:
        if self._cdp is None:
            self._cdp = await self._context.new_cdp_session(self._page)
        width, height = self._settings.viewport_width, self._settings.viewport_height
        self._shot = await take_screenshot(self._cdp, width, height, view.scroll)

    async def _settle(self, *, probe: bool) -> None:
        """Wait until the page is settled (activity.py); ``probe``: first ask it whether it is leaving."""
        self._settles += 1
        if probe:
            try:
                if await self._page.evaluate(_LEAVING_PROBE):
                    self._activity.expect_leaving()
            except PlaywrightError as failed:
                self._check_alive(failed)  # else the document went away under the probe: events tell
        deadline = asyncio.get_running_loop().time() + SETTLE_LIMIT_S
        await self._activity.wait_quiet(deadline, stop=lambda: self._crashed)

    def _on_navigated(self, frame: Frame) -> None:
        if frame is not self._page.main_frame:
            return
        stand_in = frame.url in self._stubs
        if stand_in:
            self._stubs.discard(frame.url)  # a redirect's stand-in: its target loads next
        elif frame.url != "about:blank":
            self._visited.append(frame.url)
        self._activity.committed(stand_in=stand_in)

    def _on_load(self, page: Page) -> None:
        self._activity.loaded()

    def _on_site(self, url: str) -> bool:
        return origin_of(url) in self._origins

    def _on_request(self, request: Request) -> None:
        self._activity.requested(request, on_site=self._on_site(request.url))

    def _on_failed(self, request: Request) -> None:
        self._activity.failed(request)

    def _on_crash(self, page: Page) -> None:
        self._crashed = True
        self._activity.poke()

    async def _refuse_socket(self, socket: WebSocketRoute) -> None:
        self._refused.append(socket.url)
        with contextlib.suppress(PlaywrightError):
            await socket.close(code=1008, reason="refused: not a declared site")

    async def _route(self, route: Route) -> None:
        request = route.request
        url = request.url
        if not self._on_site(url):
            self._refused.append(url)
            with contextlib.suppress(PlaywrightError):
                await route.abort("blockedbyclient")
            return
        assert self._serve is not None  # origins are set by bind(), with the handler
        document = False
        try:
            site_request = SiteRequest(
                method=request.method,
                url=url,
                headers=await request.all_headers(),
                body=request.post_data_buffer or b"",
            )
            navigation = request.is_navigation_request()
            try:
                answer = await answer_site_request(
                    self._serve, site_request, navigation=navigation, on_site=self._on_site
                )
            except Exception as error:  # the site's fault: the page shows it, the call goes on
                body = f"the site failed: {type(error).__name__}: {error}".encode()
                answer = Answer(502, {"content-type": "text/plain; charset=utf-8"}, body)
            self._refused.extend(answer.refused)
            main = navigation and _frame_of(request) is self._page.main_frame
            document = main and not answer.refused and answer.status not in (204, 205)
            if document and answer.redirect_to is not None:
                self._stubs.add(url)
            with contextlib.suppress(PlaywrightError):
                if answer.refused:
                    await route.abort("blockedbyclient")
                else:
                    await route.fulfill(status=answer.status, headers=answer.headers, body=answer.body)
        finally:
            self._activity.answered(request, document=document)
