"""The tool-provider protocol's process side, in one place: its version, the handshake line, a server.

A tool provider is a child process serving ``tolokaforge.tool.v1.ToolProviderService`` on loopback, or
on the unix socket its environment names in ``TOLOKAFORGE_PROVIDER_SOCKET`` (a sandboxed provider has no
network: docs/isolation.md). It announces itself with one line on stdout,
``TOLOKAFORGE_TOOL_PROVIDER|<version>|tcp|<host:port>`` or ``...|unix|<path>``, and runs until
SIGTERM/SIGINT (docs/protocol/tool-providers.md). Both sides use this module: providers call
:func:`run_provider`, the runner and the pytest plugin read the line with :func:`parse_handshake`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from grpclib.server import Server

from tolokaforge.contracts.tool import (
    ConfigureRequest,
    ConfigureResponse,
    DescribeRequest,
    DescribeResponse,
    GetSchemaRequest,
    GetSchemaResponse,
    OperationSchema,
    ToolError,
    ToolErrorCategory,
    ToolProviderServiceBase,
)

__all__ = [
    "HANDSHAKE_PREFIX",
    "PROVIDER_PROTOCOL_VERSION",
    "PROVIDER_SOCKET_ENV",
    "Handshake",
    "HandshakeError",
    "ProviderBase",
    "format_handshake",
    "format_unix_handshake",
    "is_handshake_line",
    "listen",
    "parse_handshake",
    "run_provider",
    "serve_provider",
]

PROVIDER_PROTOCOL_VERSION = 1
"""The ToolProviderService protocol version this code base speaks, on both sides."""

HANDSHAKE_PREFIX = "TOLOKAFORGE_TOOL_PROVIDER"

PROVIDER_SOCKET_ENV = "TOLOKAFORGE_PROVIDER_SOCKET"
"""Set by the runner for a sandboxed provider: the unix socket path to listen on (it has no network)."""


class HandshakeError(Exception):
    """A provider did not announce a usable address (malformed line, exit, or no line in time)."""


@dataclass(frozen=True)
class Handshake:
    protocol_version: int
    host: str
    port: int
    path: str | None = None
    """A unix socket's path (network ``unix``); then ``host`` and ``port`` are unused."""


def format_handshake(port: int, *, host: str = "127.0.0.1", version: int = PROVIDER_PROTOCOL_VERSION) -> str:
    """The handshake line (without its newline) for a provider listening on ``host:port``."""
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return f"{HANDSHAKE_PREFIX}|{version}|tcp|{address}"


def is_handshake_line(text: str) -> bool:
    """Whether a stdout line is the handshake (lines before it are startup chatter)."""
    return text.startswith(HANDSHAKE_PREFIX + "|")


def parse_handshake(text: str) -> Handshake:
    """Read a handshake line; :class:`HandshakeError` names what is wrong with it."""
    parts = text.strip().split("|")
    if len(parts) != 4 or parts[0] != HANDSHAKE_PREFIX:
        raise HandshakeError(f"malformed handshake line {text!r}: expected 4 '|'-separated fields")
    _, version, network, address = parts
    if network == "unix":
        if not address.startswith("/"):
            raise HandshakeError(f"malformed handshake line {text!r}: a unix socket needs an absolute path")
        try:
            return Handshake(int(version), "", 0, path=address)
        except ValueError as error:
            raise HandshakeError(f"malformed handshake line {text!r}: {error}") from error
    if network != "tcp":
        raise HandshakeError(f"handshake names network {network!r}; tcp and unix are supported")
    host, _, port = address.rpartition(":")
    try:
        return Handshake(int(version), host.strip("[]") or "127.0.0.1", int(port))
    except ValueError as error:
        raise HandshakeError(f"malformed handshake line {text!r}: {error}") from error


class ProviderBase(ToolProviderServiceBase):
    """A provider's Describe, GetSchema and Configure, from four class attributes; a subclass adds Invoke.

    Configure refuses any configuration (INVALID_ARGUMENTS): a provider that takes one overrides it, so
    a configuration is never silently ignored.
    """

    name: ClassVar[str]
    version: ClassVar[str]
    description: ClassVar[str]
    operations: ClassVar[Sequence[OperationSchema]]

    def __init__(self, protocol_version: int = PROVIDER_PROTOCOL_VERSION) -> None:
        self.protocol_version = protocol_version

    async def describe(self, message: DescribeRequest) -> DescribeResponse:
        return DescribeResponse(
            name=self.name,
            version=self.version,
            protocol_version=self.protocol_version,
            description=self.description,
        )

    async def get_schema(self, message: GetSchemaRequest) -> GetSchemaResponse:
        return GetSchemaResponse(operations=list(self.operations))

    async def configure(self, message: ConfigureRequest) -> ConfigureResponse:
        if message.config_json not in ("", "{}"):
            return ConfigureResponse(
                error=ToolError(
                    category=ToolErrorCategory.INVALID_ARGUMENTS,
                    message=f"the {self.name} provider takes no configuration",
                )
            )
        return ConfigureResponse()


def format_unix_handshake(path: str, *, version: int = PROVIDER_PROTOCOL_VERSION) -> str:
    """The handshake line (without its newline) for a provider listening on the unix socket ``path``."""
    return f"{HANDSHAKE_PREFIX}|{version}|unix|{path}"


def listen(host: str = "127.0.0.1") -> tuple[socket.socket, str]:
    """The socket a provider serves on, and its handshake line: the unix socket the runner named in
    :data:`PROVIDER_SOCKET_ENV`, else an ephemeral loopback port."""
    path = os.environ.get(PROVIDER_SOCKET_ENV)
    if path:
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix.bind(path)
        return unix, format_unix_handshake(path)
    # IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that say they are TCP (else ~40 ms a call).
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind((host, 0))
    return sock, format_handshake(sock.getsockname()[1], host=host)


async def serve_provider(service: ToolProviderServiceBase, *, host: str = "127.0.0.1") -> None:
    """Serve ``service`` (see :func:`listen`), print the handshake, run until SIGTERM/SIGINT."""
    server = Server([service])
    # Bind first: grpclib does not report an ephemeral port back, and the handshake must name it.
    sock, handshake = listen(host)
    await server.start(sock=sock)
    sys.stdout.write(handshake + "\n")
    sys.stdout.flush()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()
    await server.wait_closed()


def run_provider(service: ToolProviderServiceBase) -> None:
    """A provider's ``main``: :func:`serve_provider` in a fresh event loop."""
    asyncio.run(serve_provider(service))
