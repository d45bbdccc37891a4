"""The runner's one warm Chromium, shared by all its trials, each in a fresh browser context.

Launching Chromium costs a few hundred milliseconds and a context's first page (its renderer
process) over a hundred more, so the pool keeps the browser running and one spare context with its
page made ahead: a trial's session takes the spare and the next one is started behind it. A browser
that died is launched again at the next :meth:`BrowserPool.open_session`.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import psutil
from playwright.async_api import Browser, Playwright, async_playwright
from playwright.async_api import Error as PlaywrightError

from tolokaforge.core.models.web import BrowserSettings

from ..process.cgroups import TrialCgroup
from ..process.confinement import Confinement
from .confined import (
    BROWSERS,
    BrowserUnavailableError,
    ChromiumCommand,
    confined_command,
    direct_command,
    find_chromium,
)
from .pages import SiteHandler
from .session import BrowserSession

__all__ = ["BrowserPool"]

LAUNCH_TIMEOUT_MS = 30_000
_ARGS = (
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
)
BROWSER_MEMORY_BYTES = 4 << 30
"""The memory of the browser's processes together, where cgroups hold: what one trial's worker may use.
Past it the kernel kills the largest of them -- the renderer of the page that grew -- and that trial's
call fails; the browser and the other trials' pages go on."""
_SPARE_VIEWPORT = (1440, 900)
"""BrowserSettings' default viewport; a session that wants another resizes the spare's page."""


class BrowserPool:
    """One per runner process: one warm Chromium, one fresh context per trial."""

    def __init__(
        self,
        *,
        executable: str | None = None,
        confined: bool = True,
        confinement: Confinement | None = None,
        memory_bytes: int = BROWSER_MEMORY_BYTES,
    ) -> None:
        """``confined``: inside bubblewrap, with ``confinement``'s layers (the runner's; None: every
        layer this machine has, a missing one refused) and, where it has cgroups, a cgroup of
        ``memory_bytes`` around the browser's processes."""
        self._executable = executable
        self._confined = confined
        self._confinement = confinement
        self._memory_bytes = memory_bytes
        self._cgroup: TrialCgroup | None = None
        self._lock = asyncio.Lock()
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._command: ChromiumCommand | None = None
        self._private: Path | None = None
        self._version = ""
        self._spare: asyncio.Task[BrowserSession] | None = None
        self._sessions: set[BrowserSession] = set()
        self._drivers: list[psutil.Process] = []
        self._closed = False

    async def start(self) -> None:
        """Launch the browser now (a no-op while it runs)."""
        async with self._lock:
            if self._closed:
                raise BrowserUnavailableError("the browser pool is closed")
            if self._browser is not None and self._browser.is_connected():
                return
            await self._launch()

    async def open_session(
        self, settings: BrowserSettings, serve: SiteHandler, *, probes: Sequence[str] = ()
    ) -> BrowserSession:
        """A fresh context and page for one trial; requests to ``settings.sites`` go to ``serve``."""
        await self.start()
        browser = self._browser
        assert browser is not None
        session = await self._take_spare(browser)
        try:
            if (settings.viewport_width, settings.viewport_height) != _SPARE_VIEWPORT:
                width, height = settings.viewport_width, settings.viewport_height
                await session.page.set_viewport_size({"width": width, "height": height})
        except PlaywrightError as error:
            await session.close()
            raise BrowserUnavailableError(f"could not open a browser context: {error}") from None
        session.bind(settings, serve, probes)
        self._sessions.add(session)
        return session

    def report(self) -> dict[str, str]:
        """For the runner's HealthCheck: the browser's binary (the first of :data:`BROWSERS` installed,
        unless one was named), version and confinement."""
        if self._command is not None:
            executable, confinement = self._command.binary, self._command.confinement
        else:
            executable = self._executable or f"{' or '.join(BROWSERS)} (not started)"
            confinement = "bwrap, no network" if self._confined else "none"
        return {
            "executable": executable,
            "version": self._version or "not started",
            "confinement": confinement,
        }

    async def close(self) -> None:
        self._closed = True
        async with self._lock:
            spare, self._spare = self._spare, None
            if spare is not None:
                spare.cancel()
                with contextlib.suppress(BaseException):
                    await (await spare).close()
            for session in list(self._sessions):
                await session.close()
            self._sessions.clear()
            if self._browser is not None:
                with contextlib.suppress(PlaywrightError):
                    await self._browser.close()
                self._browser = None
            tree = self._process_tree()
            if self._playwright is not None:
                with contextlib.suppress(Exception):
                    await self._playwright.stop()
                self._playwright = None
            # The browser's processes may outlive the driver by a moment: none is left when close returns.
            await asyncio.to_thread(_reap, tree)
            if self._cgroup is not None:
                group, self._cgroup = self._cgroup, None
                await asyncio.to_thread(_remove_cgroup, group)
            if self._private is not None:
                shutil.rmtree(self._private, ignore_errors=True)
                self._private = None

    def _process_tree(self) -> list[psutil.Process]:
        """The Playwright driver this pool started and every process under it (the browser's)."""
        tree: list[psutil.Process] = []
        for driver in self._drivers:
            with contextlib.suppress(psutil.Error):
                tree += [driver, *driver.children(recursive=True)]
        return tree

    def _forget(self, session: BrowserSession) -> None:
        self._sessions.discard(session)

    async def _launch(self) -> None:
        if self._spare is not None:
            self._spare.cancel()
            self._spare = None
        if self._command is None:
            binary = find_chromium(self._executable)
            if self._confined:
                self._private = Path(tempfile.mkdtemp(prefix="tolokaforge-browser-"))
                self._command, self._cgroup = confined_command(
                    binary, self._private, self._confinement, memory_bytes=self._memory_bytes
                )
            else:
                self._command = direct_command(binary)
        if self._playwright is None:
            before = {child.pid for child in psutil.Process().children()}
            self._playwright = await async_playwright().start()
            self._drivers = [child for child in psutil.Process().children() if child.pid not in before]
        # The browser sees none of the runner's environment (no credentials): just enough to start.
        home = "/tmp" if self._confined else str(self._private or tempfile.gettempdir())
        env: dict[str, str | float | bool] = {"PATH": "/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8"}
        try:
            self._browser = await self._playwright.chromium.launch(
                executable_path=self._command.executable,
                args=list(_ARGS),
                env=env,
                timeout=LAUNCH_TIMEOUT_MS,
                handle_sigint=False,
                handle_sigterm=False,
                handle_sighup=False,
            )
        except PlaywrightError as error:
            why = " ".join(str(error).split())[:600]
            raise BrowserUnavailableError(
                f"Chromium ({self._command.binary}, confinement: {self._command.confinement}) did not "
                f"start: {why}. Check that it runs ({self._command.binary} --headless --version) or name "
                "another binary in TOLOKAFORGE_CHROMIUM"
            ) from None
        self._version = self._browser.version

    async def _take_spare(self, browser: Browser) -> BrowserSession:
        spare, self._spare = self._spare, None
        made: BrowserSession | None = None
        if spare is not None:
            try:
                made = await spare
            except (PlaywrightError, BrowserUnavailableError, asyncio.CancelledError):
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # the caller's budget ran out (not the spare's failure): stop here
                made = None
        if made is None or made.browser is not browser:
            made = await self._prepared(browser)
        # The next trial's context is made now, while this one works.
        self._spare = asyncio.create_task(self._prepared(browser))
        return made

    async def _prepared(self, browser: Browser) -> BrowserSession:
        """A fresh context and page, every request already routed (refused until a trial binds it)."""
        try:
            context = await browser.new_context(
                viewport={"width": _SPARE_VIEWPORT[0], "height": _SPARE_VIEWPORT[1]},
                service_workers="block",  # a service worker would answer requests behind the routing
                accept_downloads=False,
            )
            session = BrowserSession(context, await context.new_page(), browser.is_connected, self._forget)
            await session.prepare()
            return session
        except PlaywrightError as error:
            raise BrowserUnavailableError(f"could not open a browser context: {error}") from None


def _reap(processes: list[psutil.Process]) -> None:
    _, alive = psutil.wait_procs(processes, timeout=5)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(alive, timeout=5)


def _remove_cgroup(group: TrialCgroup) -> None:
    group.kill_all()  # nothing of the browser's outlives the pool
    group.remove()
