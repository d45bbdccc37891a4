"""Replies sent many times unchanged are encoded once.

A successful RegisterTrial reply lists the task's tool schemas and nothing about the trial, so every
trial of a task whose tools are shared gets the same reply (service.py keeps it on the task). Encoding
it is pure-Python protobuf work over every schema: about 0.6 ms for fifteen tools, once per trial,
on the runner's event loop. :func:`send_unchanged` marks such a message; :class:`SendOnceCodec` (the gRPC
server's codec) encodes it the first time it is sent and sends those bytes from then on.

A marked message must not be changed afterwards. The mark lives as long as the message: it is kept
by a weak reference, so the message's owner (the task cache) decides when it goes.
"""

from __future__ import annotations

import weakref
from typing import Any

from grpclib.encoding.proto import ProtoCodec

__all__ = ["SendOnceCodec", "send_unchanged"]

_WIRE: dict[int, tuple[weakref.ref[Any], list[bytes]]] = {}
"""By ``id`` of a marked message: a weak reference to it (the id is its only while it lives) and its
bytes once encoded (an empty list until then)."""


def send_unchanged(message: Any) -> None:
    """Marks ``message`` as sent many times unchanged, from now on: its bytes are computed once."""
    key = id(message)
    if key in _WIRE:
        return

    def forget(_: weakref.ref[Any]) -> None:
        # Runs as the message is freed, before its id can be anyone else's.
        _WIRE.pop(key, None)

    _WIRE[key] = (weakref.ref(message, forget), [])


class SendOnceCodec(ProtoCodec):
    """grpclib's protobuf codec, except that a message marked by :func:`send_unchanged` is encoded
    once and its bytes reused."""

    def encode(self, message: Any, message_type: Any) -> bytes:
        marked = _WIRE.get(id(message))
        if marked is None or marked[0]() is not message:
            return super().encode(message, message_type)
        wire = marked[1]
        if not wire:
            wire.append(super().encode(message, message_type))
        return wire[0]
