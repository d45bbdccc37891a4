"""A TCP proxy on 127.0.0.1 that can lose the reply to one HTTP request (for fault tests).

``drop_reply_to(b"PATCH")`` arms it: the next request starting with that method is forwarded, the
upstream's answer is awaited (so the request was processed) and then thrown away, and the client's
connection is cut. Everything else passes through unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib


class DroppingProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._armed: bytes | None = None
        self.dropped = 0
        self._server: asyncio.Server | None = None
        self.port = 0

    def drop_reply_to(self, method: bytes) -> None:
        self._armed = method

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{self.port}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        drop = asyncio.Event()

        async def client_to_upstream() -> None:
            while chunk := await reader.read(65536):
                if self._armed is not None and chunk.startswith(self._armed + b" "):
                    self._armed = None
                    drop.set()
                up_writer.write(chunk)
                await up_writer.drain()
            up_writer.close()

        async def upstream_to_client() -> None:
            while chunk := await up_reader.read(65536):
                if drop.is_set():
                    self.dropped += 1
                    writer.transport.abort()  # the request was applied; its answer never arrives
                    up_writer.close()
                    return
                writer.write(chunk)
                await writer.drain()
            writer.close()

        tasks = [asyncio.ensure_future(client_to_upstream()), asyncio.ensure_future(upstream_to_client())]
        with contextlib.suppress(ConnectionError, OSError):
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            task.cancel()
        writer.transport.abort()
        up_writer.transport.abort()
