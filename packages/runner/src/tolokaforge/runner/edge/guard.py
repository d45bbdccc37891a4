"""The runner's gRPC edge: decoding and limits, so no request answers UNKNOWN and none exhausts the runner.

grpclib answers UNKNOWN for any exception a handler lets out, including its own decoding of the request,
and buffers a message whole whatever its declared length. Here every RPC handler is wrapped so that:

* a request is read with its declared length checked first: over ``max_message_bytes`` it is refused
  with RESOURCE_EXHAUSTED before its body is buffered; one that does not arrive within
  ``receive_timeout_s`` (an abandoned upload) fails DEADLINE_EXCEEDED and its stream is freed;
* bytes that do not decode as the request message (broken protobuf, invalid UTF-8 in a string field, no
  message at all) fail with INVALID_ARGUMENT;
* any other exception escaping a handler is INTERNAL (logged), never UNKNOWN.

Every call must carry the runner's token (``authorization: Bearer <token>`` metadata, compared in
constant time): one without it, or with another, fails UNAUTHENTICATED before its request is read.

Connections are guarded too: HTTP/2 ``MAX_CONCURRENT_STREAMS`` is announced per connection, and a
connection with no open stream and no bytes received for ``idle_timeout_s`` is sent GOAWAY and closed,
so silent sockets cannot pile up. Defaults and their reasons: docs/faults.md.

grpclib has public hooks for none of this; what of its internals the guard needs is read in two
functions, :func:`_request_bytes` and :func:`_h2`, each naming the open grpclib issue that would replace it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import struct
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import grpclib.const
from grpclib.const import Status
from grpclib.encoding.proto import ProtoCodec
from grpclib.exceptions import GRPCError
from grpclib.protocol import Connection, H2Protocol
from grpclib.server import Server
from grpclib.stream import StreamIterator
from h2.connection import H2Connection
from h2.settings import SettingCodes

from tolokaforge.core.credentials import presented_token, token_matches

from .reply_wire import SendOnceCodec

__all__ = ["EdgeLimits", "GuardedServer", "guard_mapping"]

log = logging.getLogger(__name__)

StreamHandler = Callable[[Any], Awaitable[None]]


@dataclass(frozen=True)
class EdgeLimits:
    max_message_bytes: int = 64 * 1024 * 1024
    """Largest request message accepted (a TrialSpec with its initial tables is the big one)."""
    receive_timeout_s: float = 120.0
    """How long a request message may take to arrive once its call started."""
    idle_timeout_s: float = 300.0
    """A connection with no open stream and nothing received for this long is closed."""
    max_concurrent_streams: int = 256
    """Streams one connection may have open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS)."""


def _invalid(message: str) -> GRPCError:
    return GRPCError(Status.INVALID_ARGUMENT, message)


# Requests decode as grpclib's protobuf codec decodes them (the server's SendOnceCodec changes encoding only).
_REQUEST_CODEC = ProtoCodec()


def _request_bytes(stream: Any) -> Any:
    """The HTTP/2 stream under grpclib's server ``stream``, whose ``recv_data(n)`` reads raw bytes.

    grpclib's ``recv_message`` buffers a message whole, whatever length its prefix declares, and has no
    receive limit (vmagamedov/grpclib#195, open). Reading the prefix first needs the raw stream, which
    grpclib keeps in this one private attribute: the only private read on the request path.
    """
    return getattr(stream, "_stream")  # noqa: B009


async def _read_request(stream: Any, message_type: Any, limits: EdgeLimits) -> Any:
    """One ``message_type`` request from grpclib's server stream, its length checked before its body
    is read."""
    raw = _request_bytes(stream)
    prefix: bytes = await raw.recv_data(5)
    if len(prefix) < 5:
        raise _invalid(f"no {message_type.__name__} in the request")
    compressed, length = struct.unpack(">?I", prefix)
    if compressed:
        raise _invalid("compressed request messages are not accepted")
    if length > limits.max_message_bytes:
        raise GRPCError(
            Status.RESOURCE_EXHAUSTED,
            f"the request message is {length} bytes, over the runner's limit of {limits.max_message_bytes}",
        )
    body: bytes = await raw.recv_data(length)
    if len(body) != length:
        raise _invalid(f"the request message ended after {len(body)} of {length} bytes")
    try:
        message = _REQUEST_CODEC.decode(body, message_type)
    except Exception as error:
        raise _invalid(
            f"the request is not a valid {message_type.__name__}: {type(error).__name__}: {error}"
        ) from error
    _check_field_types(message, message_type)
    return message


def _check_field_types(message: Any, message_type: Any) -> None:
    """Refuse a decoded message whose fields are not of their declared kind.

    The decoder accepts a field sent with the wrong wire type (e.g. a deprecated group) and leaves None
    or a value of another type where the handler expects an int or a string.
    """
    blank = message_type()
    for field in dataclasses.fields(message):
        value, default = getattr(message, field.name), getattr(blank, field.name)
        if default is None:
            continue  # a message or optional field: None is its legitimate absence
        wrong = not isinstance(value, type(default)) or (
            isinstance(value, list) and any(item is None for item in cast(list[Any], value))
        )
        if wrong:
            raise _invalid(f"{message_type.__name__}.{field.name} is not of its declared type")


def _check_token(stream: Any, token: str) -> None:
    metadata: Any = stream.metadata
    presented = presented_token(metadata.get("authorization") if metadata is not None else None)
    if presented is None:
        raise GRPCError(Status.UNAUTHENTICATED, "this runner needs its token: authorization: Bearer <token>")
    if not token_matches(presented, token):
        raise GRPCError(Status.UNAUTHENTICATED, "the token presented is not this runner's")


class _GuardedStream(StreamIterator[Any]):
    """What a handler is given for grpclib's server stream: the same call, its request read under the
    limits; everything else (metadata, replies, trailers) goes to grpclib's stream itself."""

    def __init__(self, stream: Any, message_type: Any, limits: EdgeLimits) -> None:
        self._call = stream
        self._message_type = message_type
        self._limits = limits

    async def recv_message(self) -> Any:
        timeout_s = self._limits.receive_timeout_s
        try:
            # A timeout scope, not wait_for: wait_for runs the read as a task of its own, on every call.
            async with asyncio.timeout(timeout_s):
                return await _read_request(self._call, self._message_type, self._limits)
        except TimeoutError as error:
            raise GRPCError(
                Status.DEADLINE_EXCEEDED, f"the request message did not arrive within {timeout_s:g}s"
            ) from error

    async def send_message(self, message: Any) -> None:
        await self._call.send_message(message)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._call, name)


def _guard(
    path: str, func: StreamHandler, message_type: Any, limits: EdgeLimits, token: str | None
) -> StreamHandler:
    async def guarded(stream: Any) -> None:
        if token is not None:
            _check_token(stream, token)
        try:
            await func(_GuardedStream(stream, message_type, limits))
        except GRPCError:
            raise
        except Exception as error:
            log.exception("%s failed", path)
            raise GRPCError(Status.INTERNAL, f"runner error: {type(error).__name__}: {error}") from error

    return guarded


def guard_mapping(
    mapping: Mapping[str, grpclib.const.Handler], limits: EdgeLimits, token: str | None
) -> dict[str, grpclib.const.Handler]:
    """``mapping`` with every handler checking ``token`` (None: no check, for in-process callers), reading
    its request under ``limits`` and answering typed errors."""
    guarded: dict[str, grpclib.const.Handler] = {}
    for path, handler in mapping.items():
        entry: Any = handler  # grpclib's Handler is an untyped namedtuple
        func, cardinality, request_type, reply_type = entry
        guarded[path] = grpclib.const.Handler(
            _guard(path, func, request_type, limits, token), cardinality, request_type, reply_type
        )
    return guarded


def _h2(connection: Connection) -> H2Connection:
    """The h2 state machine under grpclib's ``connection``.

    grpclib has no setting for SETTINGS_MAX_CONCURRENT_STREAMS and no call that sends GOAWAY
    (vmagamedov/grpclib#132, open: "No easy way to adjust H2 connection settings"); both are h2 calls on
    the connection grpclib keeps in this one private attribute.
    """
    return getattr(connection, "_connection")  # noqa: B009


class _GuardedProtocol(H2Protocol):
    """grpclib's HTTP/2 server protocol with a stream cap and an idle timeout."""

    limits: EdgeLimits

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._transport = transport
        _h2(self.connection).update_settings(
            {SettingCodes.MAX_CONCURRENT_STREAMS: self.limits.max_concurrent_streams}
        )
        self.connection.flush()
        self._loop = asyncio.get_running_loop()
        self._last_received = self._loop.time()
        self._timer = self._loop.call_later(self.limits.idle_timeout_s, self._check_idle)

    def data_received(self, data: bytes) -> None:
        self._last_received = self._loop.time()
        super().data_received(data)

    def _check_idle(self) -> None:
        quiet = self._loop.time() - self._last_received
        if self.processor.streams or quiet < self.limits.idle_timeout_s:
            wait = (
                self.limits.idle_timeout_s - quiet
                if not self.processor.streams
                else self.limits.idle_timeout_s
            )
            self._timer = self._loop.call_later(max(wait, 0.05), self._check_idle)
            return
        try:  # GOAWAY first, so a well-behaved client opens a new connection instead of failing a call
            _h2(self.connection).close_connection()
            self.connection.flush()
        except Exception:  # a half-open or broken connection: just drop it
            log.debug("GOAWAY to an idle connection failed", exc_info=True)
        self._transport.close()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._timer.cancel()
        super().connection_lost(exc)


class GuardedServer(Server):
    """A grpclib Server whose connections carry :class:`EdgeLimits`' stream cap and idle timeout, and
    whose replies marked as unchanging are encoded once (reply_wire.py)."""

    def __init__(self, handlers: list[Any], limits: EdgeLimits) -> None:
        super().__init__(handlers, codec=SendOnceCodec())
        self.limits = limits

    def _protocol_factory(self) -> H2Protocol:
        # grpclib builds each connection's protocol here and has no public hook for it (grpclib#132).
        plain = super()._protocol_factory()
        guarded = _GuardedProtocol(plain.handler, plain.config, plain.h2_config)
        guarded.limits = self.limits
        return guarded
