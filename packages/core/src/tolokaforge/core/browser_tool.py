"""The ``browser`` tool as the model sees it: its description and the JSON schema of its arguments.

In core because the runner offers it and the host checks golden ``browser`` actions against it.

The argument shape is the public tool's (``{"actions": [{"type": ..., ...}]}``, x/y on a 0-999 grid);
ours adds ``selector`` to the actions that address an element.
"""

from __future__ import annotations

from typing import Any

from tolokaforge.core.models.web import BROWSER_ACTIONS, BrowserSettings

__all__ = ["BROWSER_TOOL_DESCRIPTION", "SELECTOR_ACTIONS", "browser_tool_parameters"]

SELECTOR_ACTIONS = ("click_at", "hover_at", "type_text_at", "select")
"""The actions that take a CSS ``selector`` instead of x/y."""

BROWSER_TOOL_DESCRIPTION = (
    "Drive a web browser. Pass 'actions', a list run in order; each has a 'type'. Positions are on a "
    "0-999 grid over the visible page (x from the left, y from the top); click_at, hover_at, "
    "type_text_at and select take either x and y or a CSS 'selector' (the element is scrolled into view). "
    "After the actions you get one line per action, then the page: its title, URL, text, and its "
    "interactive elements, each with its grid position and, where it has one, a stable selector. "
    "Actions: navigate (url), search (query: the site's own search), click_at, hover_at, "
    "type_text_at (text; clear_before_typing and press_enter default to true), select (text: the option's "
    "label or value), key_combination (keys, e.g. ['CTRL', 'A'] or ['ENTER']), scroll_document "
    "(direction), scroll_at (x, y, direction, magnitude), drag_and_drop (x, y, destination_x, "
    "destination_y), go_back, go_forward, wait_5_seconds, screenshot, open_web_browser. "
    "Only the task's own site can be reached."
)


def browser_tool_parameters(settings: BrowserSettings) -> dict[str, Any]:
    """The JSON schema of the tool's arguments, offering the task's allowed action types."""
    allowed = list(settings.allowed_actions or BROWSER_ACTIONS)
    grid = "on the 0-999 grid over the visible page"
    action: dict[str, Any] = {
        "type": "object",
        "properties": {
            "type": {"type": "string", "enum": allowed},
            "url": {"type": "string", "description": "navigate: the URL (absolute, or relative to the page)"},
            "query": {"type": "string", "description": "search: what to search the site for"},
            "x": {"type": "integer", "minimum": 0, "description": f"x {grid}"},
            "y": {
                "type": "integer",
                "minimum": 0,
                "description": f"y {grid}; above 999 the page is scrolled down by whole screens first",
            },
            "selector": {
                "type": "string",
                "description": "instead of x/y: a CSS selector for the element (click_at, hover_at, "
                "type_text_at, select)",
            },
            "destination_x": {"type": "integer", "minimum": 0, "description": "drag_and_drop: target x"},
            "destination_y": {"type": "integer", "minimum": 0, "description": "drag_and_drop: target y"},
            "text": {
                "type": "string",
                "description": "type_text_at: the text; select: the option's label or value",
            },
            "press_enter": {
                "type": "boolean",
                "description": "type_text_at: press Enter after (default true)",
            },
            "clear_before_typing": {
                "type": "boolean",
                "description": "type_text_at: empty the field first (default true)",
            },
            "keys": {
                "type": "array",
                "items": {"type": "string"},
                "description": "key_combination: keys pressed together, e.g. ['CTRL', 'A'] or ['ENTER']",
            },
            "direction": {"type": "string", "enum": ["up", "down", "left", "right"]},
            "magnitude": {
                "type": "integer",
                "minimum": 0,
                "maximum": 999,
                "description": "scroll_at: how far (default 800)",
            },
        },
        "required": ["type"],
    }
    return {
        "type": "object",
        "properties": {
            "actions": {
                "type": "array",
                "minItems": 1,
                "description": 'the actions, in order, e.g. [{"type": "click_at", "selector": "#buy"}]',
                "items": action,
            }
        },
        "required": ["actions"],
        "additionalProperties": False,
    }
