"""Inside a sandbox without network: a loopback port that leads to one unix socket outside, and nowhere else.

An MCP server reaches its trial's tables over HTTP at ``TOLOKAFORGE_DB_URL``. Sandboxed, it has a
network namespace of its own with only loopback up, so the launcher starts this relay before it execs
the server: it listens on ``127.0.0.1:PORT`` in the sandbox and copies each connection to the unix
socket the runner bound into the sandbox -- the runner's trial-scoped gateway (state_gateway.py), which
answers for that trial alone. Whatever the server does to the relay (it runs with the server's uid)
gains it nothing the gateway would not give it anyway.

Standard library only: it runs in the launcher, before any pack code.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading

__all__ = ["listen", "start_relay"]

_CHUNK = 1 << 16


def listen(port: int) -> socket.socket:
    """The relay's listening socket on 127.0.0.1:``port``: bound before Landlock refuses TCP binds."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    return listener


def start_relay(listener: socket.socket, target: str) -> int:
    """Fork a process that relays each connection ``listener`` accepts to the unix socket ``target``.

    The socket listens already, so the server started next can connect at once. Returns the relay's pid.
    """
    pid = os.fork()
    if pid:
        listener.close()
        return pid
    try:
        # Hold nothing of the server's: its stdin and stdout are the MCP pipes the runner watches.
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1):
            os.dup2(devnull, fd)
        os.closerange(3, listener.fileno())
        os.closerange(listener.fileno() + 1, 1 << 16)
        _serve(listener, target)
    finally:
        os._exit(0)


def _serve(listener: socket.socket, target: str) -> None:
    while True:
        client, _ = listener.accept()
        try:
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(target)
        except OSError:
            client.close()
            continue
        for source, sink in ((client, upstream), (upstream, client)):
            threading.Thread(target=_copy, args=(source, sink), daemon=True).start()


def _copy(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(_CHUNK):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
