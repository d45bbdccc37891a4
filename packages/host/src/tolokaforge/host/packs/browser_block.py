"""``browser`` in ``tools.agent.enabled`` and the ``tools.agent.browser`` block: the task's BrowserSettings.

The runner serves the ``browser`` tool itself (no ToolDescription travels for it): the task carries
``TaskDescription.browser``, whose sites are the ones ``initial_state.mock_web`` declares (web_sites.py),
answered by the hidden site tool. A task with ``browser`` and no site reaches nothing but ``data:`` and
``about:`` pages. The public ``mobile`` tool is refused by name: nothing here serves it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

from pydantic import ValidationError

from tolokaforge.core.browser_tool import browser_tool_parameters
from tolokaforge.core.models import (
    BROWSER_ACTIONS,
    BrowserSettings,
    ToolDescription,
    ToolSource,
    describe_validation_error,
)

from .files import TaskFile
from .problems import ProblemLog
from .web_sites import SITE_TOOL, SiteDeclaration, site_origins

__all__ = ["BROWSER", "REFUSED_TOOLS", "RUNNER_TOOLS", "browser_schema_tool", "browser_settings"]

BROWSER = "browser"
RUNNER_TOOLS = (BROWSER,)
"""Built-ins the runner serves itself, from the task's settings."""
REFUSED_TOOLS = ("mobile",)
"""Public built-ins refused by name (browser_settings says why)."""
_KEYS = ("initial_url", "allowed_actions", "viewport", "screenshots", "vision")
_MOBILE = (
    "is not supported: the public mobile tool (app screens over its mock service) has no counterpart "
    "here; a web task uses browser"
)


def browser_settings(
    log: ProblemLog, spec: TaskFile, file: Path, site: SiteDeclaration | None
) -> BrowserSettings | None:
    """The task's browser settings, None when it does not enable ``browser`` (or after logging why not)."""
    agent = spec.tools.agent if spec.tools is not None else None
    if agent is None:
        return None
    enabled = agent.enabled or []
    if agent.mobile is not None:
        log.add(file, "tools.agent.mobile", _MOBILE)
    for index, name in enumerate(enabled):
        if name in REFUSED_TOOLS:
            log.add(file, f"tools.agent.enabled[{index}]", f"{name!r} {_MOBILE}")
    block = agent.browser
    if BROWSER not in enabled:
        if block is not None:
            log.add(file, "tools.agent.browser", "is set, but 'browser' is not in tools.agent.enabled")
        return None
    mark = log.mark()
    values = _read_block(log, block or {}, file)
    sites = site_origins(site) if site is not None else []
    initial_url = values.get("initial_url")
    if isinstance(initial_url, str):
        _check_initial_url(log, initial_url, sites, file)
    if log.since(mark):
        return None
    try:
        return BrowserSettings(**values, sites=sites, site_tool=SITE_TOOL if site is not None else None)
    except ValidationError as error:
        log.add(file, "tools.agent.browser", describe_validation_error(error))
        return None


def _read_block(log: ProblemLog, block: dict[str, Any], file: Path) -> dict[str, Any]:
    """The block's keys as BrowserSettings fields; each bad key logged with its path."""
    where = "tools.agent.browser"
    values: dict[str, Any] = {}
    for key, value in block.items():
        if key not in _KEYS:
            log.add(file, f"{where}.{key}", f"is not supported (the known keys: {', '.join(_KEYS)})")
        elif key == "initial_url":
            if isinstance(value, str) and value:
                values["initial_url"] = value
            else:
                log.add(file, f"{where}.initial_url", "must be a URL (the page opened before the first call)")
        elif key == "allowed_actions":
            actions = _actions(log, value, file)
            if actions is not None:
                values["allowed_actions"] = actions
        elif key == "viewport":
            values.update(_viewport(log, value, file))
        elif isinstance(value, bool):
            values[key] = value
        else:
            log.add(file, f"{where}.{key}", "must be true or false")
    return values


def _actions(log: ProblemLog, value: object, file: Path) -> list[str] | None:
    where = "tools.agent.browser.allowed_actions"
    if not isinstance(value, list) or not value:
        log.add(file, where, f"must be a non-empty list of browser actions ({', '.join(BROWSER_ACTIONS)})")
        return None
    actions: list[str] = []
    for index, action in enumerate(cast(list[object], value)):
        if action not in BROWSER_ACTIONS:
            log.add(
                file,
                f"{where}[{index}]",
                f"{action!r} is not a browser action (the actions: {', '.join(BROWSER_ACTIONS)})",
            )
        elif action in actions:
            log.add(file, f"{where}[{index}]", f"{action!r} is listed twice")
        else:
            actions.append(cast(str, action))
    return actions


def _viewport(log: ProblemLog, value: object, file: Path) -> dict[str, int]:
    where = "tools.agent.browser.viewport"
    if not isinstance(value, dict):
        log.add(file, where, "must be {width, height} in CSS pixels (200 to 4096 each)")
        return {}
    found: dict[str, int] = {}
    for key, size in cast(dict[str, object], value).items():
        if key not in ("width", "height"):
            log.add(file, f"{where}.{key}", "is not supported (the known keys: width, height)")
        elif not isinstance(size, int) or isinstance(size, bool) or not 200 <= size <= 4096:
            log.add(file, f"{where}.{key}", "must be a whole number of CSS pixels from 200 to 4096")
        else:
            found[f"viewport_{key}"] = size
    return found


def _origin(url: str) -> str | None:
    """``scheme://host[:port]`` with a default port left out, None for a URL that is not http(s)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    default = {"http": 80, "https": 443}[parts.scheme]
    host = parts.hostname if port in (None, default) else f"{parts.hostname}:{port}"
    return f"{parts.scheme}://{host}"


def _check_initial_url(log: ProblemLog, url: str, sites: list[str], file: Path) -> None:
    where = "tools.agent.browser.initial_url"
    if url.startswith(("about:", "data:")):
        return
    origin = _origin(url)
    if origin is None:
        log.add(file, where, f"{url!r} is not an http(s), about: or data: URL")
    elif origin not in {_origin(site) for site in sites}:
        reach = (
            f"the browser reaches only the task's sites ({', '.join(sites)})"
            if sites
            else "the task declares no site (initial_state.mock_web.base_url), so the browser reaches "
            "only about: and data: pages"
        )
        log.add(file, where, f"{url!r} is outside the task's sites: {reach}")


def browser_schema_tool(settings: BrowserSettings) -> ToolDescription:
    """The ``browser`` tool as the runner describes it (core/browser_tool.py), to check golden arguments against."""
    return ToolDescription(
        name=BROWSER,
        parameters=browser_tool_parameters(settings),
        source=ToolSource(module_path="tolokaforge.runner.browser", class_name=BROWSER),
    )
