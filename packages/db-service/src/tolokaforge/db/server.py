"""Serving an app with uvicorn inside a running event loop, on a loopback port the OS picks.

For tests (ours and the runner's) and benchmarks: ``async with serve_app(app) as base_url: ...`` starts
uvicorn as a task in the current loop (lifespan included), yields ``http://127.0.0.1:<port>`` once it
accepts connections, and shuts it down gracefully on exit.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator

import uvicorn
from starlette.types import ASGIApp

from tolokaforge.db.app import create_app
from tolokaforge.db.settings import Settings
from tolokaforge.db.store import Store

__all__ = ["serve_app", "serve_settings"]


@contextlib.asynccontextmanager
async def serve_app(
    app: ASGIApp, *, host: str = "127.0.0.1", port: int = 0, uds: str | None = None
) -> AsyncGenerator[str, None]:
    """Run ``app`` on ``host`` (or the unix socket ``uds``); yield its base URL (``http://unix`` for a
    socket). ``port=0`` takes an ephemeral port."""
    config = uvicorn.Config(
        app, host=host, port=port, uds=uds, log_level="warning", access_log=False, lifespan="on"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()  # startup failed: raise its error here
                raise RuntimeError("uvicorn stopped before it started")
            await asyncio.sleep(0.005)
        if uds is not None:
            yield "http://unix"
        else:
            sockets = [sock for listener in server.servers for sock in listener.sockets]
            bound_port = sockets[0].getsockname()[1]
            yield f"http://{host}:{bound_port}"
    finally:
        server.should_exit = True
        await task


@contextlib.asynccontextmanager
async def serve_settings(settings: Settings, *, store: Store | None = None) -> AsyncGenerator[str, None]:
    """The DB service app for ``settings`` (or on ``store``), served as :func:`serve_app` does; requests
    must present ``settings.token`` (set it: a fresh one would be known to nobody)."""
    async with serve_app(create_app(settings, store=store), host=settings.host, port=settings.port) as url:
        yield url
