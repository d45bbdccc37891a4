"""A trial's door to the DB service: it answers the DB service's HTTP API for that one trial.

MCP servers keep their tables in the DB service, yet none of them may hold its token (the admin
credential of every trial) or reach another trial. So a server is given a door of its own trial's:

* sandboxed, a unix socket bound into that trial's sandboxes alone, reached through the relay the
  launcher starts in its sandbox (process/relay.py): the socket a request came in on says whose it is,
  and where the trial has a cgroup, the connecting process must be in it (its peer credentials), so a
  process outside the sandbox that shares the sandbox's uid cannot use the socket either;
* unsandboxed (``--isolation process``), a capability URL on one loopback port,
  ``http://127.0.0.1:<port>/trial-key/<key>``, where ``<key>`` is a secret made for that trial.

A request is forwarded only when it is a data operation on that trial (read its state or hashes,
patch it, snapshot, restore, reset: never ``init``, the trial's deletion or a lease, which are its
runner's alone), with no ``.``/``..`` segment and no encoded slash or dot, carrying the service's
token, which the gateway adds; anything else answers 403 with the contract's Error body. A door has
at most :data:`IN_FLIGHT` requests in flight (the rest wait), so a server cannot make the runner
buffer more than that many bodies at once; a request whose door closed while its body arrived is
refused, not forwarded into a new trial of the same id. One aiohttp server serves every door.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import struct
import tempfile
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from aiohttp import web

from tolokaforge.core.credentials import bearer, new_token, token_matches

from ..process.cgroups import TrialCgroup
from .endpoint import StateDoor

__all__ = ["KEY_PREFIX", "MAX_BODY_BYTES", "StateGateway"]

MAX_BODY_BYTES = 32 << 20
"""As the DB service's own request limit."""

KEY_PREFIX = "/trial-key/"

IN_FLIGHT = 2
"""Requests one door forwards at once."""

_DATA_OPERATIONS: dict[tuple[str, ...], frozenset[str]] = {
    ("state",): frozenset({"GET", "PATCH"}),
    ("state", "stable"): frozenset({"GET"}),
    ("state", "hash"): frozenset({"GET"}),
    ("state", "*"): frozenset({"PATCH"}),
    ("snapshots", "*"): frozenset({"POST", "DELETE"}),
    ("snapshots", "*", "restore"): frozenset({"POST"}),
    ("reset",): frozenset({"POST"}),
}
"""What a trial's own code may do to its trial, by path below ``/trials/<id>`` (``*``: a name)."""

_HOP_HEADERS = {
    "host",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "upgrade",
    "authorization",  # whatever a server sends, the service sees the gateway's credential alone
}


@dataclass
class _Door:
    trial_id: str
    site: web.UnixSite | None = None
    path: Path | None = None
    key: str | None = None
    cgroup: TrialCgroup | None = None
    """The trial's cgroup: a socket's peer must be one of its processes."""
    in_flight: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(IN_FLIGHT))


class StateGateway:
    """Every trial's door, served by one aiohttp server that forwards to the DB service."""

    def __init__(
        self, state_door: Callable[[], Awaitable[StateDoor]], *, own: Callable[[Path], None]
    ) -> None:
        self._state_door = state_door
        self._own = own
        self._runner: web.AppRunner | None = None
        self._tcp: tuple[web.TCPSite, int] | None = None
        self._session: aiohttp.ClientSession | None = None
        self._doors: dict[str, _Door] = {}
        self._by_socket: dict[str, str] = {}
        """Socket path -> trial id."""
        self._keys: list[tuple[str, str]] = []
        """(key, trial id) of every capability URL handed out."""
        self._lock = asyncio.Lock()

    async def open(self, trial_id: str, cgroup: TrialCgroup | None = None) -> Path:
        """The socket that serves ``trial_id`` (made on first need): its directory is bound into the
        sandbox; with ``cgroup``, only the trial's own processes may use it."""
        async with self._lock:
            door = self._doors.setdefault(trial_id, _Door(trial_id))
            door.cgroup = door.cgroup or cgroup
            if door.path is not None:
                return door.path
            runner = await self._server()
            directory = Path(tempfile.mkdtemp(prefix="tf-state-"))  # short: a socket path has 107 bytes
            path = directory / "state.sock"
            site = web.UnixSite(runner, str(path))
            await site.start()
            self._own(directory)
            path.chmod(0o666)  # the sandbox's uid connects; only the trial's sandbox sees the directory
            door.site, door.path = site, path
            self._by_socket[str(path)] = trial_id
            return path

    async def url(self, trial_id: str) -> str:
        """A capability URL that serves ``trial_id`` alone, for a server outside the sandbox."""
        async with self._lock:
            door = self._doors.setdefault(trial_id, _Door(trial_id))
            if door.key is None:
                door.key = new_token()
                self._keys.append((door.key, trial_id))
            port = await self._tcp_port()
            return f"http://127.0.0.1:{port}{KEY_PREFIX}{door.key}"

    async def close(self, trial_id: str) -> None:
        """Stop serving ``trial_id`` (its cleanup): its socket and its key stop working."""
        async with self._lock:
            door = self._doors.pop(trial_id, None)
            if door is None:
                return
            if door.key is not None:
                self._keys = [(key, owner) for key, owner in self._keys if owner != trial_id]
            if door.site is not None and door.path is not None:
                self._by_socket.pop(str(door.path), None)
                await door.site.stop()
                shutil.rmtree(door.path.parent, ignore_errors=True)

    async def aclose(self) -> None:
        for trial_id in list(self._doors):
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

    async def _tcp_port(self) -> int:
        if self._tcp is None:
            site = web.TCPSite(await self._server(), "127.0.0.1", 0)
            await site.start()
            server = site._server  # pyright: ignore[reportPrivateUsage] -- aiohttp keeps the bound port here
            assert isinstance(server, asyncio.Server)
            self._tcp = (site, server.sockets[0].getsockname()[1])
        return self._tcp[1]

    def _trial_of(self, request: web.Request) -> tuple[str, str] | None:
        """(trial id, the path to forward) of a request, by the socket it came on or the key it carries."""
        transport = request.transport
        socket_path = transport.get_extra_info("sockname") if transport is not None else None
        if isinstance(socket_path, str) and socket_path:
            trial_id = self._by_socket.get(socket_path)
            door = None if trial_id is None else self._doors.get(trial_id)
            if trial_id is None or door is None or not _peer_in(transport, door.cgroup):
                return None
            return trial_id, request.raw_path
        if not request.raw_path.startswith(KEY_PREFIX):
            return None
        key, slash, rest = request.raw_path[len(KEY_PREFIX) :].partition("/")
        matched = None
        for known, trial_id in self._keys:  # every key compared, in constant time each
            if token_matches(key, known):
                matched = trial_id
        return None if matched is None or not slash else (matched, "/" + rest)

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        found = self._trial_of(request)
        if found is None:
            return _refuse(403, "this door serves no trial")
        trial_id, path = found
        if not allowed(request.method, path, trial_id):
            return _refuse(403, f"this door serves data operations on trial {trial_id!r} alone")
        door = self._doors.get(trial_id)
        if door is None:
            return _refuse(403, "this door serves no trial")
        async with door.in_flight:
            body = await request.read()
            if self._doors.get(trial_id) is not door:  # closed while the body arrived: not a new trial's
                return _refuse(403, "this door closed")
            state = await self._state_door()
            session = self._client_session(state)
            headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
            if state.token is not None:
                headers["Authorization"] = bearer(state.token)
            try:
                async with session.request(
                    request.method, state.url.rstrip("/") + path, headers=headers, data=body or None
                ) as answer:
                    content = await answer.read()
                    kept = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP_HEADERS}
                    return web.Response(status=answer.status, body=content, headers=kept)
            except aiohttp.ClientError as error:
                return _refuse(502, f"the DB service could not be reached: {error}")

    def _client_session(self, door: StateDoor) -> aiohttp.ClientSession:
        if self._session is None:
            connector = (
                aiohttp.UnixConnector(path=str(door.socket))
                if door.socket is not None
                else aiohttp.TCPConnector(ssl=door.tls or True)
            )
            self._session = aiohttp.ClientSession(auto_decompress=False, connector=connector)
        return self._session


def _peer_in(transport: asyncio.BaseTransport | None, cgroup: TrialCgroup | None) -> bool:
    """Whether the process at the other end of a unix connection is in ``cgroup`` (None: no check)."""
    if cgroup is None:
        return True
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None:
        return False
    pid, _uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    return pid > 0 and cgroup.holds(pid)


def allowed(method: str, raw_path: str, trial_id: str) -> bool:
    """Whether ``method raw_path`` (as sent, still percent-encoded, with its query) is a data operation
    on ``trial_id``: ``/trials/<id>/...`` as :data:`_DATA_OPERATIONS` lists, with no segment a server
    could resolve to somewhere else."""
    parts = raw_path.split("?", 1)[0].split("/")
    if len(parts) < 4 or parts[0] != "" or parts[1] != "trials":
        return False
    if urllib.parse.unquote(parts[2]) != trial_id:
        return False
    rest = parts[3:]
    for segment in rest:
        lowered = segment.lower()
        if (
            segment in ("", ".", "..")
            or "\\" in segment
            or any(code in lowered for code in ("%2f", "%2e", "%5c"))
        ):
            return False
    methods = _DATA_OPERATIONS.get(tuple(rest))
    if methods is None and len(rest) >= 2:  # a table or snapshot name in the second place
        methods = _DATA_OPERATIONS.get((rest[0], "*", *rest[2:]))
    return methods is not None and method in methods


def _refuse(status: int, message: str) -> web.Response:
    code = {403: "forbidden"}.get(status, "unavailable")
    return web.json_response({"error": code, "message": message, "details": {}}, status=status)
