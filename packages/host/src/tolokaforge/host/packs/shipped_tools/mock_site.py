"""``http_request``: requests to the mock web site a task declares (docs/pack-format.md#initial_state).

The host ships this file's text into the task's code bundle as ``_tolokaforge_builtin/mock_site.py``,
beside ``services.json`` naming, per task declaring ``initial_state.mock_web``, its base URL and its
folder. The public project's mock web service is a static site over its tasks' folders; here the trial's
worker answers those requests itself, from the bundle, without a socket: the sandbox has no network
(docs/isolation.md), so a URL outside the declared site is refused before anything is sent, and there
is nowhere else to send it anyway.

What the site serves: ``/health``; the public service's booking form (``GET /booking``, and
``POST /booking/confirm``, which appends the booking to the trial's ``bookings`` table, as the public
service does to its JSON DB); ``/task/<category>/<task>/<path>`` from that folder under the pack's
``tasks/``; any other path from the task's ``www/`` folder, then its own folder (a folder's
``index.html`` for a folder). Task and grading files and python code are never served, and the pages
are read with GET only.
"""

from __future__ import annotations

import html
import json
import mimetypes
from pathlib import Path, PurePosixPath
from typing import Any, cast
from urllib.parse import urlsplit

from tolokaforge.sdk.tool_result import ReportedError

__all__ = ["TOOLS", "Site", "tool_key"]

SETTINGS_FILE = "services.json"
PUBLIC_HOSTS = ("mock-web", "mock-web:8080", "localhost:8080")
"""Names the public tool always lets through to its mock service; here they reach the same site."""
_HIDDEN = frozenset({"task.yaml", "grading.yaml"})
_HTML_SHOWN = 2000
_TEXT_SHOWN = 1000


def tool_key(task_folder: str) -> str:
    """The name the runner looks the tool up by: one tool class per task declaring a site."""
    return f"http_request:{task_folder}"


class Site:
    """One task's mock web site: its allowed hosts and the folders its pages come from."""

    def __init__(self, root: Path, base_url: str, task_folder: str) -> None:
        self.tasks = (root / "tasks").resolve()
        self.folder = (root / task_folder).resolve()
        self.base_url = base_url
        self.hosts = frozenset({urlsplit(base_url).netloc, *PUBLIC_HOSTS})

    def request(
        self, method: str, url: str, tables: dict[str, Any], form: dict[str, Any] | None
    ) -> str | ReportedError:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or parts.netloc not in self.hosts:
            raise PermissionError(
                f"URL not allowed: {url}. Only the task's mock site is reachable: {self.base_url}"
            )
        path = parts.path.strip("/")
        if path == "health":
            return _shown(200, "application/json", json.dumps({"status": "healthy"}))
        if path == "booking" and method == "GET":
            return _shown(200, "text/html", _BOOKING_FORM)
        if path == "booking/confirm" and method == "POST":
            return _shown(200, "text/html", _confirm_booking(tables, form or {}))
        found = self._file(path)
        if found is None:
            raise FileNotFoundError(f"Status: 404 (no page {parts.path or '/'} on {self.base_url})")
        if method != "GET":
            return ReportedError(f"Status: 405 ({method} {parts.path}: the mock site only serves pages)")
        kind = mimetypes.guess_type(found.name)[0] or "text/plain"
        return _shown(200, kind, found.read_text(encoding="utf-8"))

    def _file(self, path: str) -> Path | None:
        relative = PurePosixPath(path)
        if ".." in relative.parts:
            return None
        pieces = relative.parts
        if len(pieces) >= 3 and pieces[0] == "task":
            candidates = [self.tasks / pieces[1] / pieces[2] / Path(*pieces[3:])]
        else:
            candidates = [self.folder / "www" / relative, self.folder / relative]
        for candidate in candidates:
            for option in (candidate, candidate / "index.html"):
                if option.is_file() and self._servable(option.resolve()):
                    return option
        return None

    def _servable(self, file: Path) -> bool:
        return file.is_relative_to(self.tasks) and file.name not in _HIDDEN and file.suffix != ".py"


_BOOKING_FORM = """<html><body><h1>Book a hotel</h1>
<form method="post" action="/booking/confirm">
<input name="name"> <select name="hotel"><option value="grand_plaza">Grand Plaza</option>
<option value="seaside_resort">Seaside Resort</option><option value="mountain_lodge">Mountain Lodge</option>
</select> <input name="checkin" type="date"> <input name="checkout" type="date">
<button type="submit">Book</button></form></body></html>"""


def _confirm_booking(tables: dict[str, Any], form: dict[str, Any]) -> str:
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


def _shown(status: int, kind: str, body: str) -> str:
    """The answer as the public tool words it: status line, then the body by its content type."""
    if kind == "application/json":
        return f"Status: {status}\nResponse (JSON):\n{json.loads(body)}"
    if kind == "text/html":
        return f"Status: {status}\nResponse (HTML snippet):\n{body[:_HTML_SHOWN]}"
    return f"Status: {status}\nResponse:\n{body[:_TEXT_SHOWN]}"


def _tool(site: Site) -> type:
    class HttpRequest:
        @staticmethod
        def invoke(data: dict[str, Any], /, method: str, url: str, **body: Any) -> str | ReportedError:
            # Headers and a JSON body are accepted as the public tool accepts them; only the booking
            # form reads anything sent (its form fields, ``data``).
            form = body.get("data")
            return site.request(
                method, url, data, cast(dict[str, Any], form) if isinstance(form, dict) else None
            )

    return HttpRequest


def _declared() -> dict[str, type]:
    here = Path(__file__).resolve().parent
    settings_file = here / SETTINGS_FILE
    if not settings_file.is_file():
        return {}
    settings: dict[str, Any] = json.loads(settings_file.read_text(encoding="utf-8"))
    sites: dict[str, str] = settings.get("sites", {})
    return {tool_key(folder): _tool(Site(here.parent, url, folder)) for folder, url in sites.items()}


TOOLS: dict[str, type] = _declared()
