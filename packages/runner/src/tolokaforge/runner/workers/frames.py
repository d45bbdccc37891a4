"""The worker pipe's framing: a 4-byte big-endian length, then the payload.

Runner -> worker frames are pickles (protocol 5: fast for large tables, and the worker trusts the
runner). Worker -> runner frames are JSON (orjson): the runner never unpickles what pack code could
have written, and a frame larger than :data:`MAX_REPLY_BYTES` is refused.
"""

from __future__ import annotations

import os
import pickle
import struct
from typing import Any

import orjson

__all__ = [
    "MAX_REPLY_BYTES",
    "FrameError",
    "decode_reply",
    "encode_reply",
    "encode_request",
    "read_request",
    "reply_length",
    "write_frame",
]

MAX_REPLY_BYTES = 256 << 20
"""The largest reply a worker may send (one call's output and changes)."""

_HEADER = struct.Struct(">I")


class FrameError(Exception):
    """A malformed or oversized frame."""


def encode_request(message: Any) -> bytes:
    payload = pickle.dumps(message, protocol=5)
    return _HEADER.pack(len(payload)) + payload


def encode_reply(message: Any) -> bytes:
    payload = orjson.dumps(message, default=str, option=orjson.OPT_NON_STR_KEYS)
    return _HEADER.pack(len(payload)) + payload


def decode_reply(payload: bytes) -> Any:
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError as error:
        raise FrameError(f"the worker's reply is not JSON: {error}") from error


def reply_length(header: bytes) -> int:
    (length,) = _HEADER.unpack(header)
    if length > MAX_REPLY_BYTES:
        raise FrameError(f"the worker's reply announces {length} bytes (limit {MAX_REPLY_BYTES})")
    return length


# The worker's side: blocking reads and writes on raw file descriptors.


def read_request(fd: int) -> Any | None:
    """The next request, or None when the runner closed the pipe."""
    header = _read_exact(fd, _HEADER.size)
    if header is None:
        return None
    (length,) = _HEADER.unpack(header)
    payload = _read_exact(fd, length)
    if payload is None:
        return None
    return pickle.loads(payload)


def write_frame(fd: int, frame: bytes) -> None:
    view = memoryview(frame)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exact(fd: int, size: int) -> bytes | None:
    if size == 0:
        return b""
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
