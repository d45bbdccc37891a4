"""A site's answer to one intercepted request, with its redirects kept inside the interception.

Chromium follows a redirect it was handed by interception with a request interception never sees
(Playwright routes the first URL only), which would reach for the network. So a redirect never
reaches the browser as one: a page load's redirect is answered with a tiny page that replaces itself
with the target (a fresh, intercepted navigation, the history entry replaced as a redirect's would
be; 307/308 become GET), and a script's request (fetch, XHR, an image) has its redirects followed
here, through the same site handler.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from html import escape
from urllib.parse import urljoin

from .pages import SiteHandler, SiteRequest

__all__ = ["Answer", "answer_site_request"]

REDIRECTS = frozenset((301, 302, 303, 307, 308))
MAX_REDIRECTS = 10


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    redirect_to: str | None = None
    """A page load answered with a page that goes on to this URL (not a page of its own)."""
    refused: tuple[str, ...] = ()
    """Redirect targets outside the sites (a script's request then fails)."""


async def answer_site_request(
    serve: SiteHandler, request: SiteRequest, *, navigation: bool, on_site: Callable[[str], bool]
) -> Answer:
    """The site's answer to ``request``; redirects as the module says."""
    current = request
    for _ in range(MAX_REDIRECTS):
        response = await serve(current)
        headers = {name.lower(): value for name, value in response.headers.items()}
        location = headers.get("location")
        if response.status not in REDIRECTS or not location:
            return Answer(response.status, dict(response.headers), response.body)
        target = urljoin(current.url, location)
        if navigation:
            return _replacing_page(target, headers)
        if not on_site(target):
            return Answer(502, {}, b"", refused=(target,))
        keep = response.status in (307, 308)
        current = SiteRequest(
            method=current.method if keep else "GET",
            url=target,
            headers=_follow_headers(current.headers, keep),
            body=current.body if keep else b"",
        )
    return Answer(508, {"content-type": "text/plain; charset=utf-8"}, b"too many redirects")


def _replacing_page(target: str, headers: Mapping[str, str]) -> Answer:
    # Set-Cookie on a redirect (a login) must still be stored by the browser.
    kept = {name: value for name, value in headers.items() if name == "set-cookie"}
    script_url = json.dumps(target).replace("</", "<\\/")
    body = (
        f'<!doctype html><meta http-equiv="refresh" content="0;url={escape(target)}">'
        f"<script>location.replace({script_url})</script>"
    )
    return Answer(
        200, {"content-type": "text/html; charset=utf-8", **kept}, body.encode(), redirect_to=target
    )


def _follow_headers(headers: Mapping[str, str], keep_body: bool) -> dict[str, str]:
    dropped = () if keep_body else ("content-type", "content-length")
    return {name: value for name, value in headers.items() if name.lower() not in dropped}
