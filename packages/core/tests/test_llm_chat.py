"""The one chat-completions client: what it sends, what it retries, and how each failure is reported."""

from __future__ import annotations

import asyncio
import json
import re
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tolokaforge.core.llm import (
    ChatCompletions,
    ChatEndpoint,
    ChatExhausted,
    ChatRefused,
    ChatUnavailable,
    ChatUnreachable,
)
from tolokaforge.core.retry import Backoff

ANSWER: dict[str, Any] = {
    "choices": [{"message": {"role": "assistant", "content": "ok"}}],
    "usage": {
        "prompt_tokens": 7,
        "completion_tokens": 3,
        "completion_tokens_details": {"reasoning_tokens": 2},
    },
}

Reply = Callable[[int], web.StreamResponse]
"""The n-th request's (from 0) answer."""


@dataclass
class Server:
    url: str
    bodies: list[dict[str, Any]] = field(default_factory=lambda: [])
    headers: list[dict[str, str]] = field(default_factory=lambda: [])
    reply: Reply = lambda n: web.json_response(ANSWER)


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    state = Server(url="")

    async def handle(request: web.Request) -> web.StreamResponse:
        state.bodies.append(json.loads(await request.read()))
        state.headers.append(dict(request.headers))
        reply = state.reply(len(state.bodies) - 1)
        if isinstance(reply, web.Response) and reply.status == 599:  # the test's "never answer"
            await asyncio.sleep(1)
        return reply

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    state.url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1/"
    yield state
    await runner.cleanup()


def _endpoint(server: Server, **overrides: Any) -> ChatEndpoint:
    settings: dict[str, Any] = {
        "model": "m",
        "base_url": server.url,
        "api_key": "secret",
        "max_retries": 2,
        "backoff": Backoff(0.0, 0.0),
    }
    settings.update(overrides)
    return ChatEndpoint(**settings)


MESSAGES = [{"role": "user", "content": "hi"}]
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


async def test_a_completion_is_its_message_and_token_counts(server: Server) -> None:
    async with aiohttp.ClientSession() as session:
        chat = ChatCompletions(_endpoint(server, temperature=0.2), session)
        completion = await chat.complete(MESSAGES, [TOOL])
    assert completion.message == {"role": "assistant", "content": "ok"}
    assert (completion.prompt_tokens, completion.completion_tokens, completion.reasoning_tokens) == (7, 3, 2)
    assert server.bodies == [{"model": "m", "messages": MESSAGES, "tools": [TOOL], "temperature": 0.2}]
    assert server.headers[0]["Authorization"] == "Bearer secret"


async def test_no_tools_and_no_temperature_are_left_out_of_the_request(server: Server) -> None:
    async with aiohttp.ClientSession() as session:
        await ChatCompletions(_endpoint(server), session).complete(MESSAGES, [])
    assert server.bodies == [{"model": "m", "messages": MESSAGES}]


async def test_429_and_5xx_are_retried_and_each_retry_is_told(server: Server) -> None:
    statuses = [429, 503]
    server.reply = lambda n: (
        web.Response(status=statuses[n], headers={"Retry-After": "0.01"} if n == 0 else {})
        if n < len(statuses)
        else web.json_response(ANSWER)
    )
    told: list[tuple[int | None, float]] = []
    async with aiohttp.ClientSession() as session:
        chat = ChatCompletions(_endpoint(server), session)
        completion = await chat.complete(MESSAGES, [], lambda error, wait: told.append((error.status, wait)))
    assert completion.message["content"] == "ok"
    assert told == [(429, 0.01), (503, 0.0)]  # the server's Retry-After, then the (zero) backoff
    assert len(server.bodies) == 3


async def test_running_out_of_tries_names_the_attempts_and_the_last_failure(server: Server) -> None:
    server.reply = lambda n: web.Response(status=500, reason="Boom")
    async with aiohttp.ClientSession() as session:
        chat = ChatCompletions(_endpoint(server, max_retries=1), session)
        with pytest.raises(ChatExhausted) as caught:
            await chat.complete(MESSAGES, [])
    assert caught.value.attempts == 2 and len(server.bodies) == 2
    assert caught.value.last.status == 500
    assert str(caught.value) == "failed after 2 attempt(s): HTTP 500 Boom"


async def test_a_request_with_no_answer_in_time_is_retried_as_a_timeout(server: Server) -> None:
    server.reply = lambda n: web.Response(status=599)
    async with aiohttp.ClientSession() as session:
        chat = ChatCompletions(_endpoint(server, max_retries=1, timeout_s=0.2), session)
        with pytest.raises(ChatExhausted) as caught:
            await chat.complete(MESSAGES, [])
    last: ChatUnavailable = caught.value.last
    assert last.timed_out and str(last) == "no answer within 0.2s"
    assert caught.value.attempts == 2


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (lambda: web.Response(status=401, text="bad key"), "refused the request: HTTP 401: bad key"),
        (lambda: web.Response(text="<html>"), "answered a body that is not JSON"),
        (lambda: web.json_response({"choices": []}), "answered no choices[0].message"),
        (
            lambda: web.json_response({"choices": [{"message": "hi"}]}),
            "answered a choices[0].message that is not an object",
        ),
    ],
)
async def test_what_another_try_would_repeat_is_refused_at_once(
    server: Server, reply: Callable[[], web.Response], said: str
) -> None:
    server.reply = lambda n: reply()
    async with aiohttp.ClientSession() as session:
        chat = ChatCompletions(_endpoint(server), session)
        with pytest.raises(ChatRefused, match="^" + re.escape(said)) as caught:
            await chat.complete(MESSAGES, [])
    assert len(server.bodies) == 1
    # Only a refusal the server answered carries its status (a caller tells a bad key from a bad body).
    assert caught.value.status == (401 if said.startswith("refused the request") else None)
    assert not isinstance(caught.value, ChatUnreachable)


async def test_an_endpoint_nobody_listens_on_is_refused_at_once() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with aiohttp.ClientSession() as session:
        endpoint = ChatEndpoint(model="m", base_url=f"http://127.0.0.1:{port}/v1", api_key="k")
        with pytest.raises(ChatUnreachable, match=r"^unreachable: Client") as caught:
            await ChatCompletions(endpoint, session).complete(MESSAGES, [])
    assert isinstance(caught.value, ChatRefused) and caught.value.status is None
