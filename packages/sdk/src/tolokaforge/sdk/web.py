"""What a pack's mock-site route receives and may return (docs/web-tasks.md).

A pack declares its routes in a module of its tool code (``initial_state.mock_web.routes``) as
``ROUTES = {"POST /cart/add": add_to_cart, "GET /orders/{order_id}": show_order}``. A route runs in
the trial's worker, inside its sandbox, like a python tool: ``handler(data, request)`` reads and
changes ``data`` (the trial's tables) in place, and its changes are committed as one batch when it
returns. It returns a :class:`Response`, or ``str`` (an HTML page, status 200), or a dict or list
(JSON, status 200). Imports the standard library only: it is imported inside the sandbox.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Request", "Response", "redirect"]


@dataclass(frozen=True)
class Request:
    """One request the browser sent to the task's site."""

    method: str
    path: str
    query: Mapping[str, str] = field(default_factory=lambda: {})
    """The query string's parameters (the first value of a repeated one)."""
    params: Mapping[str, str] = field(default_factory=lambda: {})
    """The route pattern's ``{name}`` parts."""
    form: Mapping[str, str] = field(default_factory=lambda: {})
    """A form body's fields (``application/x-www-form-urlencoded`` or ``multipart/form-data``)."""
    json: Any = None
    """A JSON body, parsed; None without one."""
    headers: Mapping[str, str] = field(default_factory=lambda: {})
    """Header names in lower case."""
    body: bytes = b""


@dataclass(frozen=True)
class Response:
    """A route's answer. ``body`` text is sent as UTF-8."""

    body: str | bytes = ""
    status: int = 200
    content_type: str = "text/html; charset=utf-8"
    headers: Mapping[str, str] = field(default_factory=lambda: {})


def redirect(location: str, status: int = 303) -> Response:
    """Send the browser on to ``location`` (after a form POST, 303 makes it GET the page)."""
    return Response(b"", status=status, content_type="text/plain", headers={"location": location})
