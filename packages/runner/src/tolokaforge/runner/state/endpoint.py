"""Where the runner's state gateway finds the DB service: the real one, or the runner's own store.

With a remote DB service that is its URL and the token the runner was given for it. In the embedded
memory mode there is no HTTP service, so the first trial that needs one (an MCP server's) starts the
DB app on the runner's own store, on a unix socket in a private directory and under a token of its
own; it lives until the runner closes (the store stays the runner's: serving it never closes it).
Either way the door is the runner's alone: trial code reaches it only through the gateway
(state_gateway.py), which opens one trial.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tolokaforge.core.credentials import new_token
from tolokaforge.db import LocalStateClient, StateClient

__all__ = ["StateDoor", "StateEndpoint"]


@dataclass(frozen=True)
class StateDoor:
    """How to reach the DB service: its base URL (over ``socket`` when set) and its admin token."""

    url: str
    token: str | None
    socket: Path | None = None
    tls: ssl.SSLContext | None = None
    """For an ``https`` service whose CA is not the system's."""


class StateEndpoint:
    def __init__(
        self, client: StateClient, db_url: str | None, db_token: str | None, tls: ssl.SSLContext | None = None
    ) -> None:
        self._client = client
        self._door = None if db_url is None else StateDoor(db_url, db_token, tls=tls)
        self._stack: contextlib.AsyncExitStack | None = None
        self._lock = asyncio.Lock()

    async def door(self) -> StateDoor:
        async with self._lock:
            if self._door is None:
                self._door = await self._serve_local()
            return self._door

    async def _serve_local(self) -> StateDoor:
        if not isinstance(self._client, LocalStateClient):
            raise RuntimeError("no DB service URL is configured and the store is not in this process")
        stack = contextlib.AsyncExitStack()
        directory = Path(tempfile.mkdtemp(prefix="tf-db-"))  # 0700: the runner's user alone
        stack.callback(shutil.rmtree, directory, ignore_errors=True)
        socket = directory / "db.sock"
        token = new_token()
        try:
            url = await stack.enter_async_context(self._client.serve_http(token=token, uds=socket))
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return StateDoor(url, token, socket)

    async def aclose(self) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()
