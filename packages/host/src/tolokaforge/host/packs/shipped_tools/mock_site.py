"""The mock web site a task declares (``initial_state.mock_web``), and the two tools that reach it.

The host ships this file's text into the task's code bundle as ``_tolokaforge_builtin/mock_site.py``,
beside ``services.json`` naming, per task declaring ``initial_state.mock_web``, its base URL, its
folder, and its own ``root`` (static files) and ``routes`` (a module of the pack's code) when given.
The trial's worker answers every request itself, from the bundle, without a socket: the sandbox has no
network (docs/isolation.md), so a URL outside the declared site is refused before anything is sent.

Two tools share one :class:`Site` per task: ``http_request`` (the public tool the model calls, its
answer worded as the public tool words it) and the hidden site tool the runner's browser sends every
page request to (arguments ``{method, url, headers, body_b64}``, output the JSON
``{status, headers, body_b64}``, docs/web-tasks.md).

A site with ``root`` or ``routes`` is the pack's own: the routes answer first, then ``root``'s files
(served at ``/``), then ``/health``. Without them it is the public mock service's static site:
``/health``; its booking form (``GET /booking``; ``POST /booking/confirm`` appends the booking to the
trial's ``bookings`` table, as the public service does to its JSON DB); ``/task/<category>/<task>/<path>``
from that folder under the pack's ``tasks/``; any other path from the task's ``www/`` folder, then its
own folder (a folder's ``index.html`` for a folder). Task and grading files and python code are never
served, and static files are read with GET (or HEAD) only.
"""

from __future__ import annotations

import base64
import html
import importlib
import json
import mimetypes
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any, cast
from urllib.parse import urlsplit

from tolokaforge.sdk.tool_result import ReportedError

from .site_routes import Answer, RouteFailed, RouteTable, read_form

__all__ = ["SITE_FILES", "TOOLS", "Site", "site_tool_key", "tool_key"]

SETTINGS_FILE = "services.json"
SITE_FILES = "site_files"
"""Beside this file: the sites' binary files (images...), each as ``<path>.b64``; the bundle carries text."""
PUBLIC_HOSTS = ("mock-web", "mock-web:8080", "localhost:8080")
"""Names the public tool always lets through to its mock service; here they reach the same site."""
_HIDDEN = frozenset({"task.yaml", "grading.yaml"})
_HTML_SHOWN = 2000
_TEXT_SHOWN = 1000


def tool_key(task_folder: str) -> str:
    """The name the runner looks ``http_request`` up by: one tool class per task declaring a site."""
    return f"http_request:{task_folder}"


def site_tool_key(task_folder: str) -> str:
    """The name the runner looks the hidden site tool up by."""
    return f"site:{task_folder}"


class _Missing(Exception):
    """No page at the path (the site's own 404)."""


class _WrongMethod(Exception):
    """A page exists, but not for this method (the site's own 405); args: the methods it takes."""


class Site:
    """One task's mock web site: its allowed hosts, its routes, and the folders its pages come from."""

    def __init__(
        self,
        root: Path,
        base_url: str,
        task_folder: str,
        *,
        site_root: str | None = None,
        routes: RouteTable | None = None,
        routes_error: str | None = None,
    ) -> None:
        self.bundle = root.resolve()
        self.tasks = (root / "tasks").resolve()
        self.folder = (root / task_folder).resolve()
        self.base_url = base_url
        self.hosts = frozenset({urlsplit(base_url).netloc, *PUBLIC_HOSTS})
        self.site_root = (root / site_root).resolve() if site_root is not None else None
        self.routes = routes
        self.routes_error = routes_error
        """Why the routes module cannot be used: every request then fails (a 500 page) saying it."""
        self.own = site_root is not None or routes is not None or routes_error is not None
        self.blobs = Path(__file__).resolve().parent / SITE_FILES

    def answer(
        self,
        method: str,
        url: str,
        tables: Any,
        *,
        headers: Mapping[str, str] | None = None,
        body: bytes = b"",
        form: Mapping[str, Any] | None = None,
        json_body: object = None,
        folders_redirect: bool = False,
    ) -> Answer:
        """The site's answer; raises PermissionError (a foreign URL), _Missing, _WrongMethod, RouteFailed.

        ``folders_redirect``: a folder asked for without its trailing slash is redirected there, as a web
        server does (a browser resolves the page's relative links against it); ``http_request`` gets
        the folder's ``index.html`` itself, as the public service answers.
        """
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or parts.netloc not in self.hosts:
            raise PermissionError(
                f"URL not allowed: {url}. Only the task's mock site is reachable: {self.base_url}"
            )
        headers = headers or {}
        path = parts.path.strip("/")
        if self.routes_error is not None:
            raise RouteFailed(self.routes_error)
        if self.routes is not None:
            answered = self.routes.answer(tables, method, url, headers, body, form, json_body)
            if answered is not None:
                return answered
        if path == "health":
            return _text(200, "application/json", json.dumps({"status": "healthy"}))
        if not self.own and path == "booking" and method == "GET":
            return _text(200, "text/html", _BOOKING_FORM)
        if not self.own and path == "booking/confirm" and method == "POST":
            fields = form if form is not None else read_form(headers, body)
            return _text(200, "text/html", _confirm_booking(tables, dict(fields)))
        found = self._file(path)
        if found is None:
            taken = self.routes.methods_for(parts.path or "/") if self.routes is not None else []
            raise _WrongMethod(*taken) if taken else _Missing()
        if method not in ("GET", "HEAD"):
            raise _WrongMethod("GET", "HEAD")
        found, folder = found
        if folder and folders_redirect and not parts.path.endswith("/"):
            target = parts.path + "/" + (f"?{parts.query}" if parts.query else "")
            return Answer(301, "text/plain", b"", {"location": target})
        kind = mimetypes.guess_type(found.name)[0] or "application/octet-stream"
        return Answer(200, kind, b"" if method == "HEAD" else self._read(found))

    def _file(self, path: str) -> tuple[Path, bool] | None:
        """The file at ``path``, and whether it is a folder's ``index.html``."""
        relative = PurePosixPath(path)
        if any(part.startswith(".") for part in relative.parts):  # "..", and hidden files
            return None
        pieces = relative.parts
        if self.own:
            candidates = [self.site_root / relative] if self.site_root is not None else []
            inside = self.site_root
        elif len(pieces) >= 3 and pieces[0] == "task":
            candidates = [self.tasks / pieces[1] / pieces[2] / Path(*pieces[3:])]
            inside = self.tasks
        else:
            candidates = [self.folder / "www" / relative, self.folder / relative]
            inside = self.tasks
        for candidate in candidates:
            for option, folder in ((candidate, False), (candidate / "index.html", True)):
                if inside is not None and self._exists(option) and self._servable(option, inside):
                    return option, folder
        return None

    def _servable(self, file: Path, inside: Path) -> bool:
        resolved = file.resolve()
        ours = Path(__file__).resolve().parent  # our code, settings and encoded files: never pages
        return (
            resolved.is_relative_to(inside)
            and not resolved.is_relative_to(ours)
            and file.name not in _HIDDEN
            and file.suffix != ".py"
        )

    def _blob(self, file: Path) -> Path | None:
        resolved = file.resolve()
        if not resolved.is_relative_to(self.bundle):
            return None
        return self.blobs / f"{resolved.relative_to(self.bundle).as_posix()}.b64"

    def _exists(self, file: Path) -> bool:
        if file.is_file():
            return True
        blob = self._blob(file)
        return blob is not None and blob.is_file()

    def _read(self, file: Path) -> bytes:
        if file.is_file():
            return file.read_bytes()
        blob = self._blob(file)
        assert blob is not None
        return base64.b64decode(blob.read_text(encoding="ascii"))


_BOOKING_FORM = """<html><body><h1>Book a hotel</h1>
<form method="post" action="/booking/confirm">
<input name="name"> <select name="hotel"><option value="grand_plaza">Grand Plaza</option>
<option value="seaside_resort">Seaside Resort</option><option value="mountain_lodge">Mountain Lodge</option>
</select> <input name="checkin" type="date"> <input name="checkout" type="date">
<button type="submit">Book</button></form></body></html>"""


def _confirm_booking(tables: Any, form: dict[str, Any]) -> str:
    """The public service's booking form: the booking is appended to the trial's ``bookings`` table.

    As there, only when the trial has that table as a list of records; otherwise the page still
    confirms and nothing is stored.
    """
    booking = {key: form.get(key) for key in ("name", "hotel", "checkin", "checkout")}
    booking["status"] = "confirmed"
    bookings = tables.get("bookings")
    if isinstance(bookings, list):
        cast(list[dict[str, Any]], bookings).append(booking)
    fields = "".join(f"<li>{key}: {html.escape(str(value))}</li>" for key, value in booking.items())
    return f"<html><body><h1>Booking confirmed</h1><ul>{fields}</ul></body></html>"


def _text(status: int, kind: str, body: str) -> Answer:
    return Answer(status, kind, body.encode())


def _shown(answer: Answer) -> str:
    """The answer as the public tool words it: status line, then the body by its content type."""
    kind = answer.content_type.split(";", 1)[0].strip()
    body = answer.body.decode("utf-8", errors="replace")
    if kind == "application/json":
        return f"Status: {answer.status}\nResponse (JSON):\n{json.loads(body)}"
    if kind == "text/html":
        return f"Status: {answer.status}\nResponse (HTML snippet):\n{body[:_HTML_SHOWN]}"
    return f"Status: {answer.status}\nResponse:\n{body[:_TEXT_SHOWN]}"


def _http_request_tool(site: Site) -> type:
    class HttpRequest:
        @staticmethod
        def invoke(data: dict[str, Any], /, method: str, url: str, **body: Any) -> str | ReportedError:
            # Headers and a JSON body are accepted as the public tool accepts them; the booking form
            # and the pack's routes read what is sent (form fields in ``data``, a JSON body in ``json``).
            form = body.get("data")
            headers = body.get("headers")
            try:
                answer = site.answer(
                    method,
                    url,
                    data,
                    headers={str(k).lower(): str(v) for k, v in cast(dict[str, Any], headers).items()}
                    if isinstance(headers, dict)
                    else {},
                    form=cast(dict[str, Any], form) if isinstance(form, dict) else None,
                    json_body=body.get("json"),
                )
            except _Missing:
                path = urlsplit(url).path or "/"
                raise FileNotFoundError(f"Status: 404 (no page {path} on {site.base_url})") from None
            except _WrongMethod:
                path = urlsplit(url).path
                return ReportedError(f"Status: 405 ({method} {path}: the mock site only serves pages)")
            return _shown(answer)

    return HttpRequest


def _site_tool(site: Site) -> type:
    class SiteRequest:
        hidden = True

        @staticmethod
        def invoke(
            data: dict[str, Any],
            /,
            method: str,
            url: str,
            headers: dict[str, str] | None = None,
            body_b64: str = "",
        ) -> str:
            lowered = {str(k).lower(): str(v) for k, v in (headers or {}).items()}
            body = base64.b64decode(body_b64) if body_b64 else b""
            try:
                answer = site.answer(
                    method.upper(), url, data, headers=lowered, body=body, folders_redirect=True
                )
            except _Missing:
                path = html.escape(urlsplit(url).path or "/")
                page = f"<html><body><h1>404 Not Found</h1><p>No page {path} on this site.</p></body></html>"
                answer = Answer(404, "text/html", page.encode())
            except _WrongMethod as wrong:
                allowed = ", ".join(cast(tuple[str, ...], wrong.args))
                answer = Answer(
                    405, "text/plain", f"405 Method Not Allowed ({allowed})".encode(), {"allow": allowed}
                )
            kind = answer.content_type
            if kind.startswith("text/") and "charset" not in kind:
                kind += "; charset=utf-8"
            return json.dumps(
                {
                    "status": answer.status,
                    "headers": {**answer.headers, "content-type": kind},
                    "body_b64": base64.b64encode(answer.body).decode("ascii"),
                }
            )

    return SiteRequest


def _routes(module: str | None) -> tuple[RouteTable | None, str | None]:
    """The pack's ROUTES, imported from the bundle this file ships in; or why they cannot be used."""
    if module is None:
        return None, None
    bundle = (__package__ or "").rpartition(".")[0]
    try:
        imported = importlib.import_module(f"{bundle}.{module}" if bundle else module)
        declared = getattr(imported, "ROUTES", None)
        if not isinstance(declared, dict):
            return None, f"the routes module {module!r} has no ROUTES dict"
        return RouteTable(cast(dict[object, object], declared)), None
    except Exception as error:  # the pack's defect: every routed request answers a 500 saying it
        return None, f"the routes module {module!r} cannot be used: {type(error).__name__}: {error}"


def _declared() -> dict[str, type]:
    here = Path(__file__).resolve().parent
    settings_file = here / SETTINGS_FILE
    if not settings_file.is_file():
        return {}
    settings: dict[str, Any] = json.loads(settings_file.read_text(encoding="utf-8"))
    sites: dict[str, dict[str, Any]] = settings.get("sites", {})
    tools: dict[str, type] = {}
    for folder, declared in sites.items():
        routes, error = _routes(declared.get("routes"))
        site = Site(
            here.parent,
            declared["base_url"],
            folder,
            site_root=declared.get("root"),
            routes=routes,
            routes_error=error,
        )
        tools[tool_key(folder)] = _http_request_tool(site)
        tools[site_tool_key(folder)] = _site_tool(site)
    return tools


TOOLS: dict[str, type] = _declared()
