"""A small shop site the browser tests drive: pages, a form that POSTs, a select, a long page."""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from urllib.parse import parse_qs, urlsplit

from tolokaforge.runner.browser import SiteRequest, SiteResponse

ORIGIN = "http://shop.test"

_PAGES = {
    "/": """<title>Shop</title>
<h1>Welcome</h1>
<a id="to-form" href="/form">Order form</a>
<a href="/long">Long page</a>
<p>Clicks: <span id="count">0</span></p>
<button id="known" style="position:absolute; left:100px; top:200px; width:200px; height:50px"
  onclick="document.getElementById('count').textContent = String(Number(document.getElementById('count').textContent) + 1)">
  Count me</button>""",
    "/form": """<title>Order</title>
<form method="post" action="/submit">
  <input id="name" name="name" placeholder="Your name">
  <select id="color" name="color"><option value="r">Red</option><option value="g">Green</option></select>
  <button type="submit" id="send">Send</button>
</form>""",
    "/long": """<title>Long</title><div style="height:3000px">Top of the long page</div>
<button id="bottom" onclick="this.textContent='Bottom clicked'">Bottom button</button>""",
    "/foreign": """<title>Foreign</title><p>A page with a foreign image</p>
<img src="http://evil.example/pixel.png" alt="">""",
    "/set-storage": """<title>Set</title><script>
localStorage.setItem('mark', 'A'); document.cookie = 'mark=A; path=/';
</script><p>stored</p>""",
    "/read-storage": """<title>Read</title><p id="seen"></p><script>
document.getElementById('seen').textContent =
  'storage=' + (localStorage.getItem('mark') || 'none') + ' cookie=' + (document.cookie || 'none');
</script>""",
}


@dataclass
class ShopSite:
    """Answers the browser's site requests and remembers each one."""

    seen: list[SiteRequest] = field(default_factory=lambda: [])

    async def __call__(self, request: SiteRequest) -> SiteResponse:
        self.seen.append(request)
        parts = urlsplit(request.url)
        if request.method == "POST" and parts.path == "/submit":
            form = parse_qs(request.body.decode())
            name = form.get("name", [""])[0]
            return SiteResponse(303, {"location": f"/thanks?name={name}"})
        if parts.path == "/thanks":
            name = parse_qs(parts.query).get("name", [""])[0]
            return _html(f"<title>Thanks</title><p id='thanks'>Thanks {escape(name)}</p>")
        if parts.path == "/search":
            query = parse_qs(parts.query).get("q", [""])[0]
            return _html(f"<title>Search</title><p>Results for {escape(query)}</p>")
        page = _PAGES.get(parts.path)
        if page is None:
            return SiteResponse(404, {"content-type": "text/plain"}, b"not found")
        return _html(page)

    def posts(self) -> list[SiteRequest]:
        return [request for request in self.seen if request.method == "POST"]


def _html(text: str) -> SiteResponse:
    return SiteResponse(200, {"content-type": "text/html; charset=utf-8"}, text.encode())
