"""Entry point: serve the exec provider on a loopback port and announce it with the handshake line."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys

from grpclib.server import Server

from .service import ExecProvider

__all__ = ["PROTOCOL_VERSION", "main", "serve"]

PROTOCOL_VERSION = 1
"""The ToolProviderService protocol version this provider speaks."""


async def serve() -> None:
    server = Server([ExecProvider(PROTOCOL_VERSION)])
    # Bind first: grpclib does not report an ephemeral port back, and the handshake must name it.
    # IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that say they are TCP (else ~40 ms a call).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port: int = sock.getsockname()[1]
    await server.start(sock=sock)
    sys.stdout.write(f"TOLOKAFORGE_TOOL_PROVIDER|{PROTOCOL_VERSION}|tcp|127.0.0.1:{port}\n")
    sys.stdout.flush()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()
    await server.wait_closed()


def main() -> None:
    asyncio.run(serve())


if __name__ == "__main__":
    main()
