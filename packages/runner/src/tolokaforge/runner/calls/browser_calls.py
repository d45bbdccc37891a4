"""The ``browser`` tool: a tool kind the runner serves itself, driving the trial's page in the shared browser.

A task with ``TaskDescription.browser`` gets :class:`BrowserTool` in its agent registry. A call runs
the model's actions in the trial's browser session (opened at its first call, one per trial, on the
runner's one :class:`~tolokaforge.runner.browser.BrowserPool`). Every request the page sends to the
task's site is answered by the task's hidden site tool, run in the trial's worker exactly like a
python tool call, its table changes committed through the executor's commit path; so a web trial's
state is graded as a tool trial's is. The site answers only while a call drives the page, one
request at a time: the site changes the tables only under the trial's lock, in call order.

An action that fails is the tool's own error answer (ERROR, ``reported``): the site's changes stand.
The browser missing or dead is the runner's failure (``infrastructure``), never the agent's.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urljoin

from tolokaforge.contracts.runner import ExecutionStatus
from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.core.browser_tool import BROWSER_TOOL_DESCRIPTION, browser_tool_parameters
from tolokaforge.core.models import BrowserSettings, ToolDescription, ToolSource
from tolokaforge.core.runner_api import Attachment

from ..browser.pages import SiteHandler, SiteRequest, SiteResponse, StepResult
from ..errors import ToolFailure
from ..tools import Tool
from ..tools.base import compile_parameters
from ..tools.python_tools import Finished
from ..tools.schema_check import SchemaCheck
from ..trials.context import TrialBrowser, TrialContext

if TYPE_CHECKING:
    from ..browser import BrowserPool, BrowserSession
    from ..process.confinement import Confinement

__all__ = [
    "BROWSER_TIMEOUT_S",
    "BROWSER_TOOL_NAME",
    "BrowserAnswer",
    "BrowserCalls",
    "BrowserTool",
    "browser_replay",
    "browser_tool",
    "close_page",
]

log = logging.getLogger(__name__)

BROWSER_TOOL_NAME = "browser"
BROWSER_TIMEOUT_S = 60.0
"""A browser call's budget unless the caller asks for another (the public tool's)."""

_SOURCE = ToolSource(toolset="tolokaforge.runner", module_path="<runner>.browser", class_name="<served>")
"""Not a module: the runner serves this tool itself, and no code path imports a non-WorkerTool's source."""

RunSite = Callable[[TrialContext, Tool, Mapping[str, Any]], Awaitable[Finished]]
"""Runs the site tool like a python tool call (worker or thread) and commits its changes."""


@dataclass(frozen=True)
class BrowserTool:
    """The ``browser`` tool of one task: its description and the task's browser settings."""

    description: ToolDescription
    validator: SchemaCheck
    settings: BrowserSettings

    def invoke(self, data: dict[str, Any], arguments: Mapping[str, Any]) -> str:
        # Registries hold every kind of tool; the executor sends this one to the browser.
        raise TypeError("the browser tool runs in the trial's browser session; call it through the executor")


def browser_tool(settings: BrowserSettings) -> BrowserTool:
    """The task's ``browser`` tool (built once per distinct settings)."""
    return _browser_tool(settings.model_dump_json())


@functools.lru_cache(maxsize=256)
def _browser_tool(settings_json: str) -> BrowserTool:
    settings = BrowserSettings.model_validate_json(settings_json)
    description = ToolDescription(
        name=BROWSER_TOOL_NAME,
        description=BROWSER_TOOL_DESCRIPTION,
        parameters=browser_tool_parameters(settings),
        source=_SOURCE,
        category="compute",
        timeout_s=BROWSER_TIMEOUT_S,
    )
    return BrowserTool(description, compile_parameters(description), settings)


@dataclass(frozen=True)
class BrowserAnswer:
    """A browser call that ran: its text, or the failed action's error (``reported``), and its effects."""

    output: str
    reported: str | None
    mutations: int
    attachments: tuple[Attachment, ...]


class BrowserCalls:
    """The runner's browser: one pool (started at the first browser call), the trials' pages on it."""

    def __init__(
        self, run_site: RunSite, *, confined: bool, confinement: Confinement | None = None, memory_bytes: int
    ) -> None:
        self._run_site = run_site
        self.confined = confined
        """The browser runs inside bubblewrap; a pool that cannot confine then refuses to start."""
        self._confinement = confinement
        """The runner's sandbox: the browser gets its layers (as accepted) and a cgroup of its tree."""
        self._memory_bytes = memory_bytes
        self._pool: BrowserPool | None = None

    def pool(self) -> BrowserPool:
        if self._pool is None:
            # Imported here: Playwright costs a runner that never runs a web task nothing.
            from ..browser import BrowserPool

            self._pool = BrowserPool(
                confined=self.confined, confinement=self._confinement, memory_bytes=self._memory_bytes
            )
        return self._pool

    def report(self) -> dict[str, str]:
        """What the browser is (HealthCheck); empty until a web task used it."""
        return self._pool.report() if self._pool is not None else {}

    async def close(self) -> None:
        """Stop the browser (runner shutdown, after every trial was released)."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

    async def release(self, trial: TrialContext) -> None:
        """Close the trial's page (CleanupTrial, ResetTrial, runner shutdown)."""
        await close_page(trial.browser)

    async def run(
        self,
        trial: TrialContext,
        tool: BrowserTool,
        arguments: Mapping[str, Any],
        budget: float,
        *,
        record: bool,
    ) -> BrowserAnswer:
        """Run one call's actions; ``record``: add what the page did to the trial's web record."""
        from ..browser import BrowserUnavailableError, PageCrashed

        page, settings = trial.browser, tool.settings
        page.site_mutations, page.site_lost = 0, None
        page.ends_at = asyncio.get_running_loop().time() + budget
        page.driving = True
        actions = cast(Sequence[Mapping[str, Any]], arguments.get("actions", []))
        deadline = asyncio.timeout(budget)
        try:
            async with deadline:
                try:
                    session = await self._session(trial, settings, page)
                    # A call that is not recorded (golden replay) keeps no screenshot: none is taken.
                    shoot = record and (settings.screenshots or settings.vision)
                    step = await session.run(actions, screenshot=shoot)
                except PageCrashed as error:  # the page's doing: its call fails, the trial goes on
                    await close_page(page)
                    raise ToolFailure(
                        ExecutionStatus.ERROR,
                        ToolErrorCategory.PROCESS_CRASHED,
                        f"tool {BROWSER_TOOL_NAME!r}: {error}; the page was closed (the next call opens it "
                        "again) and the site's changes stand",
                        details={"tool": BROWSER_TOOL_NAME},
                    ) from error
                except BrowserUnavailableError as error:
                    await close_page(page)
                    raise _browser_lost(str(error)) from error
        except TimeoutError as error:
            if not deadline.expired():
                raise
            # Mid-action: the page is in no state to go on from. The next call opens it afresh. Not
            # driven from here on, so the site requests the page queued are not run (_answer).
            page.driving = False
            await close_page(page)
            raise ToolFailure(
                ExecutionStatus.TIMEOUT,
                ToolErrorCategory.TIMEOUT,
                f"tool {BROWSER_TOOL_NAME!r} exceeded its budget of {budget:g}s; the page was closed "
                "(the next call opens it again) and the site's changes were discarded",
                retryable=True,
                details={"budget_seconds": budget},
            ) from error
        finally:
            page.driving = False
            await _settled(page)
        if page.site_lost is not None:
            raise page.site_lost
        if record:
            trial.web.add(step)
        return _answer(step, settings, page.site_mutations)

    async def _session(
        self, trial: TrialContext, settings: BrowserSettings, page: TrialBrowser
    ) -> BrowserSession:
        if page.session is None:
            if settings.site_tool is None:  # no site behind the declared origins: every request is refused
                settings = settings.model_copy(update={"sites": []})
            page.session = await self.pool().open_session(
                settings, self._server(trial, settings.site_tool, page), probes=_probes(trial)
            )
        return page.session

    def _server(self, trial: TrialContext, site_tool: str | None, page: TrialBrowser) -> SiteHandler:
        async def serve(request: SiteRequest) -> SiteResponse:
            if site_tool is None:
                return _text_page(502, "this task declares no site")
            if not page.driving:
                # Between calls (a timer, a late image): the tables change only while a call runs.
                return _text_page(503, "the site answers only while a browser call drives the page")
            # Its own task: a route handler cancelled mid-request (the page closed) must not cut a
            # site call in the worker short; the call that drives the page waits for it (_settled).
            answer = asyncio.ensure_future(self._answer(trial, site_tool, request, page))
            page.site_requests.add(answer)
            answer.add_done_callback(page.site_requests.discard)
            return await asyncio.shield(answer)

        return serve

    async def _answer(
        self, trial: TrialContext, site_tool: str, request: SiteRequest, page: TrialBrowser
    ) -> SiteResponse:
        async with page.site_lock:  # pages fire parallel requests; the worker answers one at a time
            if not page.driving:
                # Queued behind the lock when the call ended or ran out of budget: a page that fires
                # many slow requests must not hold the call (and the trial) one site budget per request.
                return _text_page(503, "the site answers only while a browser call drives the page")
            tool = trial.tools.agent.get(site_tool) or trial.tools.user.get(site_tool)
            if tool is None:
                return _text_page(500, f"the site tool {site_tool!r} is not registered")
            arguments = {
                "method": request.method,
                "url": request.url,
                "headers": dict(request.headers),
                "body_b64": base64.b64encode(request.body).decode("ascii"),
            }
            try:
                finished = await self._run_site(trial, tool, arguments)
            except ToolFailure as failure:
                if failure.infrastructure:
                    page.site_lost = page.site_lost or failure
                    return _text_page(503, f"the site's state could not be stored: {failure.message}")
                return _text_page(500, f"the site failed: {failure.message}")
            page.site_mutations += sum(len(change["operations"]) for change in finished.changes)
            if finished.reported is not None:
                return _text_page(500, f"the site reported an error: {finished.reported}")
            return _site_response(finished.output, request.url)


@contextlib.asynccontextmanager
async def browser_replay(trial: TrialContext) -> AsyncGenerator[None]:
    """Golden replay's browser: a fresh page for the replay, closed after; the trial's own page and
    web record are left as they were (its page does not answer site requests meanwhile: not driven)."""
    own = trial.browser
    trial.browser = TrialBrowser()
    try:
        yield
    finally:
        replay, trial.browser = trial.browser, own
        await close_page(replay)


async def close_page(page: TrialBrowser) -> None:
    """Close a page's browser session, if it has one; closing never fails a caller."""
    session, page.session = page.session, None
    if session is None:
        return
    try:
        await session.close()
    except Exception as error:  # a browser already gone has nothing left to close
        log.warning("closing a browser session failed: %s", error)
    await _settled(page)


async def _settled(page: TrialBrowser) -> None:
    """Wait for the site requests still being answered: their commits belong to the call that sent them."""
    while page.site_requests:
        await asyncio.wait(set(page.site_requests))


def _probes(trial: TrialContext) -> tuple[str, ...]:
    """The CSS selectors the task's web checks read on the final page."""
    checks = trial.spec.task.grading.web_checks
    return checks.selectors if checks is not None else ()


def _answer(step: StepResult, settings: BrowserSettings, mutations: int) -> BrowserAnswer:
    observation = _wire_text(step.observation)
    attachments = (
        (Attachment("image/jpeg", step.screenshot, "screenshot", for_model=settings.vision),)
        if step.screenshot
        else ()
    )
    if step.error is None:
        return BrowserAnswer(observation, None, mutations, attachments)
    return BrowserAnswer("", f"{_wire_text(step.error)}\n\n{observation}", mutations, attachments)


def _wire_text(text: str) -> str:
    """Page text may hold lone surrogates (JavaScript strings can); the wire carries UTF-8 only."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def _site_response(output: str, url: str) -> SiteResponse:
    """The site tool's JSON answer ``{status, headers, body_b64}``; anything else is a 500 saying why.

    A redirect's relative ``location`` is made absolute against the request's URL: Chromium does not
    follow a relative one from an intercepted response (the page ends on an error page).
    """
    try:
        answer: Any = json.loads(output)
        status, headers, body = answer["status"], answer.get("headers", {}), answer.get("body_b64", "")
        if not isinstance(status, int) or not 100 <= status <= 599:
            raise ValueError(f"status {status!r} is not an HTTP status")
        if not isinstance(headers, dict) or not isinstance(body, str):
            raise ValueError("headers must be an object and body_b64 a string")
        named = {str(name): str(value) for name, value in cast(dict[Any, Any], headers).items()}
        for name, value in named.items():
            if name.lower() == "location":
                named[name] = urljoin(url, value)
        return SiteResponse(status, named, base64.b64decode(body, validate=True))
    except (ValueError, TypeError, KeyError) as error:  # json and base64 errors are ValueErrors
        return _text_page(500, f"the site tool's answer is not {{status, headers, body_b64}}: {error}")


def _text_page(status: int, text: str) -> SiteResponse:
    return SiteResponse(status, {"content-type": "text/plain; charset=utf-8"}, text.encode("utf-8"))


def _browser_lost(why: str) -> ToolFailure:
    """The browser is missing or died: the runner's failure, so the host counts the trial as lost."""
    return ToolFailure(
        ExecutionStatus.ERROR,
        ToolErrorCategory.UNKNOWN,
        f"the browser is unavailable: {why}",
        retryable=True,
        details={"infrastructure": "browser"},
        infrastructure=True,
    )
