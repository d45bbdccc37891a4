"""An OpenEnv ``Environment`` over :mod:`tolokaforge.env`, servable with OpenEnv's own HTTP/WebSocket
server, plus the typed client a trainer drives it with.

The action is one OpenAI chat assistant message; the observation is what :class:`tolokaforge.env.Env`
observes (system prompt, tool schemas, the new messages) and, on the step that ends the episode, the
runner's grade as ``reward`` with ``passed``, ``components`` and ``reasons`` beside it. Episodes pick
their task at reset (``reset(task_id=..., seed=...)``; OpenEnv passes extra reset keys through).

OpenEnv's server makes one environment per WebSocket session with a factory it calls from a worker
thread, and awaits ``reset_async``/``step_async`` on its own event loop, so every instance shares the
caller's open :class:`Environments` (one pack, one runner) and :func:`serve` runs uvicorn on the loop
that opened it. ``close`` is called from a worker thread too: it hands the release back to that loop.

Every hop is authenticated (docs/services.md, "Trust model"): OpenEnv's app sits behind
:class:`TokenGate`, which refuses any HTTP request (401) or WebSocket handshake (403) that does not
present the server's bearer token, and :func:`serve` refuses a non-loopback address without TLS. The
client sends the token on its WebSocket handshake.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import uuid
from collections.abc import AsyncGenerator, Coroutine
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import uvicorn
from openenv.core import EnvClient  # pyright: ignore[reportMissingTypeStubs]
from openenv.core.client_types import StepResult  # pyright: ignore[reportMissingTypeStubs]
from openenv.core.env_server import (  # pyright: ignore[reportMissingTypeStubs]
    create_fastapi_app,  # pyright: ignore[reportUnknownVariableType]
)
from openenv.core.env_server.interfaces import Environment  # pyright: ignore[reportMissingTypeStubs]
from openenv.core.env_server.types import Action, Observation, State  # pyright: ignore[reportMissingTypeStubs]
from pydantic import Field
from starlette.types import ASGIApp, Receive, Scope, Send
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import InvalidStatus

from tolokaforge.core.credentials import (
    CredentialError,
    bearer,
    is_loopback,
    new_token,
    presented_token,
    refuse_public_bind,
    token_matches,
)
from tolokaforge.env import Env, Environments

__all__ = [
    "ChatAction",
    "ChatObservation",
    "Served",
    "TokenGate",
    "TolokaforgeClient",
    "TolokaforgeEnvironment",
    "TolokaforgeState",
    "create_app",
    "serve",
]

_T = TypeVar("_T")
_releasing: set[asyncio.Task[None]] = set()


class ChatAction(Action):
    """One assistant message in OpenAI chat shape (``content``, ``tool_calls``)."""

    message: dict[str, Any]


class ChatObservation(Observation):
    """The env's observation; the grade fields are set on the step that ends the episode."""

    system_prompt: str = ""
    tools: list[dict[str, Any]] = Field(default_factory=list[dict[str, Any]])
    messages: list[dict[str, Any]] = Field(default_factory=list[dict[str, Any]])
    termination: str | None = None
    passed: bool | None = None
    components: dict[str, float | None] = Field(default_factory=dict[str, float | None])
    reasons: list[str] = Field(default_factory=list[str])


class TolokaforgeState(State):
    """OpenEnv's state (episode id, step count) plus the task and whether the episode ended."""

    task_id: str | None = None
    done: bool = False


class TolokaforgeEnvironment(Environment[ChatAction, ChatObservation, TolokaforgeState]):
    """One OpenEnv session: at most one trial at a time, released when it ends or the session closes."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(
        self, envs: Environments, loop: asyncio.AbstractEventLoop, *, task_id: str | None = None
    ) -> None:
        super().__init__()
        self._envs = envs
        self._loop = loop
        self._default_task = task_id
        self._env: Env | None = None
        self._state = TolokaforgeState()

    async def reset_async(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        **kwargs: Any,
    ) -> ChatObservation:
        chosen = task_id or self._default_task
        if chosen is None:
            raise ValueError("reset needs a task_id (no default task was given to this environment)")
        await self._release()
        env = self._envs.env()
        self._env = env
        observation = await env.reset(chosen, seed=seed or 0)
        self._state = TolokaforgeState(episode_id=episode_id or uuid.uuid4().hex, task_id=chosen)
        return ChatObservation(
            system_prompt=observation.system_prompt,
            tools=list(observation.tools),
            messages=list(observation.messages),
            done=observation.done,
        )

    async def step_async(
        self, action: ChatAction, timeout_s: float | None = None, **kwargs: Any
    ) -> ChatObservation:
        env = self._env
        if env is None or self._state.done:
            raise RuntimeError("step before reset, or after the episode ended: reset first")
        observation, done, info = await env.step(action.message)
        self._state.step_count += 1
        result = ChatObservation(messages=list(observation.messages), done=done, termination=info.termination)
        if done:
            self._state.done = True
            reward = await env.reward()
            result.reward = reward.value
            result.passed = reward.passed
            result.components = dict(reward.components)
            result.reasons = list(reward.reasons)
            await self._release()
        return result

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> ChatObservation:
        return self._on_loop(self.reset_async(seed, episode_id, **kwargs))

    def step(self, action: ChatAction, timeout_s: float | None = None, **kwargs: Any) -> ChatObservation:
        return self._on_loop(self.step_async(action, timeout_s, **kwargs))

    @property
    def state(self) -> TolokaforgeState:
        return self._state

    def close(self) -> None:
        """Release the trial from any thread (OpenEnv closes sessions from a worker thread)."""
        if self._env is None:
            return
        if _running_loop() is self._loop:
            # OpenEnv's stateless POST /reset and /step close their throwaway instance on the loop itself.
            task = self._loop.create_task(self._release())
            _releasing.add(task)  # held until done: the loop keeps only weak references to tasks
            task.add_done_callback(_releasing.discard)
        else:
            asyncio.run_coroutine_threadsafe(self._release(), self._loop).result()

    async def aclose(self) -> None:
        """Release the trial from the loop that owns the environments."""
        await self._release()

    async def _release(self) -> None:
        env, self._env = self._env, None
        if env is not None:
            await env.close()

    def _on_loop(self, work: Coroutine[Any, Any, _T]) -> _T:
        # The sync API is for other threads (the trials live on the loop that opened the environments).
        if _running_loop() is self._loop:
            work.close()
            raise RuntimeError("called on the environments' own event loop: use reset_async/step_async")
        return asyncio.run_coroutine_threadsafe(work, self._loop).result()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class TokenGate:
    """``app`` behind a bearer-token check: an HTTP request without the token is answered 401 (with
    ``WWW-Authenticate``), a WebSocket handshake without it is closed with 1008 before it is accepted,
    which uvicorn answers with HTTP 403. Lifespan events pass through.

    Not the ASGI denial-response extension (a 401 on the handshake): uvicorn 0.54's default WebSocket
    implementation (websockets-sansio) logs "ASGI callable returned without completing handshake" at
    ERROR after every such denial (uvicorn PR #3138), an alert per refused client."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise CredentialError("the OpenEnv server's token is empty")
        self.app = app
        self._token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        authorization: str | None = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value.decode("latin-1")
                break
        presented = presented_token(authorization)
        if presented is not None and token_matches(presented, self._token):
            await self.app(scope, receive, send)
            return
        reason = (
            "this server needs its token: Authorization: Bearer <token>"
            if presented is None
            else "the token presented is not this server's"
        )
        if scope["type"] == "http":
            body = json.dumps({"detail": reason}).encode()
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b'Bearer realm="tolokaforge-openenv"'),
            ]
            await send({"type": "http.response.start", "status": 401, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await receive()  # the handshake's websocket.connect, refused before anything is accepted
        await send({"type": "websocket.close", "code": 1008, "reason": reason})


def create_app(
    envs: Environments, *, token: str, task_id: str | None = None, max_concurrent_envs: int = 64
) -> ASGIApp:
    """OpenEnv's FastAPI app over ``envs`` behind :class:`TokenGate`; call it on the loop that opened them."""
    loop = asyncio.get_running_loop()

    def factory() -> TolokaforgeEnvironment:
        return TolokaforgeEnvironment(envs, loop, task_id=task_id)

    app = create_fastapi_app(factory, ChatAction, ChatObservation, max_concurrent_envs=max_concurrent_envs)
    return TokenGate(app, token)


@dataclass(frozen=True)
class Served:
    """Where :func:`serve` listens and the token it opens to (kept out of ``repr``: no token in logs)."""

    url: str
    token: str = field(repr=False)

    @property
    def headers(self) -> dict[str, str]:
        """The header an HTTP call (``POST /reset``, ``GET /schema``...) presents."""
        return {"Authorization": bearer(self.token)}


@asynccontextmanager
async def serve(
    envs: Environments,
    *,
    token: str | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    tls_cert: Path | None = None,
    tls_key: Path | None = None,
    task_id: str | None = None,
    max_concurrent_envs: int = 64,
) -> AsyncGenerator[Served]:
    """Serve ``envs`` with OpenEnv's server on this event loop, behind ``token`` (None: a fresh one);
    yields the base URL (port 0: a free one) and the token. A ``host`` other than loopback needs
    ``tls_cert`` and ``tls_key`` (PEM files); with them the URL is ``https://``."""
    if (tls_cert is None) != (tls_key is None):
        raise CredentialError("TLS needs both tls_cert= and tls_key=")
    refuse_public_bind(host, tls=tls_cert is not None, flags="tls_cert= and tls_key=")
    secret = new_token() if token is None else token
    app = create_app(envs, token=secret, task_id=task_id, max_concurrent_envs=max_concurrent_envs)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        ssl_certfile=tls_cert,
        ssl_keyfile=tls_key,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()  # raises what stopped the server from starting
            await asyncio.sleep(0.01)
        bound = server.servers[0].sockets[0].getsockname()[1]
        scheme = "http" if tls_cert is None else "https"
        shown = f"[{host}]" if ":" in host else host
        yield Served(f"{scheme}://{shown}:{bound}", secret)
    finally:
        server.should_exit = True
        with suppress(asyncio.CancelledError):
            await task


class TolokaforgeClient(EnvClient[ChatAction, ChatObservation, TolokaforgeState]):
    """OpenEnv's WebSocket client, typed for this environment, presenting the server's ``token`` on its
    handshake. ``tls`` is the context a ``https://`` server's certificate is checked with (None: the
    system's CAs); the token is never sent in clear to anything but loopback."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str,
        tls: ssl.SSLContext | None = None,
        connect_timeout_s: float = 10.0,
        message_timeout_s: float = 60.0,
        max_message_size_mb: float = 100.0,
    ) -> None:
        super().__init__(
            base_url,
            connect_timeout_s=connect_timeout_s,
            message_timeout_s=message_timeout_s,
            max_message_size_mb=max_message_size_mb,
        )
        parts = urlsplit(self._ws_url)
        host = parts.hostname or ""
        if parts.scheme != "wss" and not is_loopback(host):
            raise CredentialError(
                f"refusing to send the OpenEnv server's token to {host} in clear: use an https:// base_url "
                f"(the server must serve TLS there: serve(tls_cert=, tls_key=))"
            )
        if tls is not None and parts.scheme != "wss":
            raise CredentialError(f"tls= was given but {base_url} is not https://")
        self._token = token
        self._tls = tls
        self._loopback = is_loopback(host)

    async def connect(self) -> TolokaforgeClient:
        """Open the session's WebSocket with the token. OpenEnv 0.3's ``EnvClient.connect`` takes no
        headers (and none of its calls are plain HTTP), so this replaces it: the same handshake plus
        ``Authorization``, with no proxy for loopback (instead of the base's edit of ``NO_PROXY`` in
        the process environment, which concurrent connects would race on)."""
        if self._ws is not None:
            return self
        # websockets checks wss:// with the system's CAs unless given a context; ws:// takes none.
        tls: dict[str, Any] = {} if self._tls is None else {"ssl": self._tls}
        try:
            self._ws = await ws_connect(
                self._ws_url,
                additional_headers={"Authorization": bearer(self._token)},
                proxy=None if self._loopback else True,
                **tls,
                open_timeout=self._connect_timeout,
                max_size=self._max_message_size,
            )
        except InvalidStatus as error:
            hint = " (the token is not this server's)" if error.response.status_code == 403 else ""
            raise ConnectionError(f"Failed to connect to {self._ws_url}: {error}{hint}") from error
        except Exception as error:
            raise ConnectionError(f"Failed to connect to {self._ws_url}: {error}") from error
        return self

    async def disconnect(self) -> None:
        """Ask the server to end the session and wait for it to close the socket: OpenEnv's server closes
        it itself after releasing the session and fails (a logged traceback) when the client closed first."""
        ws = self._ws
        if ws is None:
            return
        with suppress(Exception):
            await ws.send(json.dumps({"type": "close"}))
            await asyncio.wait_for(ws.wait_closed(), timeout=self._message_timeout)
        with suppress(Exception):
            await ws.close()
        self._ws = None

    def _step_payload(self, action: ChatAction) -> dict[str, Any]:
        return action.model_dump()

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[ChatObservation]:
        observation = ChatObservation.model_validate(
            {
                **payload.get("observation", {}),
                "reward": payload.get("reward"),
                "done": payload.get("done", False),
            }
        )
        return StepResult(
            observation=observation, reward=payload.get("reward"), done=bool(payload.get("done"))
        )

    def _parse_state(self, payload: dict[str, Any]) -> TolokaforgeState:
        return TolokaforgeState.model_validate(payload)
