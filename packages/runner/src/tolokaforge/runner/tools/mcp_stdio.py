"""An MCP server's stdio transport, with the server a child of the runner's supervisor.

The SDK's own stdio client starts the server itself and stops it by closing its stdin and waiting two
seconds before any signal: a call that overstayed its budget would answer seconds late, and a
descendant that left the server's process group would outlive the trial. Here the server is a
:class:`Supervised` child (its own session; killed at once as a group, with every descendant), and two
tasks bridge its pipes to the streams the SDK's session reads and writes.

The transport also knows whether the last request reached the server at all: when the server is gone
and that request could not be written, or its bytes are still unread in the server's stdin pipe, the
server never read it -- the call never ran (:meth:`StdioServer.undelivered`).

A reply line that is not valid JSON-RPC (invalid UTF-8, a lone surrogate escape, broken JSON) is
answered, for the request it names, with a JSON-RPC error of code :data:`UNREADABLE_REPLY`; the SDK
would otherwise drop it and leave the call waiting for its budget.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import struct
import termios
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import anyio
import mcp_types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from ..process.confinement import Launch
from ..process.supervisor import Supervised

__all__ = ["MAX_LINE_BYTES", "UNREADABLE_REPLY", "StdioServer"]

MAX_LINE_BYTES = 256 << 20
"""The longest message a server may send (as for a worker's reply)."""

UNREADABLE_REPLY = mcp_types.PARSE_ERROR
"""The code of the error synthesized for a reply the runner could not read."""

_FIONREAD = struct.Struct("i")


class StdioServer:
    """One running MCP server process and the two pipe tasks that serve its session."""

    def __init__(self, child: Supervised) -> None:
        self.child = child
        stdin = cast(asyncio.StreamWriter, child.process.stdin)
        self._stdin = stdin
        self._stdout = cast(asyncio.StreamReader, child.process.stdout)
        # A private duplicate of our end of the server's stdin: asyncio closes its own as soon as the
        # server exits, and the pipe's unread byte count is what tells a request that never arrived.
        pipe: Any = stdin.transport.get_extra_info("pipe")
        self._probe_fd = os.dup(pipe.fileno())
        self._last_written = 0
        self._write_failed = False
        self.eof = False
        """The server closed its stdout (it exited, or will not answer again)."""
        self._to_session: MemoryObjectSendStream[SessionMessage | Exception]
        self.read_stream: MemoryObjectReceiveStream[SessionMessage | Exception]
        self._to_session, self.read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        self.write_stream: MemoryObjectSendStream[SessionMessage]
        self._from_session: MemoryObjectReceiveStream[SessionMessage]
        self.write_stream, self._from_session = anyio.create_memory_object_stream[SessionMessage](0)

    @classmethod
    async def spawn(cls, launch: Launch, *, cwd: Path, env: Mapping[str, str], log_path: Path) -> StdioServer:
        with log_path.open("ab") as log:
            child = await Supervised.spawn_launch(
                launch,
                cwd=cwd,
                env=env,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
            )
        return cls(child)

    @property
    def pid(self) -> int:
        return self.child.pid

    @property
    def alive(self) -> bool:
        return not self.eof and not self._write_failed and not self.child.exited

    def begin_call(self) -> None:
        """A call's request is about to be sent: until it is written, nothing of it reached the server."""
        self._last_written = -1

    def undelivered(self) -> bool:
        """Whether the last request never reached the server (call only once the server is gone)."""
        if self._write_failed or self._last_written < 0:
            # Refused by the pipe, or never written: the connection closed before the request left
            # the session (the server's exit was seen first).
            return True
        if self._last_written == 0:
            return False
        try:
            unread = _FIONREAD.unpack(fcntl.ioctl(self._probe_fd, termios.FIONREAD, bytes(_FIONREAD.size)))[0]
        except OSError:
            return False
        return unread >= self._last_written

    async def read_loop(self) -> None:
        """Server stdout -> session, one JSON-RPC message per line."""
        buffer = b""
        try:
            async with self._to_session:
                try:
                    while True:
                        chunk = await self._stdout.read(1 << 16)
                        if not chunk:
                            return
                        lines = (buffer + chunk).split(b"\n")
                        buffer = lines.pop()
                        if len(buffer) > MAX_LINE_BYTES:
                            self.kill()  # a reply no one can hold: the call ends as a crash
                            return
                        for line in lines:
                            if line.strip():
                                await self._to_session.send(_parse(line))
                finally:
                    # Before the session learns the connection closed, so a caller sees it dead.
                    self.eof = True
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
            pass

    async def write_loop(self) -> None:
        """Session -> server stdin; a write the server's side refused marks the request undelivered."""
        try:
            async with self._from_session:
                async for message in self._from_session:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
                    self._last_written = len(data)
                    if self._stdin.is_closing():
                        self._write_failed = True
                        break
                    self._stdin.write(data)
                    if self._stdin.is_closing():
                        # The write itself found the server's end gone (EPIPE, which asyncio's pipe
                        # transport takes in silence, closing): nothing of the request arrived. Seen
                        # when the server exits between the loop's last poll and this write.
                        self._write_failed = True
                        break
                    await self._stdin.drain()
        except (ConnectionError, OSError, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._write_failed = True
        if self._write_failed:
            # The session must see the connection end instead of waiting for an answer.
            await self._to_session.aclose()

    def kill(self) -> None:
        """SIGKILL the server's process group and every descendant (synchronous, idempotent)."""
        self.child.kill()

    async def close(self) -> None:
        """Kill, reap and release the server's descriptors, without waiting on anyone else's."""
        self.child.kill()
        await self.child.reap_exit()
        # Our pipe ends go now: an escaped daemon may hold the server's ends open for its whole life.
        # asyncio offers no public way to close a subprocess's pipes but its transport.
        transport: Any = getattr(self.child.process, "_transport", None)
        if transport is not None:
            transport.close()
        if self._probe_fd >= 0:
            os.close(self._probe_fd)
            self._probe_fd = -1


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as error:
        ident = _request_id(line)
        if ident is None:
            return error  # not an answer to anything: the session logs and drops it
        reply = mcp_types.JSONRPCError(
            jsonrpc="2.0",
            id=ident,
            error=mcp_types.ErrorData(
                code=UNREADABLE_REPLY, message=f"the server's reply could not be read: {_first_line(error)}"
            ),
        )
        return SessionMessage(reply)


def _request_id(line: bytes) -> int | str | None:
    """The id of a response the strict parser refused (lone surrogates, invalid UTF-8), if it has one."""
    try:
        message: Any = json.loads(line.decode("utf-8", errors="replace"))
    except ValueError:
        return None
    if not isinstance(message, dict) or "method" in message:
        return None
    ident = cast(dict[str, Any], message).get("id")
    return ident if isinstance(ident, int | str) and not isinstance(ident, bool) else None


def _first_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return " ".join(text[:2]) if text else type(error).__name__
