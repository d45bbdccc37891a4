"""The DB service URL MCP servers are given: the real service, or the runner's own store served on demand.

With a remote DB service the URL is the one the runner uses. In the embedded memory mode there is no
HTTP service, so the first trial that needs one starts the DB app on the runner's own store on an
ephemeral loopback port; it lives until the runner closes (the store stays the runner's: serving it
never closes it).
"""

from __future__ import annotations

import asyncio
import contextlib

from tolokaforge.db import LocalStateClient, StateClient

__all__ = ["StateEndpoint"]


class StateEndpoint:
    def __init__(self, client: StateClient, db_url: str | None) -> None:
        self._client = client
        self._url = db_url
        self._stack: contextlib.AsyncExitStack | None = None
        self._lock = asyncio.Lock()

    async def url(self) -> str:
        async with self._lock:
            if self._url is None:
                self._url = await self._serve_local()
            return self._url

    async def _serve_local(self) -> str:
        if not isinstance(self._client, LocalStateClient):
            raise RuntimeError("no DB service URL is configured and the store is not in this process")
        stack = contextlib.AsyncExitStack()
        url = await stack.enter_async_context(self._client.serve_http())
        self._stack = stack
        return url

    async def aclose(self) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()
