"""Fixtures: the example packs, broken copies of them, a real local chat-completions server, and real
screenshots."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tolokaforge.contracts.runner import HealthCheckRequest

PACKS = Path(__file__).resolve().parents[3] / "examples" / "packs"


@pytest.fixture(scope="session", autouse=True)
def run_key_dir(run_key_dir: Path) -> Path:
    """Every test here keeps runs' signing keys in the session's folder (packages/conftest.py)."""
    return run_key_dir


Jpegs = Callable[[int], list[bytes]]


def _jpegs(count: int) -> list[bytes]:
    """``count`` different viewport screenshots of real pages, as JPEG (headless Chromium)."""
    # Imported here: most tests of this package never take a screenshot.
    from playwright.sync_api import sync_playwright

    shots: list[bytes] = []
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path="/usr/bin/chromium")
        page = browser.new_page(viewport={"width": 320, "height": 200})
        for number in range(count):
            page.set_content(
                f"<body style='background:hsl({number * 90},70%,60%)'><h1>Step {number}</h1></body>"
            )
            shots.append(page.screenshot(type="jpeg", quality=70))
        browser.close()
    return shots


@pytest.fixture(scope="session")
def jpegs() -> Jpegs:
    """``jpegs(count)`` -> that many different screenshots of real pages, as JPEG."""
    return _jpegs


@pytest.fixture
def packs_dir() -> Path:
    return PACKS


@pytest.fixture
def pack_copy(tmp_path: Path) -> Callable[[str], Path]:
    """``pack_copy(name)`` -> a writable copy of an example pack."""

    def copy(name: str) -> Path:
        target = tmp_path / name
        shutil.copytree(PACKS / name, target, ignore=shutil.ignore_patterns("__pycache__"))
        return target

    return copy


Responder = Callable[[dict[str, Any], int], Awaitable[web.StreamResponse]]


@dataclass
class ChatServer:
    """A chat-completions endpoint whose answers a test scripts; it records every request body."""

    url: str
    requests: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    authorizations: list[str] = field(default_factory=list[str])
    """Each request's Authorization header, as received (a responder may echo it, as providers do)."""


class Replies:
    """Builders of chat-completions answers (a fixture, since test modules cannot import conftest)."""

    @staticmethod
    def completion(
        message: dict[str, Any], *, prompt_tokens: int = 100, completion_tokens: int = 20
    ) -> web.Response:
        return _completion(message, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)

    @staticmethod
    def tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
        return _tool_call(call_id, name, arguments)

    @staticmethod
    def assistant_turns(body: dict[str, Any]) -> int:
        return _assistant_turns(body)


@pytest.fixture
def replies() -> Replies:
    return Replies()


def _completion(
    message: dict[str, Any], *, prompt_tokens: int = 100, completion_tokens: int = 20
) -> web.Response:
    body = {
        "id": "cmpl",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
    }
    return web.json_response(body)


def _tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        ],
    }


def _assistant_turns(body: dict[str, Any]) -> int:
    """How many assistant messages the request carries: the step the conversation is at."""
    return sum(1 for message in body["messages"] if message["role"] == "assistant")


@pytest.fixture
async def chat_server() -> AsyncIterator[Callable[[Responder], Awaitable[ChatServer]]]:
    runners: list[web.AppRunner] = []

    async def start(responder: Responder) -> ChatServer:
        server = ChatServer(url="")

        async def handle(request: web.Request) -> web.StreamResponse:
            assert request.headers["Authorization"] == "Bearer test-key"
            server.authorizations.append(request.headers["Authorization"])
            body = json.loads(await request.text())
            server.requests.append(body)
            return await responder(body, len(server.requests))

        app = web.Application()
        app.router.add_post("/v1/chat/completions", handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = runner.addresses[0][1]
        server.url = f"http://127.0.0.1:{port}/v1"
        return server

    yield start
    for runner in runners:
        await runner.cleanup()


class RecordingStub:
    """A stand-in for the generated stub that calls a runner's servicer directly, keeping what the host
    sends (the gRPC adapter is driven exactly as over a channel, without one).

    ``health_delay_s``: HealthCheck answers late (every first trial waits meanwhile);
    ``old``: a runner that knows no GradeTrial ``release`` (the field is dropped, never answered).
    RegisterTrial yields once first, so a run's first trials interleave as over a network.
    """

    def __init__(self, inner: Any, *, health_delay_s: float = 0.0, old: bool = False) -> None:
        self.inner = inner
        self.health_delay_s = health_delay_s
        self.old = old
        self.health_checks = 0
        self.registrations: list[Any] = []
        self.grades: list[Any] = []
        self.cleanups: list[str] = []

    async def health_check(self, message: Any = None, *, timeout: float | None = None) -> Any:
        self.health_checks += 1
        await asyncio.sleep(self.health_delay_s)
        return await self.inner.health_check(message or HealthCheckRequest())

    async def register_trial(self, message: Any, *, timeout: float | None = None) -> Any:
        self.registrations.append(message)
        await asyncio.sleep(0)
        return await self.inner.register_trial(message)

    async def execute_tool(self, message: Any, *, timeout: float | None = None) -> Any:
        return await self.inner.execute_tool(message)

    async def grade_trial(self, message: Any, *, timeout: float | None = None) -> Any:
        if self.old:
            message.release = False
        answer = await self.inner.grade_trial(message)
        self.grades.append(answer)
        return answer

    async def cleanup_trial(self, message: Any, *, timeout: float | None = None) -> Any:
        self.cleanups.append(message.trial_id)
        return await self.inner.cleanup_trial(message)


@pytest.fixture
def recording_stub() -> type[RecordingStub]:
    """The :class:`RecordingStub` class: ``recording_stub(runner.servicer, old=True)``."""
    return RecordingStub
