"""A trial's door to the DB service: a unix socket that answers the DB service's HTTP API for one trial.

A sandboxed MCP server has no network; it reaches its tables through the relay the launcher starts in
its sandbox (process/relay.py), which leads here. Each trial that has such a server gets a socket of
its own, and a request is forwarded to the DB service only when its path is that trial's
(``/trials/<the trial's id>`` and below, no ``.``/``..`` segment, no encoded slash or dot); any
other answers 403, so the URL in a server's environment opens its own trial and no other. The socket
lives in a private directory bound into that trial's sandboxes alone.

One aiohttp server per runner serves every trial's socket; the socket a request came in on says whose it is.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import urllib.parse
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
from aiohttp import web

__all__ = ["MAX_BODY_BYTES", "StateGateway"]

MAX_BODY_BYTES = 64 << 20
"""As the DB service's own request limit."""

_HOP_HEADERS = {"host", "connection", "keep-alive", "transfer-encoding", "content-length", "upgrade"}


class StateGateway:
    """Every trial's socket, served by one aiohttp server that forwards to the DB service."""

    def __init__(self, db_url: Callable[[], Awaitable[str]], *, own: Callable[[Path], None]) -> None:
        self._db_url = db_url
        self._own = own
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._sites: dict[str, tuple[web.UnixSite, Path]] = {}
        self._trials: dict[str, str] = {}
        """Socket path -> trial id."""
        self._lock = asyncio.Lock()

    async def open(self, trial_id: str) -> Path:
        """The socket that serves ``trial_id`` (made on first need): its directory is bound into the sandbox."""
        async with self._lock:
            known = self._sites.get(trial_id)
            if known is not None:
                return known[1]
            runner = await self._server()
            directory = Path(tempfile.mkdtemp(prefix="tf-state-"))  # short: a socket path has 107 bytes
            path = directory / "state.sock"
            site = web.UnixSite(runner, str(path))
            await site.start()
            self._own(directory)
            path.chmod(0o666)  # the sandbox's uid connects; only the trial's sandbox sees the directory
            self._sites[trial_id] = (site, path)
            self._trials[str(path)] = trial_id
            return path

    async def close(self, trial_id: str) -> None:
        """Stop serving ``trial_id`` (its cleanup)."""
        async with self._lock:
            known = self._sites.pop(trial_id, None)
            if known is None:
                return
            site, path = known
            self._trials.pop(str(path), None)
            await site.stop()
            shutil.rmtree(path.parent, ignore_errors=True)

    async def aclose(self) -> None:
        for trial_id in list(self._sites):
            await self.close(trial_id)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _server(self) -> web.AppRunner:
        if self._runner is None:
            app = web.Application(client_max_size=MAX_BODY_BYTES)
            app.router.add_route("*", "/{tail:.*}", self._forward)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            self._runner = runner
        return self._runner

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        transport = request.transport
        socket_path = transport.get_extra_info("sockname") if transport is not None else None
        trial_id = self._trials.get(str(socket_path))
        if trial_id is None:
            return _refuse(403, "this socket serves no trial")
        if not allowed(request.raw_path, trial_id):
            return _refuse(403, f"this endpoint serves trial {trial_id!r} alone")
        if self._session is None:
            self._session = aiohttp.ClientSession(auto_decompress=False)
        base = (await self._db_url()).rstrip("/")
        headers = {name: value for name, value in request.headers.items() if name.lower() not in _HOP_HEADERS}
        body = await request.read()
        try:
            async with self._session.request(
                request.method, base + request.raw_path, headers=headers, data=body or None
            ) as answer:
                content = await answer.read()
                kept = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP_HEADERS}
                return web.Response(status=answer.status, body=content, headers=kept)
        except aiohttp.ClientError as error:
            return _refuse(502, f"the DB service could not be reached: {error}")


def allowed(raw_path: str, trial_id: str) -> bool:
    """Whether ``raw_path`` (as sent, still percent-encoded, with its query) is ``trial_id``'s own:
    ``/trials/<id>`` or below it, with no segment a server could resolve to somewhere else."""
    parts = raw_path.split("?", 1)[0].split("/")
    if len(parts) < 3 or parts[0] != "" or parts[1] != "trials":
        return False
    if urllib.parse.unquote(parts[2]) != trial_id:
        return False
    for segment in parts[3:]:
        lowered = segment.lower()
        if (
            segment in (".", "..")
            or "\\" in segment
            or any(code in lowered for code in ("%2f", "%2e", "%5c"))
        ):
            return False
    return True


def _refuse(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)
