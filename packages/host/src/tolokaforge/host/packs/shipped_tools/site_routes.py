"""A pack's site routes (``initial_state.mock_web.routes``): matching, the request a route gets, its answer.

The pack's module maps ``"METHOD /path/{param}"`` to ``handler(data, request)`` in its ``ROUTES`` dict
(``tolokaforge.sdk.web`` documents the contract). This module turns one HTTP request into the
:class:`~tolokaforge.sdk.web.Request` a handler reads, and the handler's return into an answer. It ships
in the task's code bundle beside mock_site.py and is imported inside the trial's sandbox, so it imports
the standard library and the sdk only. The host imports it too, to check a pack's ROUTES at load.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.message import Message
from email.parser import BytesParser
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit

from tolokaforge.sdk.web import Request, Response

__all__ = ["Answer", "RouteFailed", "RouteTable", "parse_route_key", "read_form"]

_KEY = re.compile(r"^([A-Z]+) (/\S*)$")
_PARAM = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Answer:
    """One HTTP answer of the site, whoever made it (a route, a static file, the site's own pages)."""

    status: int
    content_type: str
    body: bytes
    headers: Mapping[str, str] = field(default_factory=lambda: {})


class RouteFailed(Exception):
    """A route handler raised: the site tool fails the call, so the worker drops the request's changes
    and the browser shows a 500 page carrying this message."""


def parse_route_key(key: object) -> tuple[str, re.Pattern[str]]:
    """``"POST /orders/{order_id}"`` -> the method and a regex of the path; ValueError saying why not."""
    if not isinstance(key, str):
        raise ValueError(f"{key!r} is not a string")
    found = _KEY.match(key)
    if found is None:
        raise ValueError(f"{key!r} is not 'METHOD /path' (an upper-case method, one space, a path from /)")
    method, path = found.groups()
    path = _trimmed(path)  # matched as requests are, without a trailing slash
    pattern = ""
    last = 0
    names: list[str] = []
    literals: list[str] = []
    for param in _PARAM.finditer(path):
        literals.append(path[last : param.start()])
        pattern += re.escape(literals[-1])
        if param.group(1) in names:
            raise ValueError(f"{key!r} names {{{param.group(1)}}} twice")
        names.append(param.group(1))
        pattern += f"(?P<{param.group(1)}>[^/]+)"
        last = param.end()
    literals.append(path[last:])
    if any("{" in piece or "}" in piece for piece in literals):
        raise ValueError(f"{key!r}: a path parameter is {{name}}, name a python identifier")
    pattern += re.escape(literals[-1])
    return method, re.compile(pattern)


Handler = Callable[[Any, Request], object]


class RouteTable:
    """The pack's ROUTES, parsed once: the first route whose method and path match answers."""

    def __init__(self, routes: Mapping[object, object]) -> None:
        self.routes: list[tuple[str, str, re.Pattern[str], Handler]] = []
        for key, handler in routes.items():
            method, pattern = parse_route_key(key)
            if not callable(handler):
                raise ValueError(f"ROUTES[{key!r}] is not callable")
            self.routes.append((str(key), method, pattern, cast(Handler, handler)))

    def methods_for(self, path: str) -> list[str]:
        """The methods some route takes at ``path`` (for a 405 when none is the request's)."""
        return [method for _, method, pattern, _ in self.routes if pattern.fullmatch(_trimmed(path))]

    def answer(
        self,
        tables: Any,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes,
        form: Mapping[str, object] | None = None,
        json_body: object = None,
    ) -> Answer | None:
        """The matching route's answer, None when no route matches. ``form`` / ``json_body``: already
        parsed (``http_request`` passes them so); otherwise they are read from ``body``."""
        parts = urlsplit(url)
        path = _trimmed(parts.path or "/")
        for key, route_method, pattern, handler in self.routes:
            found = pattern.fullmatch(path)
            if found is None or route_method != method:
                continue
            request = Request(
                method=method,
                path=parts.path or "/",
                query={k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()},
                params=found.groupdict(),
                form={k: str(v) for k, v in form.items()} if form is not None else read_form(headers, body),
                json=json_body if json_body is not None else _json(headers, body),
                headers=headers,
                body=body,
            )
            try:
                returned = handler(tables, request)
                return _answer(returned, key)
            except Exception as error:  # the pack's defect: a 500 page, the request's changes dropped
                raise RouteFailed(f"{key} raised {type(error).__name__}: {error}") from error
        return None


def _trimmed(path: str) -> str:
    """``/cart/`` and ``/cart`` are one route; ``/`` stays itself."""
    return path.rstrip("/") or "/"


def _media(headers: Mapping[str, str]) -> str:
    return headers.get("content-type", "").split(";", 1)[0].strip().lower()


def read_form(headers: Mapping[str, str], body: bytes) -> dict[str, str]:
    """A form body's fields (url-encoded or multipart, the first of a repeated name); {} for another body."""
    media = _media(headers)
    if media == "application/x-www-form-urlencoded":
        text = body.decode("utf-8", errors="replace")
        return {k: v[0] for k, v in parse_qs(text, keep_blank_values=True).items()}
    if media == "multipart/form-data":
        head = f"Content-Type: {headers['content-type']}\r\n\r\n".encode()
        message = BytesParser().parsebytes(head + body)
        fields: dict[str, str] = {}
        for part in cast(list[Message], message.get_payload() if message.is_multipart() else []):
            name = part.get_param("name", header="content-disposition")
            if not isinstance(name, str) or name in fields:
                continue
            filename = part.get_filename()
            payload = part.get_payload(decode=True)
            # A file field gives its file name: a route that needs the bytes reads request.body.
            fields[name] = (
                filename
                if filename is not None
                else (payload.decode("utf-8", errors="replace") if isinstance(payload, bytes) else "")
            )
        return fields
    return {}


def _json(headers: Mapping[str, str], body: bytes) -> object:
    media = _media(headers)
    if not body or not (media == "application/json" or media.endswith("+json")):
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None  # the route still has request.body


def _answer(returned: object, key: str) -> Answer:
    if isinstance(returned, Response):
        body = returned.body.encode() if isinstance(returned.body, str) else bytes(returned.body)
        headers = {k.lower(): v for k, v in returned.headers.items()}
        return Answer(returned.status, returned.content_type, body, headers)
    if isinstance(returned, str):
        return Answer(200, "text/html; charset=utf-8", returned.encode())
    if isinstance(returned, dict | list):
        return Answer(200, "application/json", json.dumps(returned).encode())
    raise TypeError(
        f"returned {type(returned).__name__}; a route returns a Response, a str (HTML) or a dict/list (JSON)"
    )
