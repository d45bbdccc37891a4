"""The web_checks component: what the trial's browser saw, checked against the task's web checks.

Read from the trial's web record (trials/web.py): the final page (its URL, visible text and the
elements the runner probed for the checks' selectors) and the main-frame URLs loaded on the way.
The score is the share of checks met; each check is one item row. With no final page (the agent
never used the browser) every check fails except ``not_visited``, which nothing visited satisfies.

A selector a check reads that the final page was not probed for is not a verdict on the agent: the
runner probes every selector of the task's web checks, so a missing probe means the grade cannot be
given (:class:`WebChecksUnavailable`), never a silent failure.
"""

from __future__ import annotations

from typing import Any

from tolokaforge.contracts.runner import GradeReason, GradeReasonVerdict
from tolokaforge.core.models import WebCheck, WebChecksConfig, url_pattern_matches

from ..browser.pages import ElementProbe, PageSnapshot
from ..trials.web import WebRecord
from .component import ITEMS, ComponentResult, ItemResult, verdict_of

__all__ = ["NAME", "WebChecksUnavailable", "check_spec", "evaluate_web_checks"]

NAME = "web_checks"
NEVER_USED = "the browser was never used"
_SHOWN_CHARS = 120
"""How much of a page text or element text a failure message quotes."""
_SHOWN_URLS = 20
"""How many visited URLs a failure message lists (the item's details keep them all)."""


class WebChecksUnavailable(Exception):
    """The web record cannot answer a check as written (a selector the final page was not probed for)."""


def evaluate_web_checks(config: WebChecksConfig, record: WebRecord) -> ComponentResult:
    """The share of checks met; :class:`WebChecksUnavailable` when one cannot be evaluated."""
    items = [_item(index, check, record) for index, check in enumerate(config.checks)]
    met = sum(item.met for item in items)
    score = met / len(items)
    summary = f"{NAME}: all {len(items)} met" if met == len(items) else f"{NAME}: {met}/{len(items)} met"
    parts = [GradeReason(kind=NAME, verdict=verdict_of(score), message=summary)]
    for item, check in zip(items, config.checks, strict=True):
        if not item.met:
            parts.append(
                GradeReason(
                    kind=NAME,
                    verdict=GradeReasonVerdict.FAILED,
                    message=f"{NAME}: {_named(check)} not met: {item.message}",
                )
            )
    segment = " | ".join(part.message for part in parts)
    return ComponentResult(NAME, score, segment, extra={ITEMS: items}, parts=parts)


def check_spec(check: WebCheck) -> str:
    """The check as one short phrase, e.g. ``final_url '/orders/*'`` (its label when it has no description)."""
    kind = check.kind
    if check.visited is not None:
        return "visited " + " -> ".join(repr(pattern) for pattern in check.visited)
    spec = f"{kind} {getattr(check, kind)!r}"
    if check.element_text is not None:
        spec += f" with text {check.element_text!r}"
    return spec


def _named(check: WebCheck) -> str:
    spec = check_spec(check)
    return f"{check.description!r} ({spec})" if check.description else spec


def _item(index: int, check: WebCheck, record: WebRecord) -> ItemResult:
    met, message, details = _evaluate(check, record)
    return ItemResult(NAME, index, check.description or check_spec(check), met, message, details)


def _evaluate(check: WebCheck, record: WebRecord) -> tuple[bool, str, dict[str, Any]]:
    if check.not_visited is not None:
        return _not_visited(check.not_visited, record.visited)
    final = record.final
    if final is None:
        return False, NEVER_USED, {}
    if check.visited is not None:
        return _visited(check.visited, record.visited)
    details: dict[str, Any] = {"final_url": final.url}
    if check.final_url is not None:
        met = url_pattern_matches(check.final_url, final.url)
        return met, f"the page ended on {final.url}", details
    if check.page_contains is not None:
        found = check.page_contains.lower() in final.text.lower()
        return found, _on_page("found" if found else "not found", final), details
    if check.page_lacks is not None:
        found = check.page_lacks.lower() in final.text.lower()
        return not found, _on_page("found" if found else "not found", final), details
    if check.element is not None:
        return _element(check.element, check.element_text, final)
    assert check.element_absent is not None  # WebCheck validates exactly one kind
    probe = _probe(check.element_absent, final)
    details.update(count=probe.count)
    if probe.count == 0:
        return True, f"nothing matches on {final.url}", details
    return False, f"{_elements(probe.count)} match on {final.url}", details


def _element(selector: str, text: str | None, final: PageSnapshot) -> tuple[bool, str, dict[str, Any]]:
    probe = _probe(selector, final)
    details: dict[str, Any] = {"final_url": final.url, "count": probe.count, "text": _cut(probe.text)}
    if probe.count == 0:
        return False, f"nothing matches on {final.url}", details
    if text is not None and text.lower() not in probe.text.lower():
        return False, f"the first of {_elements(probe.count)} reads {_cut(probe.text)!r}", details
    return True, f"{_elements(probe.count)} match on {final.url}", details


def _visited(patterns: list[str], visited: list[str]) -> tuple[bool, str, dict[str, Any]]:
    """The patterns matched in order by page loads, others allowed between them."""
    details: dict[str, Any] = {"visited": visited}
    at = 0
    for number, pattern in enumerate(patterns):
        found = next((i for i in range(at, len(visited)) if url_pattern_matches(pattern, visited[i])), None)
        if found is None:
            after = f" after {patterns[number - 1]!r}" if number else ""
            return False, f"no page load{after} matched {pattern!r}; visited: {_listed(visited)}", details
        at = found + 1
    return True, f"matched in order; visited: {_listed(visited)}", details


def _not_visited(pattern: str, visited: list[str]) -> tuple[bool, str, dict[str, Any]]:
    hits = [url for url in visited if url_pattern_matches(pattern, url)]
    details: dict[str, Any] = {"visited": visited}
    if hits:
        return False, f"visited {hits[0]}", details
    return True, f"no page load matched; visited: {_listed(visited)}", details


def _probe(selector: str, final: PageSnapshot) -> ElementProbe:
    probe = final.elements.get(selector)
    if probe is None:
        probed = ", ".join(repr(s) for s in final.elements) or "none"
        raise WebChecksUnavailable(
            f"selector {selector!r} was not probed on the final page ({final.url}); probed: {probed}"
        )
    return probe


def _on_page(verdict: str, final: PageSnapshot) -> str:
    return f"{verdict} on {final.url} (page text starts {_cut(final.text)!r})"


def _elements(count: int) -> str:
    return "1 element" if count == 1 else f"{count} elements"


def _listed(urls: list[str]) -> str:
    if not urls:
        return "nothing"
    shown = ", ".join(urls[:_SHOWN_URLS])
    return shown if len(urls) <= _SHOWN_URLS else f"{shown}, ... ({len(urls)} in all)"


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."
