"""The session's machinery: a background event loop, the runner connection, the inspected packs.

pytest runs items synchronously, and an author's own tests may run their own event loop
(pytest-asyncio). So everything that talks to the runner runs on one event loop in a background
thread for the whole session; :meth:`ToloSession.run` submits a coroutine there and waits. The runner
(an embedded one serving on a loopback port, started here with ``start_runner``, or
the external one given by ``--tolokaforge-runner``) is opened lazily by the first item that needs it
and closed when the session ends; a runner that cannot be reached, or whose token cannot be found,
fails every item that needs it with the same one-line reason, once. Trials are driven through the Runner
interface: the embedded runner called directly, or the external one through the gRPC client adapter;
the wire-contract checks use the raw generated stub, over gRPC either way. The adapter and the raw stub
present the runner's token: the embedded runner's own, or the external runner's from
``--tolokaforge-runner-token-file`` (else the file a runner on this machine wrote for its port). Tool
providers under test (``--tolokaforge-provider``) are started on first use, once each, and stopped by
``close``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
from grpclib.client import Channel

from tolokaforge.contracts.runner import RunnerServiceStub
from tolokaforge.core.credentials import CredentialError, authorize_channel, client_token
from tolokaforge.core.runner_api import Runner, RunnerError
from tolokaforge.host import GrpcRunner, HostError, PackReport, inspect_pack, parse_address

from .errors import CheckFailure
from .options import Settings
from .provider import ProviderUnderTest

__all__ = [
    "SESSION_KEY",
    "RunnerConnection",
    "ToloSession",
    "session_of",
]

_T = TypeVar("_T")

_TRANSPORT_BUDGET_S = 10.0
"""A contract test wants a quick verdict on an unreachable runner, not the host's 30 s patience."""


class _SetupError(Exception):
    """The runner cannot be used at all (no token, no sandbox): one line, every item that needs it."""


@dataclass
class RunnerConnection:
    """The runner under test: the Runner interface trials are driven through, and the raw generated stub."""

    address: str
    embedded: bool
    client: Runner
    stub: RunnerServiceStub


class _LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="tolokaforge-loop", daemon=True)
        self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, _T]) -> Future[_T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)
        self.loop.close()


@dataclass
class ToloSession:
    """One per pytest session (stored on the config's stash) once a pack option is given."""

    settings: Settings
    reports: list[PackReport] = field(default_factory=list[PackReport])
    _loop: _LoopThread | None = None
    _stack: contextlib.AsyncExitStack | None = None
    _connection: RunnerConnection | None = None
    _connect_error: str | None = None
    _lock: asyncio.Lock | None = None
    _trial_numbers: itertools.count[int] = field(default_factory=lambda: itertools.count())
    _providers: dict[tuple[str, ...], ProviderUnderTest] = field(
        default_factory=dict[tuple[str, ...], ProviderUnderTest]
    )
    caches: dict[str, Any] = field(default_factory=dict[str, Any])
    """Per-session memo of the checks (golden replays, registered tool lists), keyed by the check."""

    def load_packs(self) -> list[PackReport]:
        """Inspect every pack once. Golden names are left to the ``resolve`` check (against the runner)."""
        if not self.reports:
            self.reports = [inspect_pack(path, check_golden_names=False) for path in self.settings.packs]
        return self.reports

    def next_trial_index(self) -> int:
        """A session-unique trial index, so no two trials of a task share an id on the runner."""
        return next(self._trial_numbers)

    def run(self, coro: Coroutine[Any, Any, _T], *, timeout: float | None = None) -> _T:
        """Run ``coro`` on the session's loop and return its result (from any thread but that loop's)."""
        if self._loop is None:
            self._loop = _LoopThread()
        return self._loop.submit(coro).result(timeout)

    async def arun(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """:meth:`run` for a caller inside another event loop (an async test)."""
        if self._loop is None:
            self._loop = _LoopThread()
        return await asyncio.wrap_future(self._loop.submit(coro))

    async def connection(self) -> RunnerConnection:
        """The runner connection, opened on first use (on the session loop)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._connect_error is not None:
                raise CheckFailure(self._connect_error)
            if self._connection is None:
                try:
                    self._connection = await self._open()
                except (HostError, RunnerError, OSError, _SetupError) as error:
                    where = self.settings.runner or "the embedded runner"
                    self._connect_error = f"cannot use the runner ({where}): {error}"
                    raise CheckFailure(self._connect_error) from error
            return self._connection

    async def _open(self) -> RunnerConnection:
        stack = contextlib.AsyncExitStack()
        self._stack = stack
        if self.settings.runner is None:
            client, channel = await self._embedded(stack)
        else:
            client, channel = self._external(stack, self.settings.runner)
        stub = RunnerServiceStub(channel)
        await client.health()  # fail here, once, when the runner is not there
        return RunnerConnection(client.address, self.settings.runner is None, client, stub)

    async def _embedded(self, stack: contextlib.AsyncExitStack) -> tuple[Runner, Channel]:
        """An embedded runner serving on a loopback port, closed with ``stack``: the runner itself, called
        directly, and a channel with its token for the raw stub (the wire-contract checks)."""
        from tolokaforge.runner import SandboxUnavailable, start_runner

        try:
            handle = await start_runner()
        except SandboxUnavailable as error:  # the machine lacks a layer: a setup error, said in one line
            raise _SetupError(str(error)) from error
        stack.push_async_callback(handle.close)
        channel = handle.channel()
        stack.callback(channel.close)
        return handle.runner, channel

    def _external(self, stack: contextlib.AsyncExitStack, address: str) -> tuple[GrpcRunner, Channel]:
        """The host's client of the runner at ``address`` and the raw stub's channel, closed with
        ``stack``, both presenting its token."""
        host, port = parse_address(address)
        try:
            token = client_token(
                "runner", host, port, self.settings.runner_token_file, flag="--tolokaforge-runner-token-file"
            )
        except CredentialError as error:
            raise _SetupError(str(error)) from error
        client = GrpcRunner.connect(host, port, transport_budget_s=_TRANSPORT_BUDGET_S, token=token)
        stack.push_async_callback(client.aclose)
        channel = Channel(host, port)
        authorize_channel(channel, token)
        stack.callback(channel.close)
        return client, channel

    def provider(self, argv: tuple[str, ...]) -> ProviderUnderTest:
        """The provider started from ``argv`` (once per session; stopped by :meth:`close`)."""
        provider = self._providers.get(argv)
        if provider is None:
            provider = self._providers[argv] = ProviderUnderTest(argv)
            self.run(provider.start(), timeout=120)
        return provider

    def close(self) -> None:
        """Close the runner (and the embedded one), stop the providers and the loop; safe to call twice."""
        if self._loop is None:
            return
        loop = self._loop
        try:
            if self._stack is not None:
                stack, self._stack = self._stack, None
                loop.submit(stack.aclose()).result(60)
        finally:
            providers, self._providers = list(self._providers.values()), {}
            for provider in providers:
                loop.submit(provider.stop()).result(60)
        self._loop.stop()
        self._loop = None
        self._connection = None


SESSION_KEY = pytest.StashKey[ToloSession]()
"""Where pytest_configure keeps the one ToloSession of a run (absent when no pack or provider is given)."""


def session_of(config: pytest.Config) -> ToloSession:
    """The run's ToloSession; a clear failure when the plugin is not active."""
    state = config.stash.get(SESSION_KEY, None)
    if state is None:
        pytest.fail(
            "the tolokaforge fixtures need a pack: pass --tolokaforge-pack PATH (or ini tolokaforge_packs)"
        )
    return state
