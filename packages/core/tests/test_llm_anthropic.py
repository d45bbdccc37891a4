"""The chat client against Anthropic's Messages API: the request it builds from chat-completions messages,
the answer it maps back, what it retries (529 too) and what it refuses to send."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tolokaforge.core.llm import ChatCompletions, ChatEndpoint, ChatRefused, split_model
from tolokaforge.core.retry import Backoff

Reply = Callable[[int], web.StreamResponse]


def _answer(*blocks: dict[str, Any], usage: dict[str, int] | None = None) -> web.Response:
    return web.json_response(
        {"type": "message", "role": "assistant", "content": list(blocks), "usage": usage or {}}
    )


@dataclass
class Server:
    url: str = ""
    bodies: list[dict[str, Any]] = field(default_factory=lambda: [])
    headers: list[dict[str, str]] = field(default_factory=lambda: [])
    reply: Reply = lambda n: _answer({"type": "text", "text": "ok"})


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    state = Server()

    async def handle(request: web.Request) -> web.StreamResponse:
        state.bodies.append(json.loads(await request.read()))
        state.headers.append(dict(request.headers))
        return state.reply(len(state.bodies) - 1)

    app = web.Application()
    app.router.add_post("/v1/messages", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    state.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield state
    await runner.cleanup()


def _endpoint(server: Server, **overrides: Any) -> ChatEndpoint:
    settings: dict[str, Any] = {
        "model": "claude-x",
        "provider": "anthropic",
        "base_url": server.url,
        "api_key": "secret",
        "max_retries": 2,
        "backoff": Backoff(0.0, 0.0),
    }
    settings.update(overrides)
    return ChatEndpoint(**settings)


TOOL = {
    "type": "function",
    "function": {"name": "f", "description": "does f", "parameters": {"type": "object"}},
}


def test_the_prefix_names_the_provider_and_only_the_first_segment_is_read() -> None:
    assert split_model("anthropic/claude-x") == ("anthropic", "claude-x")
    assert split_model("openai/gpt-4o") == ("openai", "gpt-4o")
    assert split_model("gpt-4o") == ("openai", "gpt-4o")
    assert split_model("openai/anthropic/claude-x") == ("openai", "anthropic/claude-x")
    assert split_model("meta/llama") == ("openai", "meta/llama")


async def test_a_conversation_with_tool_calls_maps_both_ways(server: Server) -> None:
    server.reply = lambda n: _answer(
        {"type": "text", "text": "Checking "},
        {"type": "text", "text": "both."},
        {"type": "tool_use", "id": "toolu_9", "name": "f", "input": {"x": 1}},
        usage={"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 4},
    )
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x": 0}'}},
                {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{not json"}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "0"},
        {"role": "tool", "tool_call_id": "b", "content": "error"},
        {"role": "user", "content": "and?"},
    ]
    async with aiohttp.ClientSession() as session:
        chat = ChatCompletions(_endpoint(server, temperature=0.5, max_tokens=100), session)
        completion = await chat.complete(messages, [TOOL])
    assert server.bodies == [
        {
            "model": "claude-x",
            "max_tokens": 100,
            "system": "Be brief.",
            "temperature": 0.5,
            "tools": [{"name": "f", "description": "does f", "input_schema": {"type": "object"}}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "a", "name": "f", "input": {"x": 0}},
                        {
                            "type": "tool_use",
                            "id": "b",
                            "name": "f",
                            "input": {"_unparsed_arguments": "{not json"},
                        },
                    ],
                },
                # Both results and the next user line are one user turn: the API alternates roles.
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "a", "content": "0"},
                        {"type": "tool_result", "tool_use_id": "b", "content": "error"},
                        {"type": "text", "text": "and?"},
                    ],
                },
            ],
        }
    ]
    headers = server.headers[0]
    assert headers["x-api-key"] == "secret" and headers["anthropic-version"] == "2023-06-01"
    assert "Authorization" not in headers
    assert completion.message == {
        "role": "assistant",
        "content": "Checking both.",
        "tool_calls": [
            {"id": "toolu_9", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}}
        ],
    }
    assert (completion.prompt_tokens, completion.completion_tokens) == (15, 4)


async def test_max_tokens_is_always_sent_and_529_is_retried(server: Server) -> None:
    server.reply = lambda n: web.Response(status=529) if n == 0 else _answer({"type": "text", "text": "ok"})
    async with aiohttp.ClientSession() as session:
        completion = await ChatCompletions(_endpoint(server), session).complete(
            [{"role": "user", "content": "hi"}], []
        )
    assert completion.message == {"role": "assistant", "content": "ok"}
    assert len(server.bodies) == 2 and server.bodies[0]["max_tokens"] == 4096
    assert "temperature" not in server.bodies[0] and "tools" not in server.bodies[0]


async def test_a_body_that_is_not_a_message_is_refused(server: Server) -> None:
    server.reply = lambda n: web.json_response({"choices": []})
    async with aiohttp.ClientSession() as session:
        with pytest.raises(ChatRefused, match="no content list"):
            await ChatCompletions(_endpoint(server), session).complete(
                [{"role": "user", "content": "hi"}], []
            )


def test_a_seed_or_reasoning_effort_for_anthropic_is_refused_not_dropped() -> None:
    with pytest.raises(ValueError, match="no seed"):
        ChatEndpoint(model="c", base_url="http://x", api_key="k", provider="anthropic", seed=1)
    with pytest.raises(ValueError, match="reasoning effort"):
        ChatEndpoint(
            model="c", base_url="http://x", api_key="k", provider="anthropic", reasoning_effort="low"
        )
