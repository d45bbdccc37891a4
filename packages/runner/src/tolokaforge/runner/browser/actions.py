"""The ``browser`` tool's fifteen action types, each done on a page with real input events.

An action either returns its line of the observation ("Clicked at (x, y)") or raises
:class:`ActionFailed` saying why; the session stops the call there. Positions are the public tool's
0-999 grid over the viewport; click_at, hover_at, type_text_at and select also take a CSS
``selector`` (the element is scrolled into view and its centre used).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import quote_plus, urljoin

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page

__all__ = ["KEY_ALIASES", "ActionFailed", "Surface", "perform"]

GRID = 1000
SCROLL_DOCUMENT_PX = 500
"""scroll_document moves the page this far (the public tool's step)."""
SCROLL_AT_PX_PER_UNIT = 0.5
"""scroll_at: pixels per unit of magnitude (the public tool's: 800 -> 400 px)."""

KEY_ALIASES = {
    "CTRL": "Control",
    "CONTROL": "Control",
    "ALT": "Alt",
    "OPTION": "Alt",
    "SHIFT": "Shift",
    "META": "Meta",
    "CMD": "Meta",
    "COMMAND": "Meta",
    "ENTER": "Enter",
    "RETURN": "Enter",
    "TAB": "Tab",
    "ESCAPE": "Escape",
    "ESC": "Escape",
    "UP": "ArrowUp",
    "DOWN": "ArrowDown",
    "LEFT": "ArrowLeft",
    "RIGHT": "ArrowRight",
    "BACKSPACE": "Backspace",
    "DEL": "Delete",
    "DELETE": "Delete",
    "SPACE": "Space",
    "SPACEBAR": "Space",
    "HOME": "Home",
    "END": "End",
    "PAGEUP": "PageUp",
    "PAGEDOWN": "PageDown",
}


class ActionFailed(Exception):
    """An action could not be done; the message says why (the model reads it)."""


@dataclass(frozen=True)
class Surface:
    """What actions need besides the page: its size, the site, and the session's own steps."""

    width: int
    height: int
    home: str | None
    """The first declared site (search goes to its /search)."""
    goto: Callable[[str], Awaitable[None]]
    """Open a URL in the page (refuses one outside the task's sites)."""
    screenshot: Callable[[], Awaitable[None]]
    """Take the call's screenshot now."""


Action = Mapping[str, Any]

# What is at a point: the element, whether it takes text, and the <select> it is in.
_AT_POINT = """([x, y]) => {
  const el = document.elementFromPoint(x, y);
  if (!el) return null;
  const editable = el.isContentEditable || el.tagName === 'TEXTAREA' ||
    (el.tagName === 'INPUT' && !['button', 'submit', 'checkbox', 'radio', 'file', 'image', 'reset'].includes(el.type));
  return { tag: el.tagName.toLowerCase(), editable, select: !!el.closest('select') };
}"""

# A selector's element scrolled into view (when it is not), and its centre: one round trip.
_SCROLL_TO = """(selector) => {
  const el = document.querySelector(selector);
  if (!el) return { error: 'no element matches' };
  el.scrollIntoViewIfNeeded ? el.scrollIntoViewIfNeeded(true) : el.scrollIntoView({ block: 'center' });
  const r = el.getBoundingClientRect();
  const style = getComputedStyle(el);
  if (r.width <= 0 || r.height <= 0 || style.visibility === 'hidden') return { error: 'the element is not visible' };
  const editable = el.isContentEditable || el.tagName === 'TEXTAREA' ||
    (el.tagName === 'INPUT' && !['button', 'submit', 'checkbox', 'radio', 'file', 'image', 'reset'].includes(el.type));
  return { x: r.left + r.width / 2, y: r.top + r.height / 2, tag: el.tagName.toLowerCase(), editable };
}"""

# Select what the focused field holds, so the typed text replaces it.
_SELECT_FIELD = """() => {
  const el = document.activeElement;
  if (el && typeof el.select === 'function') el.select();
  else if (el && el.isContentEditable) document.execCommand('selectAll');
}"""

_CHOOSE = """(el, wanted) => {
  const select = el.closest('select');
  if (!select) return { error: 'not a <select>' };
  const needle = wanted.trim().toLowerCase();
  const options = Array.from(select.options);
  const chosen = options.find(o => o.text.trim().toLowerCase() === needle)
    || options.find(o => o.value.trim().toLowerCase() === needle)
    || options.find(o => o.text.toLowerCase().includes(needle));
  if (!chosen) return { error: 'no option ' + JSON.stringify(wanted) + ' (options: ' + options.map(o => JSON.stringify(o.text.trim())).join(', ') + ')' };
  select.value = chosen.value;
  select.dispatchEvent(new Event('input', { bubbles: true }));
  select.dispatchEvent(new Event('change', { bubbles: true }));
  return { chosen: chosen.text.trim() };
}"""


async def perform(page: Page, action: Action, surface: Surface) -> str:
    """Do one action; its observation line. Raises ActionFailed (or Playwright's error)."""
    kind = str(action.get("type"))
    handler = _HANDLERS.get(kind)
    if handler is None:
        raise ActionFailed(f"unknown action type {kind!r}")
    return await handler(page, action, surface)


def _grid(action: Action, x_key: str = "x", y_key: str = "y") -> tuple[int, int]:
    try:
        return int(action[x_key]), int(action[y_key])
    except KeyError as missing:
        alternative = " (or a selector)" if x_key == "x" else ""
        raise ActionFailed(f"needs {missing.args[0]}{alternative}") from None
    except (TypeError, ValueError):
        raise ActionFailed(f"{x_key} and {y_key} must be integers") from None


async def _point(page: Page, action: Action, surface: Surface) -> tuple[float, float, str]:
    """The action's target as viewport pixels, scrolling first for y > 999; and how to name it."""
    x, y = _grid(action)
    if not (0 <= x < GRID) or y < 0:
        raise ActionFailed(f"({x}, {y}) is off the 0-999 grid")
    if y >= GRID:
        # The public tool's convention: each 1000 of y is one screen further down.
        await page.evaluate("(top) => window.scrollTo(window.scrollX, top)", (y // GRID) * surface.height)
        y_in_view = y % GRID
    else:
        y_in_view = y
    return x / GRID * surface.width, y_in_view / GRID * surface.height, f"({x}, {y})"


async def _target(
    page: Page, action: Action, surface: Surface, *, need: str = ""
) -> tuple[float, float, str]:
    """Pixels of the element a selector names (scrolled into view), or of the grid point."""
    selector = action.get("selector")
    if selector is None:
        px, py, name = await _point(page, action, surface)
        found = cast("dict[str, Any] | None", await page.evaluate(_AT_POINT, [px, py]))
        if found is None:
            raise ActionFailed(f"nothing at {name}")
        if need == "editable" and not found["editable"]:
            raise ActionFailed(f"no text field at {name} (found <{found['tag']}>)")
        if need == "select" and not found["select"]:
            raise ActionFailed(f"no <select> at {name} (found <{found['tag']}>)")
        return px, py, name
    try:
        found = cast("dict[str, Any]", await page.evaluate(_SCROLL_TO, str(selector)))
    except PlaywrightError as error:
        raise ActionFailed(f"bad selector {selector!r}: {str(error).splitlines()[0]}") from None
    if "error" in found:
        raise ActionFailed(f"{found['error']}: {selector!r}")
    if need == "editable" and not found["editable"]:
        raise ActionFailed(f"{selector!r} is not a text field (it is <{found['tag']}>)")
    return float(found["x"]), float(found["y"]), str(selector)


async def _open_browser(page: Page, action: Action, surface: Surface) -> str:
    return "Browser opened"


async def _navigate(page: Page, action: Action, surface: Surface) -> str:
    url = action.get("url")
    if not isinstance(url, str) or not url:
        raise ActionFailed("navigate needs a url")
    # Relative to the page, or to the first site while the page is still blank.
    base = page.url if page.url.startswith("http") else (surface.home or "")
    target = urljoin(base, url) if base else url
    await surface.goto(target)
    return f"Navigated to {target}"


async def _search(page: Page, action: Action, surface: Surface) -> str:
    query = str(action.get("query", ""))
    if surface.home is None:
        raise ActionFailed("search needs a site (the task declares none)")
    # Never a search engine: the task's own site answers /search.
    await surface.goto(f"{surface.home}/search?q={quote_plus(query)}")
    return f"Searched for: {query}"


async def _wait(page: Page, action: Action, surface: Surface) -> str:
    await asyncio.sleep(5)
    return "Waited 5 seconds"


async def _screenshot(page: Page, action: Action, surface: Surface) -> str:
    await surface.screenshot()
    return "Took a screenshot"


async def _go_back(page: Page, action: Action, surface: Surface) -> str:
    before = page.url
    # None both when there is no earlier entry and for a same-document one: the URL tells them apart.
    if await page.go_back(wait_until="domcontentloaded") is None and page.url == before:
        raise ActionFailed("there is no earlier page to go back to")
    return "Navigated back"


async def _go_forward(page: Page, action: Action, surface: Surface) -> str:
    before = page.url
    if await page.go_forward(wait_until="domcontentloaded") is None and page.url == before:
        raise ActionFailed("there is no later page to go forward to")
    return "Navigated forward"


async def _click(page: Page, action: Action, surface: Surface) -> str:
    px, py, name = await _target(page, action, surface)
    await page.mouse.click(px, py)
    return f"Clicked at {name}"


async def _hover(page: Page, action: Action, surface: Surface) -> str:
    px, py, name = await _target(page, action, surface)
    await page.mouse.move(px, py)
    return f"Hovered at {name}"


async def _type(page: Page, action: Action, surface: Surface) -> str:
    text = action.get("text")
    if not isinstance(text, str):
        raise ActionFailed("type_text_at needs text")
    px, py, name = await _target(page, action, surface, need="editable")
    await page.mouse.click(px, py)
    if action.get("clear_before_typing", True):
        await page.evaluate(_SELECT_FIELD)
    # One input event for the whole text (as a paste or an IME would send): a key event per character
    # costs a round trip each and no site here needs them.
    await page.keyboard.insert_text(text)
    if action.get("press_enter", True):
        await page.keyboard.press("Enter")
    return f"Typed {text!r} at {name}"


async def _select(page: Page, action: Action, surface: Surface) -> str:
    wanted = action.get("text")
    if not isinstance(wanted, str):
        raise ActionFailed("select needs text (the option's label or value)")
    px, py, name = await _target(page, action, surface, need="select")
    handle = await page.evaluate_handle("([x, y]) => document.elementFromPoint(x, y)", [px, py])
    element = handle.as_element()
    if element is None:
        raise ActionFailed(f"nothing at {name}")
    outcome = cast("dict[str, str]", await element.evaluate(_CHOOSE, wanted))
    await handle.dispose()
    if "error" in outcome:
        raise ActionFailed(f"{outcome['error']} at {name}")
    return f"Selected {outcome['chosen']!r} at {name}"


def key_string(keys: object) -> str:
    """The public tool's key tokens (``["CTRL", "A"]`` or ``"ctrl+a"``) as Playwright's ``Control+A``."""
    tokens = [str(k) for k in cast("list[object]", keys)] if isinstance(keys, list) else str(keys).split("+")
    names = [KEY_ALIASES.get(token.strip().upper(), token.strip()) for token in tokens if token.strip()]
    if not names:
        raise ActionFailed("key_combination needs keys")
    return "+".join(names)


async def _keys(page: Page, action: Action, surface: Surface) -> str:
    combination = key_string(action.get("keys"))
    try:
        await page.keyboard.press(combination)
    except PlaywrightError as error:
        raise ActionFailed(f"unknown key in {combination!r}: {str(error).splitlines()[0]}") from None
    return f"Pressed key combination: {combination}"


def _delta(direction: object, distance: float) -> tuple[float, float]:
    moves = {
        "down": (0.0, distance),
        "up": (0.0, -distance),
        "left": (-distance, 0.0),
        "right": (distance, 0.0),
    }
    if direction not in moves:
        raise ActionFailed("direction must be one of up, down, left, right")
    return moves[cast("str", direction)]


async def _scroll_document(page: Page, action: Action, surface: Surface) -> str:
    dx, dy = _delta(action.get("direction"), SCROLL_DOCUMENT_PX)
    await page.evaluate("([dx, dy]) => window.scrollBy(dx, dy)", [dx, dy])
    return f"Scrolled {action['direction']}"


async def _scroll_at(page: Page, action: Action, surface: Surface) -> str:
    px, py, name = await _point(page, action, surface)
    magnitude = int(action.get("magnitude", 800))
    dx, dy = _delta(action.get("direction"), magnitude * SCROLL_AT_PX_PER_UNIT)
    await page.mouse.move(px, py)
    await page.mouse.wheel(dx, dy)
    # The wheel scrolls asynchronously: one frame later the page has moved (positions are then true).
    await page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    return f"Scrolled {action['direction']} at {name}"


async def _drag(page: Page, action: Action, surface: Surface) -> str:
    px, py, name = await _point(page, action, surface)
    tx, ty = _grid(action, "destination_x", "destination_y")
    await page.mouse.move(px, py)
    await page.mouse.down()
    await page.mouse.move(tx / GRID * surface.width, ty / GRID * surface.height, steps=5)
    await page.mouse.up()
    return f"Dragged from {name} to ({tx}, {ty})"


_HANDLERS: dict[str, Callable[[Page, Action, Surface], Awaitable[str]]] = {
    "open_web_browser": _open_browser,
    "navigate": _navigate,
    "wait_5_seconds": _wait,
    "screenshot": _screenshot,
    "go_back": _go_back,
    "go_forward": _go_forward,
    "search": _search,
    "click_at": _click,
    "select": _select,
    "hover_at": _hover,
    "type_text_at": _type,
    "key_combination": _keys,
    "scroll_document": _scroll_document,
    "scroll_at": _scroll_at,
    "drag_and_drop": _drag,
}
