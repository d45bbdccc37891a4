"""What a ``browser`` call shows the model and keeps for grading: the page read in one evaluation.

One script reads the title, the URL, the whole visible text, the interactive elements in the
viewport (grid position, label, a stable selector) and the probed selectors, so a call pays one
round trip to the page for all of it.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

from playwright.async_api import CDPSession, Page

from .pages import ElementProbe, PageSnapshot

__all__ = ["PageView", "format_page", "read_page", "take_screenshot"]

MAX_CONTENT = 6000
"""Characters of page text shown to the model (the snapshot keeps all of it)."""
MAX_ELEMENTS = 120

_READ_PAGE = r"""
(probes) => {
  const W = window.innerWidth, H = window.innerHeight;
  const clean = (s) => (s || '').replace(/\s+/g, ' ').trim();
  const unique = (sel) => { try { return document.querySelectorAll(sel).length === 1; } catch (e) { return false; } };
  const quote = (v) => '"' + v.replace(/\\/g, '\\\\').replace(/"/g, '\\"') + '"';
  const selectorOf = (el) => {
    const tag = el.tagName.toLowerCase();
    if (el.id && unique('#' + CSS.escape(el.id))) return '#' + CSS.escape(el.id);
    const testid = el.getAttribute('data-testid');
    if (testid && unique('[data-testid=' + quote(testid) + ']')) return '[data-testid=' + quote(testid) + ']';
    const name = el.getAttribute('name');
    if (name) {
      const byName = tag + '[name=' + quote(name) + ']';
      if (unique(byName)) return byName;
      const value = el.getAttribute('value');
      if (value !== null && unique(byName + '[value=' + quote(value) + ']')) return byName + '[value=' + quote(value) + ']';
    }
    const href = el.getAttribute('href');
    if (tag === 'a' && href && unique('a[href=' + quote(href) + ']')) return 'a[href=' + quote(href) + ']';
    return '';
  };
  const label = (el) => {
    for (const s of [el.innerText, el.getAttribute('aria-label'), el.getAttribute('title'),
                     el.getAttribute('placeholder'), el.labels && el.labels[0] && el.labels[0].innerText,
                     el.tagName === 'INPUT' && ['submit', 'button'].includes(el.type) ? el.value : '']) {
      const c = clean(s);
      if (c) return c.slice(0, 60);
    }
    return '';
  };
  const elements = [];
  const seen = new Set();
  for (const el of document.querySelectorAll('a, button, input, select, textarea, [onclick], [role=button], [contenteditable=""], [contenteditable=true]')) {
    if (seen.has(el) || (el.tagName === 'INPUT' && el.type === 'hidden')) continue;
    seen.add(el);
    const r = el.getBoundingClientRect();
    const left = Math.max(r.left, 0), right = Math.min(r.right, W);
    const top = Math.max(r.top, 0), bottom = Math.min(r.bottom, H);
    if (r.width <= 0 || r.height <= 0 || right <= left || bottom <= top) continue;
    const style = getComputedStyle(el);
    if (style.visibility === 'hidden' || style.display === 'none') continue;
    let value = '';
    if (el.tagName === 'SELECT') value = el.selectedOptions.length ? clean(el.selectedOptions[0].text) : '';
    else if ((el.tagName === 'INPUT' && !['submit', 'button', 'checkbox', 'radio'].includes(el.type)) || el.tagName === 'TEXTAREA') value = el.value;
    else if (el.tagName === 'INPUT') value = el.checked ? 'checked' : '';
    elements.push({
      tag: el.tagName.toLowerCase() + (el.tagName === 'INPUT' ? ' ' + el.type : '') + (el.hasAttribute('onclick') && !['A', 'BUTTON'].includes(el.tagName) ? '[onclick]' : ''),
      text: label(el), href: el.tagName === 'A' ? (el.href || '') : '', value: value.slice(0, 60),
      x: Math.round((left + right) / 2 / W * 1000), y: Math.round((top + bottom) / 2 / H * 1000),
      selector: selectorOf(el),
    });
  }
  const found = {};
  for (const sel of probes) {
    try {
      const all = document.querySelectorAll(sel);
      found[sel] = [all.length, all.length ? (all[0].innerText || all[0].textContent || '') : ''];
    } catch (e) { found[sel] = [0, '']; }
  }
  const leaving = !!window.__tfLeaving;  // set by the session's init script
  window.__tfLeaving = false;
  return { scroll: [window.scrollX, window.scrollY], url: location.href, title: document.title, text: document.body ? document.body.innerText : '', elements, found, leaving };
}
"""


class PageView:
    """The page as one evaluation read it: the snapshot graders keep and the elements the model sees."""

    __slots__ = ("elements", "leaving", "scroll", "snapshot")

    def __init__(
        self,
        snapshot: PageSnapshot,
        elements: Sequence[Mapping[str, Any]],
        scroll: tuple[float, float],
        leaving: bool = False,
    ) -> None:
        self.snapshot = snapshot
        self.elements = elements
        self.scroll = scroll
        """The page's scroll offset (a screenshot's clip is in page coordinates)."""
        self.leaving = leaving
        """The page was about to leave when it was read (a navigation it started is still to come)."""


async def read_page(page: Page, probes: Sequence[str]) -> PageView:
    """Read the page (raises Playwright's error if the page is gone or navigating)."""
    raw = cast("dict[str, Any]", await page.evaluate(_READ_PAGE, list(probes)))
    found = cast("dict[str, list[Any]]", raw["found"])
    snapshot = PageSnapshot(
        url=str(raw["url"]),
        title=str(raw["title"]),
        text=str(raw["text"]),
        elements={sel: ElementProbe(int(v[0]), str(v[1])) for sel, v in found.items()},
    )
    scroll = cast("list[float]", raw["scroll"])
    elements = cast("list[dict[str, Any]]", raw["elements"])
    return PageView(snapshot, elements, (scroll[0], scroll[1]), bool(raw.get("leaving")))


def format_page(view: PageView) -> str:
    """The page part of the observation: title, URL, text, interactive elements in grid positions."""
    snap = view.snapshot
    text = snap.text.strip()
    if len(text) > MAX_CONTENT:
        text = text[:MAX_CONTENT] + f"\n... ({len(snap.text) - MAX_CONTENT} more characters)"
    lines = [f"Page: {snap.title}", f"URL: {snap.url}", "", "Content:", text or "(no text)"]
    if view.elements:
        lines += ["", "Interactive Elements (grid position; selector where the element has a stable one):"]
        for element in view.elements[:MAX_ELEMENTS]:
            line = f"  [{element['tag']}]"
            if element["text"]:
                line += f" {element['text']}"
            if element["value"]:
                line += f' value: "{element["value"]}"'
            if element["href"]:
                line += f" (href: {element['href']})"
            line += f" @ ({element['x']}, {element['y']})"
            if element["selector"]:
                line += f" selector: {element['selector']}"
            lines.append(line)
        if len(view.elements) > MAX_ELEMENTS:
            lines.append(f"  ... {len(view.elements) - MAX_ELEMENTS} more")
    return "\n".join(lines)


SCREENSHOT_SCALE = 2 / 3
SCREENSHOT_QUALITY = 70


async def take_screenshot(cdp: CDPSession, width: int, height: int, scroll: tuple[float, float]) -> bytes:
    """A JPEG of the viewport at 2/3 scale (tools/bench/browser.py: the same cost as full size, half the bytes)."""
    clip = {"x": scroll[0], "y": scroll[1], "width": width, "height": height, "scale": SCREENSHOT_SCALE}
    send = cast("Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]", cdp.send)  # pyright: ignore[reportUnknownMemberType]
    answer = await send(
        "Page.captureScreenshot",
        {
            "format": "jpeg",
            "quality": SCREENSHOT_QUALITY,
            "clip": clip,
        },
    )
    return base64.b64decode(cast("str", answer["data"]))
