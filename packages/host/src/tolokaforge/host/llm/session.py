"""The HTTP session every LLM client of a run shares (agent, simulated user): one connection pool.

aiohttp's default pool holds at most 100 connections in all; past that, requests queue inside the
client, so a run at concurrency 128 or 256 against a slow model kept a fifth to three fifths of its
trials waiting for a connection rather than for the model. A trial has at most one model request in
flight at a time (its agent and its user take turns), so a pool of ``concurrency`` connections is
never the bottleneck.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator

import aiohttp

__all__ = ["llm_session"]

_AIOHTTP_DEFAULT_LIMIT = 100


@contextlib.asynccontextmanager
async def llm_session(concurrency: int) -> AsyncGenerator[aiohttp.ClientSession]:
    """A session whose pool admits one request per trial in flight (and never fewer than aiohttp's 100)."""
    connector = aiohttp.TCPConnector(limit=max(concurrency, _AIOHTTP_DEFAULT_LIMIT))
    async with aiohttp.ClientSession(connector=connector) as session:
        yield session
