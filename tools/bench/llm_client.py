"""Benchmark: chat completions per second through the host's LLM client, beside the bare-HTTP floor.

    uv run python tools/bench/llm_client.py [--n 2000]

A local aiohttp chat-completions server answers every request at once. For concurrency 1 and 16 it
prints the rate of ``ChatClient.complete`` and, as the floor, the rate of bare aiohttp POSTs of the
same body on the same connection pool: what any client costs before parsing, pricing and accounting.
With the ``openai`` package importable it also measures ``AsyncOpenAI`` (the question of issue 19:
measure before switching); without it, that row says so.

The Anthropic rows do the same against a local Messages API server: our client with an ``anthropic/``
model, the bare-POST floor, and the ``anthropic`` SDK's ``AsyncAnthropic`` when it is importable.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp import web

from tolokaforge.host import DEFAULT_PRICES, ChatClient, ChatSettings

CONCURRENCIES = (1, 16)
ANSWER = json.dumps(
    {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
    }
)
MESSAGES = [{"role": "user", "content": "hi"}]
ANTHROPIC_ANSWER = json.dumps(
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 2},
    }
)


async def _answer(request: web.Request) -> web.Response:
    await request.read()
    return web.Response(text=ANSWER, content_type="application/json")


async def _anthropic_answer(request: web.Request) -> web.Response:
    await request.read()
    return web.Response(text=ANTHROPIC_ANSWER, content_type="application/json")


async def _rate(call: Callable[[], Awaitable[Any]], n: int, concurrency: int) -> float:
    for _ in range(50):  # warm the pool
        await call()
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            await call()

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    return n / (time.perf_counter() - started)


def _sdk_call(url: str) -> Callable[[], Awaitable[Any]] | None:
    if importlib.util.find_spec("openai") is None:
        return None
    openai: Any = importlib.import_module("openai")
    client: Any = openai.AsyncOpenAI(base_url=url, api_key="k")
    return lambda: client.chat.completions.create(model="m", messages=MESSAGES)


def _anthropic_sdk_call(url: str) -> Callable[[], Awaitable[Any]] | None:
    if importlib.util.find_spec("anthropic") is None:
        return None
    anthropic: Any = importlib.import_module("anthropic")
    client: Any = anthropic.AsyncAnthropic(base_url=url, api_key="k")
    return lambda: client.messages.create(model="m", max_tokens=64, messages=MESSAGES)


async def main(n: int) -> None:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", _answer)
    app.router.add_post("/v1/messages", _anthropic_answer)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    async with aiohttp.ClientSession() as session:
        ours = ChatClient(ChatSettings(model="m", base_url=url, api_key="k"), session, DEFAULT_PRICES)

        async def bare() -> Any:
            async with session.post(
                url + "/chat/completions", json={"model": "m", "messages": MESSAGES}
            ) as r:
                return await r.json()

        sdk = _sdk_call(url)
        for concurrency in CONCURRENCIES:
            floor = await _rate(bare, n, concurrency)
            rate = await _rate(lambda: ours.complete(MESSAGES, []), n, concurrency)
            print(
                f"concurrency {concurrency:2d}: ChatClient {rate:7.0f}/s   floor (bare aiohttp) {floor:7.0f}/s"
            )
            if sdk is None:
                print("               openai SDK: not installed here (pip install openai to compare)")
            else:
                print(f"               openai SDK {await _rate(sdk, n, concurrency):7.0f}/s")
        await _anthropic_rows(session, url.removesuffix("/v1"), n)
    await runner.cleanup()


async def _anthropic_rows(session: aiohttp.ClientSession, root: str, n: int) -> None:
    settings = ChatSettings(model="anthropic/m", base_url=root, api_key="k")
    ours = ChatClient(settings, session, DEFAULT_PRICES)
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}

    async def bare() -> Any:
        async with session.post(
            root + "/v1/messages",
            json={"model": "m", "max_tokens": 64, "messages": MESSAGES},
            headers=headers,
        ) as r:
            return await r.json()

    sdk = _anthropic_sdk_call(root)
    for concurrency in CONCURRENCIES:
        floor = await _rate(bare, n, concurrency)
        rate = await _rate(lambda: ours.complete(MESSAGES, []), n, concurrency)
        print(f"anthropic {concurrency:2d}: ChatClient {rate:7.0f}/s   floor (bare aiohttp) {floor:7.0f}/s")
        if sdk is None:
            print("               anthropic SDK: not installed here (pip install anthropic to compare)")
        else:
            print(f"               anthropic SDK {await _rate(sdk, n, concurrency):7.0f}/s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    asyncio.run(main(parser.parse_args().n))
