"""grading.yaml ``web_checks``: the list of checks read into WebChecksConfig, and what ``validate`` checks.

The model (core/models/web.py) already refuses a check with no kind or two; here the rest of what would
make a check meaningless is refused naming its key: an empty pattern or text (an empty substring is
found on every page), a CSS selector the browser could not run, and checks on a task with no browser.
Selectors are parsed with ``cssselect`` (the parser Scrapy and lxml use), which reads the selectors
Chromium runs except the newest ``:nth-child(... of S)`` form.
"""

from __future__ import annotations

from pathlib import Path

from cssselect import SelectorError, parse

from tolokaforge.core.models import WebCheck, WebChecksConfig

from .problems import ProblemLog

__all__ = ["check_web_checks_browser", "css_selector_problem", "web_checks_config"]

_TEXT_KEYS = ("final_url", "page_contains", "page_lacks", "element_text", "not_visited")


def web_checks_config(log: ProblemLog, checks: list[WebCheck] | None, file: Path) -> WebChecksConfig | None:
    """The checks as the runner's config; None (after recording why) when one is meaningless or absent."""
    if checks is None:
        return None
    mark = log.mark()
    for index, check in enumerate(checks):
        key = f"web_checks[{index}]"
        for name in _TEXT_KEYS:
            value: str | None = getattr(check, name)
            if value is not None and not value.strip():
                log.add(file, f"{key}.{name}", "must not be empty (an empty text or pattern says nothing)")
        for position, pattern in enumerate(check.visited or []):
            if not pattern.strip():
                log.add(file, f"{key}.visited[{position}]", "must not be empty")
        for name in ("element", "element_absent"):
            selector: str | None = getattr(check, name)
            if selector is not None:
                problem = css_selector_problem(selector)
                if problem:
                    log.add(file, f"{key}.{name}", problem)
    if log.since(mark):
        return None
    return WebChecksConfig(checks=checks)


def css_selector_problem(selector: str) -> str | None:
    """Why the browser could not run ``selector``; None when it parses."""
    if not selector.strip():
        return "must not be empty"
    try:
        parse(selector)
    except SelectorError as error:
        return f"{selector!r} is not a valid CSS selector: {error}"
    return None


def check_web_checks_browser(
    log: ProblemLog, config: WebChecksConfig | None, has_browser: bool, file: Path
) -> bool:
    """Web checks read what the trial's browser saw: False (after recording it) when the task offers none."""
    if config is None or has_browser:
        return True
    log.add(
        file,
        "web_checks",
        "the task offers no browser, so nothing would ever be seen: enable `browser` in "
        "tools.agent.enabled (docs/web-tasks.md)",
    )
    return False
