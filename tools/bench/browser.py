"""Benchmark: the browser engine -- a trial's browser start and one action's round trip -- beside the
drivers' floors, measured in the same run.

    uv run python tools/bench/browser.py [--trials 40] [--unconfined] [--browser BINARY]
    uv run python tools/bench/browser.py --compare chromium chromium-headless-shell [--rounds 6] [--trials 10]

One warm Chromium (the pool's own choice, or ``--browser``; confined in bubblewrap unless
``--unconfined``), a mock shop answered by an in-process site handler (as the runner's worker would,
minus the worker):

- trial start: ``open_session`` + the initial URL's load + the first observation, p50/p95 (goal
  <= 300 ms), with the pool's spare context ready (the default: the next trial's context is made
  while a trial works) and without it (each session makes its context and page on the spot);
- action round trip: ``run()`` of one click_at (by selector, no navigation), one type_text_at, one
  link click that loads a page; screenshot off and on (goal <= 50 ms p50);
- floor: the same actions as raw Playwright calls (``page.click`` / ``page.fill`` + ``innerText``)
  on a routed page of the same browser, no observation built; and a fresh context + page + load with
  raw Playwright;
- driver floor: ``Runtime.evaluate`` round trips through Playwright and through a bare CDP client
  (aiohttp's websocket on ``--remote-debugging-port``, a separate unconfined Chromium): what a
  hand-written CDP driver could save per round trip.

``--compare A B`` measures instead what a trial's context costs on each of two binaries, both launched
by the pool's own path (same flags, same sandbox) and warm side by side: alternating rounds (A B, then
B A) of ``--trials`` context-trials each -- open_session, the web_shop pack's catalog loaded, a product
link clicked, a screenshot after each call (the default), close -- with the CPU of the browser's
process tree per trial (from /proc: an exited renderer's time is in its zygote's children times),
split by process type, the Playwright driver's beside it, and wall p50; the medians over the rounds;
the idle tree's RSS and PSS (shared pages counted once).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import psutil
from playwright.async_api import Route, async_playwright

from tolokaforge.core.models.web import BrowserSettings
from tolokaforge.runner import BrowserPool, SiteRequest, SiteResponse, find_chromium

WEB_SHOP = Path(__file__).resolve().parents[2] / "examples" / "packs" / "web_shop"
ORIGIN = "http://shop.test"
HOME = """<title>Shop</title><h1>Shop</h1>
<nav><a id="to-cart" href="/cart">Cart</a> <a href="/help">Help</a></nav>
<p>Items: <span id="count">0</span></p>
<input id="search" name="q" placeholder="Search">
<button id="add" onclick="document.getElementById('count').textContent++">Add to cart</button>
""" + "".join(
    f"<p>Product {i}: a useful thing, {i} EUR <button data-testid='buy-{i}'>Buy</button></p>"
    for i in range(30)
)
CART = "<title>Cart</title><h1>Your cart</h1><a id='home' href='/'>Back</a><p>Nothing yet</p>"
WARM_UP = 5


async def serve(request: SiteRequest) -> SiteResponse:
    body = CART if request.url.endswith("/cart") else HOME
    return SiteResponse(200, {"content-type": "text/html; charset=utf-8"}, body.encode())


def _stats(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered) * 1e3:7.1f} ms  p95 {p95 * 1e3:7.1f} ms"


async def _timed(n: int, one: Callable[[], Awaitable[Any]]) -> list[float]:
    for _ in range(WARM_UP):
        await one()
    samples: list[float] = []
    for _ in range(n):
        started = time.perf_counter()
        await one()
        samples.append(time.perf_counter() - started)
    return samples


def _row(label: str, samples: list[float], note: str = "") -> None:
    print(f"  {label:58} {_stats(samples)}  {note}", flush=True)


async def _drop_spare(pool: BrowserPool) -> None:
    spare, pool._spare = pool._spare, None  # pyright: ignore[reportPrivateUsage]
    if spare is not None:
        with contextlib.suppress(BaseException):
            await (await spare).close()


async def engine(pool: BrowserPool, trials: int) -> None:
    settings = BrowserSettings(initial_url=f"{ORIGIN}/", sites=[ORIGIN])

    async def starts(spare: bool) -> list[float]:
        samples: list[float] = []
        for index in range(WARM_UP + trials):
            if spare:
                await asyncio.sleep(0.5)  # a model turn: the spare context is prepared meanwhile
            else:
                await _drop_spare(pool)
            started = time.perf_counter()
            session = await pool.open_session(settings, serve)
            await session.run([], screenshot=False)
            if index >= WARM_UP:
                samples.append(time.perf_counter() - started)
            await session.close()
        return samples

    print("trial start (goal <= 300 ms p50):")
    _row("open_session + initial load + observation, spare ready", await starts(True))
    _row("the same, context and page made on the spot", await starts(False))

    session = await pool.open_session(settings, serve)
    await session.run([], screenshot=False)
    print("action round trip, run() of one action (goal <= 50 ms p50):")
    click: list[dict[str, Any]] = [{"type": "click_at", "selector": "#add"}]
    typed: list[dict[str, Any]] = [
        {"type": "type_text_at", "selector": "#search", "text": "lamp", "press_enter": False}
    ]
    for shot in (False, True):
        label = "on" if shot else "off"
        for name, actions in (("click_at #add", click), ("type_text_at #search", typed)):

            def call(actions: list[dict[str, Any]] = actions, shot: bool = shot) -> Awaitable[Any]:
                return session.run(actions, screenshot=shot)

            _row(f"{name}, screenshot {label}", await _timed(trials, call))

    async def there_and_back() -> None:
        await session.run([{"type": "click_at", "selector": "#to-cart"}], screenshot=False)
        await session.run([{"type": "click_at", "selector": "#home"}], screenshot=False)

    samples = [t / 2 for t in await _timed(trials, there_and_back)]
    _row("click_at a link: the next page loaded, screenshot off", samples)
    await session.close()


async def playwright_floor(executable: str, trials: int) -> None:
    async with async_playwright() as driver:
        browser = await driver.chromium.launch(executable_path=executable, args=["--disable-gpu"])

        async def route(handle: Route) -> None:
            answer = await serve(SiteRequest(handle.request.method, handle.request.url, {}))
            await handle.fulfill(status=answer.status, headers=dict(answer.headers), body=answer.body)

        async def fresh() -> float:
            started = time.perf_counter()
            context = await browser.new_context(viewport={"width": 1440, "height": 900})
            await context.route("**/*", route)
            page = await context.new_page()
            await page.goto(f"{ORIGIN}/", wait_until="domcontentloaded")
            await page.inner_text("body")
            elapsed = time.perf_counter() - started
            await context.close()
            return elapsed

        print("floor: raw Playwright, same browser binary (unconfined), no observation:")
        fresh_samples = [await fresh() for _ in range(WARM_UP + trials)][WARM_UP:]
        _row("new context + route + page + load + innerText", fresh_samples)
        context = await browser.new_context(viewport={"width": 1440, "height": 900})
        await context.route("**/*", route)
        page = await context.new_page()
        await page.goto(f"{ORIGIN}/", wait_until="domcontentloaded")

        async def click() -> None:
            await page.click("#add")
            await page.inner_text("body")

        async def fill() -> None:
            await page.fill("#search", "lamp")
            await page.inner_text("body")

        _row("page.click + innerText", await _timed(trials, click))
        _row("page.fill + innerText", await _timed(trials, fill))
        evaluate = await _timed(trials * 5, lambda: page.evaluate("1"))
        _row("driver: Runtime.evaluate round trip through Playwright", evaluate)
        await browser.close()


async def cdp_floor(executable: str, trials: int) -> None:
    with tempfile.TemporaryDirectory() as profile:
        process = await asyncio.create_subprocess_exec(
            executable,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "about:blank",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            port_file = Path(profile) / "DevToolsActivePort"
            for _ in range(200):
                if port_file.exists() and port_file.read_text().strip():
                    break
                await asyncio.sleep(0.05)
            port = port_file.read_text().split()[0]
            async with aiohttp.ClientSession() as http:
                async with http.get(f"http://127.0.0.1:{port}/json/list") as answer:
                    targets = await answer.json()
                page = next(t for t in targets if t["type"] == "page")
                async with http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as socket:
                    ids = iter(range(1, 1 << 30))

                    async def evaluate() -> None:
                        call = next(ids)
                        await socket.send_str(
                            json.dumps(
                                {"id": call, "method": "Runtime.evaluate", "params": {"expression": "1"}}
                            )
                        )
                        while json.loads((await socket.receive()).data).get("id") != call:
                            pass

                    _row(
                        "driver: Runtime.evaluate round trip, bare CDP (aiohttp websocket)",
                        await _timed(trials * 5, evaluate),
                    )
        finally:
            process.kill()
            await process.wait()


class ShopPages:
    """The web_shop pack's own pages, rendered by its pages module from its initial tables."""

    def __init__(self) -> None:
        spec = importlib.util.spec_from_file_location(
            "web_shop_tools",
            WEB_SHOP / "tools" / "__init__.py",
            submodule_search_locations=[str(WEB_SHOP / "tools")],
        )
        assert spec is not None and spec.loader is not None
        package = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = package
        spec.loader.exec_module(package)
        self._pages: Any = importlib.import_module("web_shop_tools.pages")
        self._shop: Any = importlib.import_module("web_shop_tools.shop")
        self._data: dict[str, Any] = json.loads((WEB_SHOP / "data" / "initial_state.json").read_text())
        self._css = (WEB_SHOP / "site" / "style.css").read_bytes()
        products = sorted(self._data["products"].values(), key=lambda item: (item["category"], item["name"]))
        self.first_product: str = products[0]["sku"]
        """The catalog's first row: its link is ``#product-<sku>``."""

    async def __call__(self, request: SiteRequest) -> SiteResponse:
        path = request.url.removeprefix(ORIGIN).split("?")[0]
        if path == "/style.css":
            return SiteResponse(200, {"content-type": "text/css"}, self._css)
        if path.startswith("/product/"):
            page: str = self._pages.product_page(self._data, self._shop.product(self._data, path[9:]))
        else:
            page = self._pages.catalog(self._data)
        return SiteResponse(200, {"content-type": "text/html; charset=utf-8"}, page.encode())


def _kind(process: psutil.Process) -> str:
    """browser, renderers (zygotes and renderers: an exited renderer's CPU is in its zygote's), gpu, other."""
    if process.name() == "bwrap" or "crashpad" in process.name():
        return "other"
    kind = next((part[7:] for part in process.cmdline() if part.startswith("--type=")), "browser")
    kinds = {"browser": "browser", "zygote": "renderers", "renderer": "renderers", "gpu-process": "gpu"}
    return kinds.get(kind, "other")


def _tree_cpu(pool: BrowserPool) -> dict[str, float]:
    """CPU seconds so far of the driver and of the browser's processes by kind (children's times included)."""
    drivers = {driver.pid for driver in pool._drivers}  # pyright: ignore[reportPrivateUsage]
    spent: dict[str, float] = {}
    for process in pool._process_tree():  # pyright: ignore[reportPrivateUsage]
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            kind = "driver" if process.pid in drivers else _kind(process)
            # a driver's exited children are the browser's own processes, already counted
            reaped = 0.0 if kind == "driver" else times.children_user + times.children_system
            spent[kind] = spent.get(kind, 0.0) + times.user + times.system + reaped
    return spent


def _idle_memory(pool: BrowserPool) -> tuple[float, float, int]:
    """RSS and PSS (MiB) summed over the browser's processes, and how many there are."""
    drivers = {driver.pid for driver in pool._drivers}  # pyright: ignore[reportPrivateUsage]
    rss = pss = count = 0
    for process in pool._process_tree():  # pyright: ignore[reportPrivateUsage]
        if process.pid not in drivers:
            with contextlib.suppress(psutil.Error):
                memory = process.memory_full_info()
                rss, pss, count = rss + memory.rss, pss + memory.pss, count + 1
    return rss / 2**20, pss / 2**20, count


async def _context_trial(pool: BrowserPool, shop: ShopPages) -> float:
    settings = BrowserSettings(initial_url=f"{ORIGIN}/", sites=[ORIGIN])
    started = time.perf_counter()
    session = await pool.open_session(settings, shop)
    await session.run([], screenshot=True)
    step = await session.run(
        [{"type": "click_at", "selector": f"#product-{shop.first_product}"}], screenshot=True
    )
    assert step.error is None and step.snapshot.url.endswith(shop.first_product), step.observation[:300]
    await session.close()
    elapsed = time.perf_counter() - started
    spare = pool._spare  # pyright: ignore[reportPrivateUsage]
    if spare is not None:  # the next context is made on this trial's account, before the round ends
        await spare
    return elapsed


KINDS = ("browser", "renderers", "gpu", "other", "driver")


async def compare(binaries: Sequence[str], rounds: int, trials: int, confined: bool) -> None:
    shop = ShopPages()
    pools: dict[str, BrowserPool] = {}
    try:
        for name in binaries:
            pools[name] = BrowserPool(executable=find_chromium(name), confined=confined)
            started = time.perf_counter()
            await pools[name].start()
            report = pools[name].report()
            print(
                f"{name}: {report['executable']} {report['version']}; confinement: {report['confinement']}; "
                f"launch {(time.perf_counter() - started) * 1e3:.0f} ms"
            )
        for pool in pools.values():
            for _ in range(WARM_UP):
                await _context_trial(pool, shop)
        await asyncio.sleep(2)
        for name, pool in pools.items():
            rss, pss, count = _idle_memory(pool)
            print(f"{name}: idle after warm-up, {count} processes: RSS {rss:.0f} MiB, PSS {pss:.0f} MiB")
        print(
            f"context-trials ({trials} per round), CPU ms per trial: "
            + ", ".join(KINDS)
            + ", browser tree total; wall p50"
        )
        figures: dict[str, list[tuple[float, ...]]] = {name: [] for name in binaries}
        for index in range(rounds):
            for name in binaries if index % 2 == 0 else binaries[::-1]:
                before = _tree_cpu(pools[name])
                walls = [await _context_trial(pools[name], shop) for _ in range(trials)]
                after = _tree_cpu(pools[name])
                spent = [(after.get(kind, 0.0) - before.get(kind, 0.0)) / trials * 1e3 for kind in KINDS]
                row = (*spent, sum(spent[:-1]), statistics.median(walls) * 1e3)
                figures[name].append(row)
                print(
                    f"  round {index} {name:24} "
                    + " ".join(f"{value:6.0f}" for value in row)
                    + f"   load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
        print(f"median of {rounds} rounds: " + ", ".join(KINDS) + ", browser tree total; wall p50")
        for name, rows in figures.items():
            medians = [statistics.median(column) for column in zip(*rows, strict=True)]
            print(f"  {name:32} " + " ".join(f"{value:6.0f}" for value in medians))
    finally:
        for pool in pools.values():
            await pool.close()


async def main(trials: int, confined: bool, browser: str | None) -> None:
    print(
        f"{psutil.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; {trials} samples per row after {WARM_UP} warm-up"
    )
    pool = BrowserPool(executable=browser, confined=confined)
    started = time.perf_counter()
    await pool.start()
    report = pool.report()
    print(f"browser: {report['executable']} {report['version']}; confinement: {report['confinement']}")
    print(f"  launch (once per runner process): {(time.perf_counter() - started) * 1e3:.0f} ms")
    try:
        await engine(pool, trials)
    finally:
        await pool.close()
    binary = find_chromium(browser)
    await playwright_floor(binary, trials)
    await cdp_floor(binary, trials)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--trials", type=int, default=None, help="samples per row (40); with --compare, per round (10)"
    )
    parser.add_argument("--unconfined", action="store_true", help="launch Chromium without bubblewrap")
    parser.add_argument("--browser", help="the binary (default: what the pool picks, find_chromium())")
    parser.add_argument("--compare", nargs=2, metavar="BINARY", help="two binaries' cost per context-trial")
    parser.add_argument("--rounds", type=int, default=6, help="with --compare: alternating rounds")
    args = parser.parse_args()
    if args.compare:
        asyncio.run(compare(args.compare, args.rounds, args.trials or 10, not args.unconfined))
    else:
        asyncio.run(main(args.trials or 40, not args.unconfined, args.browser))
