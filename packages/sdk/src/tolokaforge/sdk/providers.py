"""The tool-provider protocol's process side, in one place: its version, the handshake line, a server.

A tool provider is a child process serving ``tolokaforge.tool.v1.ToolProviderService`` on loopback, or
on the unix socket its environment names in ``TOLOKAFORGE_PROVIDER_SOCKET`` (a sandboxed provider has no
network: docs/isolation.md). It announces itself with one line on stdout,
``TOLOKAFORGE_TOOL_PROVIDER|<version>|tcp|<host:port>`` or ``...|unix|<path>``, and runs until
SIGTERM/SIGINT (docs/protocol/tool-providers.md). Both sides use this module: providers call
:func:`run_provider`, the runner and the pytest plugin read the line with :func:`parse_handshake`.

A provider answers only the process that started it: that process hands it a secret token (one line on
the file descriptor ``TOLOKAFORGE_PROVIDER_TOKEN_FD`` names, the runner's way; or the value of
``TOLOKAFORGE_PROVIDER_TOKEN``, for a provider started by hand) and sends it on every call as
``authorization: Bearer <token>`` metadata. It takes one Configure, and serves only the operations
``TOLOKAFORGE_PROVIDER_ENABLED`` lists (a JSON array; absent: all). :func:`serve_provider` enforces all
of it around any service (:class:`GuardedProvider`), so a provider's own code never sees a call that
breaks these rules.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import socket
import sys
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import grpclib.const
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Server

from tolokaforge.contracts.tool import (
    ConfigureRequest,
    ConfigureResponse,
    DescribeRequest,
    DescribeResponse,
    GetSchemaRequest,
    GetSchemaResponse,
    InvokeRequest,
    InvokeResponse,
    OperationSchema,
    ToolError,
    ToolErrorCategory,
    ToolProviderServiceBase,
)
from tolokaforge.core.credentials import presented_token, token_matches

__all__ = [
    "HANDSHAKE_PREFIX",
    "MIN_PROVIDER_TOKEN_LENGTH",
    "PROVIDER_ENABLED_ENV",
    "PROVIDER_PROTOCOL_VERSION",
    "PROVIDER_RESERVED_ENV",
    "PROVIDER_SOCKET_ENV",
    "PROVIDER_TOKEN_ENV",
    "PROVIDER_TOKEN_FD_ENV",
    "GuardedProvider",
    "Handshake",
    "HandshakeError",
    "ProviderAccess",
    "ProviderBase",
    "ProviderSetupError",
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

PROVIDER_TOKEN_FD_ENV = "TOLOKAFORGE_PROVIDER_TOKEN_FD"
"""Set by the runner: the file descriptor (0, the provider's stdin) carrying its token, one line.

Not the token itself in the environment: a process's initial environment stays readable in
``/proc/<pid>/environ`` by every process of its user for as long as it lives."""

PROVIDER_TOKEN_ENV = "TOLOKAFORGE_PROVIDER_TOKEN"
"""A provider started by hand takes its token from here (when :data:`PROVIDER_TOKEN_FD_ENV` is unset)."""

PROVIDER_ENABLED_ENV = "TOLOKAFORGE_PROVIDER_ENABLED"
"""The operations the pack enabled, a JSON array of names; absent means every operation."""

PROVIDER_RESERVED_ENV = frozenset(
    {PROVIDER_SOCKET_ENV, PROVIDER_TOKEN_FD_ENV, PROVIDER_TOKEN_ENV, PROVIDER_ENABLED_ENV}
)
"""Variables only the process starting a provider sets: a pack's own ``env`` never carries them."""

MIN_PROVIDER_TOKEN_LENGTH = 32
"""A shorter token is refused at start (the runner's are 43 characters: 32 random bytes, URL-safe)."""


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


class ProviderSetupError(Exception):
    """A provider cannot start as configured (no token, a malformed enabled list); ``str()`` is one line
    naming the variable to fix."""


def _read_line(fd: int) -> str:
    """One line from ``fd`` (up to 4 KiB, or to its end); then ``fd`` is pointed at ``/dev/null``, so the
    pipe is let go and the descriptor number is never reused for something else."""
    data = b""
    try:
        while b"\n" not in data and len(data) < 4096:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    except OSError as error:
        raise ProviderSetupError(
            f"{PROVIDER_TOKEN_FD_ENV}={fd}: cannot read the token: {error.strerror}"
        ) from error
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)
    return data.split(b"\n", 1)[0].decode("ascii", "replace").strip()


def _check_token(token: str, source: str) -> str:
    if not token:
        raise ProviderSetupError(f"{source} gave an empty token")
    if len(token) < MIN_PROVIDER_TOKEN_LENGTH or not all("!" <= char <= "~" for char in token):
        raise ProviderSetupError(
            f"{source}: a token must be at least {MIN_PROVIDER_TOKEN_LENGTH} printable ASCII characters "
            "without spaces (e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return token


@dataclass(frozen=True)
class ProviderAccess:
    """Who may call a provider (the holder of ``token``) and what it serves (``enabled``; None: all)."""

    token: str = dataclasses.field(repr=False)
    enabled: frozenset[str] | None = None

    @classmethod
    def from_environment(cls, environ: MutableMapping[str, str] | None = None) -> ProviderAccess:
        """Read the token and the enabled list, and take the token's variables out of ``environ``
        (``os.environ`` by default), so nothing the provider starts inherits them.

        The token comes from the descriptor :data:`PROVIDER_TOKEN_FD_ENV` names, else from
        :data:`PROVIDER_TOKEN_ENV`; with neither, :class:`ProviderSetupError` names both: a provider
        never serves without a token.
        """
        env = os.environ if environ is None else environ
        fd_text = env.pop(PROVIDER_TOKEN_FD_ENV, None)
        by_hand = env.pop(PROVIDER_TOKEN_ENV, None)
        if fd_text is not None:
            try:
                fd = int(fd_text)
            except ValueError as error:
                raise ProviderSetupError(
                    f"{PROVIDER_TOKEN_FD_ENV}={fd_text!r} is not a file descriptor number"
                ) from error
            token = _check_token(_read_line(fd), f"{PROVIDER_TOKEN_FD_ENV}={fd}")
        elif by_hand is not None:
            token = _check_token(by_hand.strip(), PROVIDER_TOKEN_ENV)
        else:
            raise ProviderSetupError(
                f"no token: a tool provider serves only callers holding the token it was started with; "
                f"set {PROVIDER_TOKEN_ENV} to a secret of at least {MIN_PROVIDER_TOKEN_LENGTH} characters "
                f"(the runner hands its own on the descriptor {PROVIDER_TOKEN_FD_ENV} names)"
            )
        return cls(token=token, enabled=_enabled(env.get(PROVIDER_ENABLED_ENV)))


def _enabled(text: str | None) -> frozenset[str] | None:
    if text is None:
        return None
    try:
        value: Any = json.loads(text)
    except json.JSONDecodeError as error:
        raise ProviderSetupError(f"{PROVIDER_ENABLED_ENV} is not JSON: {error}") from error
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):  # pyright: ignore[reportUnknownVariableType]
        raise ProviderSetupError(f"{PROVIDER_ENABLED_ENV} must be a JSON array of operation names")
    return frozenset(str(name) for name in value)  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]


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


class GuardedProvider:
    """``service`` behind a provider's access rules; :func:`serve_provider` serves every provider so.

    - Every RPC needs ``authorization: Bearer <access.token>`` metadata: a call without it, or with
      another token, fails UNAUTHENTICATED before its request is read (compared in constant time).
    - Configure is taken once, from whoever calls first, which is the runner that started the provider
      (it calls right after the handshake): a second one fails FAILED_PRECONDITION and changes nothing.
      An Invoke before Configure fails FAILED_PRECONDITION too.
    - With an enabled list, GetSchema lists only those operations, and an Invoke of any other ends with
      a ToolError without reaching the service: PERMISSION_DENIED for an operation the provider has but
      the pack did not enable, NOT_FOUND for one it does not have.
    """

    def __init__(self, service: ToolProviderServiceBase, access: ProviderAccess) -> None:
        self._service = service
        self._access = access
        self._configured = False
        self._offered: frozenset[str] | None = None

    def __mapping__(self) -> dict[str, grpclib.const.Handler]:
        own: dict[str, Any] = {
            "Describe": self._describe,
            "GetSchema": self._get_schema,
            "Configure": self._configure,
            "Invoke": self._invoke,
        }
        mapping: dict[str, grpclib.const.Handler] = {}
        for path, handler in self._service.__mapping__().items():
            entry: Any = handler  # grpclib's Handler is an untyped namedtuple
            func, cardinality, request_type, reply_type = entry
            guarded = own.get(path.rsplit("/", 1)[-1]) or self._checked(func)
            mapping[path] = grpclib.const.Handler(guarded, cardinality, request_type, reply_type)
        return mapping

    def _check(self, stream: Any) -> None:
        metadata: Any = stream.metadata
        presented = presented_token(metadata.get("authorization") if metadata is not None else None)
        if presented is None:
            raise GRPCError(
                Status.UNAUTHENTICATED,
                "this tool provider answers only the process that started it: authorization: Bearer <token>",
            )
        if not token_matches(presented, self._access.token):
            raise GRPCError(Status.UNAUTHENTICATED, "the token presented is not this tool provider's")

    def _checked(self, func: Any) -> Any:
        async def checked(stream: Any) -> None:
            self._check(stream)
            await func(stream)

        return checked

    async def _describe(self, stream: Any) -> None:
        self._check(stream)
        request: DescribeRequest = await stream.recv_message()
        await stream.send_message(await self._service.describe(request))

    async def _get_schema(self, stream: Any) -> None:
        self._check(stream)
        request: GetSchemaRequest = await stream.recv_message()
        response = await self._service.get_schema(request)
        enabled = self._access.enabled
        if enabled is not None:
            operations = [operation for operation in response.operations if operation.name in enabled]
            response = dataclasses.replace(response, operations=operations)
        await stream.send_message(response)

    async def _configure(self, stream: Any) -> None:
        self._check(stream)
        if self._configured:
            raise GRPCError(
                Status.FAILED_PRECONDITION,
                "this tool provider is configured already: it takes one Configure, from the runner "
                "that started it",
            )
        self._configured = True  # before any await: of two concurrent calls, only one is taken
        request: ConfigureRequest = await stream.recv_message()
        await stream.send_message(await self._service.configure(request))

    async def _invoke(self, stream: Any) -> None:
        self._check(stream)
        if not self._configured:
            raise GRPCError(
                Status.FAILED_PRECONDITION, "this tool provider is not configured yet: Configure comes first"
            )
        request: InvokeRequest = await stream.recv_message()
        enabled = self._access.enabled
        if enabled is not None and request.operation not in enabled:
            await stream.send_message(await self._refusal(request.operation, enabled))
            return
        async for event in self._service.invoke(request):
            await stream.send_message(event)

    async def _refusal(self, operation: str, enabled: frozenset[str]) -> InvokeResponse:
        if self._offered is None:
            schema = await self._service.get_schema(GetSchemaRequest())
            self._offered = frozenset(item.name for item in schema.operations)
        named = ", ".join(sorted(enabled)) or "none"
        if operation in self._offered:
            error = ToolError(
                category=ToolErrorCategory.PERMISSION_DENIED,
                message=f"operation {operation!r} is not enabled here (enabled: {named})",
                details_json=json.dumps({"operation": operation, "enabled": sorted(enabled)}),
            )
        else:
            error = ToolError(
                category=ToolErrorCategory.NOT_FOUND,
                message=f"no operation {operation!r} (enabled: {named})",
                details_json=json.dumps({"operation": operation, "enabled": sorted(enabled)}),
            )
        return InvokeResponse(error=error)


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


async def serve_provider(
    service: ToolProviderServiceBase, *, host: str = "127.0.0.1", access: ProviderAccess | None = None
) -> None:
    """Serve ``service`` behind :class:`GuardedProvider` (see :func:`listen` for where), print the
    handshake, run until SIGTERM/SIGINT. ``access`` defaults to :meth:`ProviderAccess.from_environment`
    (:class:`ProviderSetupError` without a token)."""
    server = Server([GuardedProvider(service, access or ProviderAccess.from_environment())])
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
    """A provider's ``main``: :func:`serve_provider` in a fresh event loop. Without a usable token it
    exits with status 2 and one line on stderr naming the variable to set."""
    try:
        access = ProviderAccess.from_environment()
    except ProviderSetupError as error:
        sys.stderr.write(f"tool provider {type(service).__name__}: {error}\n")
        sys.stderr.flush()
        raise SystemExit(2) from None
    asyncio.run(serve_provider(service, access=access))
