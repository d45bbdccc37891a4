"""Benchmark: the browser engine -- a trial's browser start and one action's round trip -- beside the
drivers' floors, measured in the same run.

    uv run python tools/bench/browser.py [--trials 40] [--unconfined]

One warm Chromium (confined in bubblewrap unless ``--unconfined``), a mock shop answered by an
in-process site handler (as the runner's worker would, minus the worker):

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
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import psutil
from playwright.async_api import Route, async_playwright

from tolokaforge.core.models.web import BrowserSettings
from tolokaforge.runner import BrowserPool, SiteRequest, SiteResponse, find_chromium

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


async def main(trials: int, confined: bool) -> None:
    print(
        f"{psutil.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; {trials} samples per row after {WARM_UP} warm-up"
    )
    pool = BrowserPool(confined=confined)
    started = time.perf_counter()
    await pool.start()
    report = pool.report()
    print(f"browser: {report['executable']} {report['version']}; confinement: {report['confinement']}")
    print(f"  launch (once per runner process): {(time.perf_counter() - started) * 1e3:.0f} ms")
    try:
        await engine(pool, trials)
    finally:
        await pool.close()
    binary = find_chromium()
    await playwright_floor(binary, trials)
    await cdp_floor(binary, trials)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--unconfined", action="store_true", help="launch Chromium without bubblewrap")
    args = parser.parse_args()
    asyncio.run(main(args.trials, not args.unconfined))
