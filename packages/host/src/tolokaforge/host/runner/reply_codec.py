"""RegisterTrial replies the host has decoded already are not decoded again.

Every trial of a task with the same tools gets the same RegisterTrial reply, byte for byte: the
task's tool schemas and nothing about the trial (the runner builds it once: runner/edge/reply_wire.py).
Decoding it is pure-Python protobuf work over every schema, about 0.3 ms for fifteen tools, and it
was a sixth of the host's CPU in a golden run against a runner process. :class:`DecodeOnceCodec` keeps the
last few replies it decoded by their bytes and gives the same message again for the same bytes.

The message is then shared by the trials that got it: the host reads replies and never changes them.
"""

from __future__ import annotations

from typing import Any

from cachetools import LRUCache
from grpclib.encoding.proto import ProtoCodec

from tolokaforge.contracts.runner import RegisterTrialResponse

__all__ = ["DecodeOnceCodec"]

KEPT = 64
"""Distinct replies kept: one per task a run has in flight at once is plenty."""


class DecodeOnceCodec(ProtoCodec):
    """grpclib's protobuf codec, except that a RegisterTrial reply seen before is not decoded again."""

    def __init__(self) -> None:
        self._replies: LRUCache[bytes, Any] = LRUCache(KEPT)

    def decode(self, data: bytes, message_type: Any) -> Any:
        if message_type is not RegisterTrialResponse:
            return super().decode(data, message_type)
        key = bytes(data)
        reply = self._replies.get(key)
        if reply is None:
            reply = self._replies[key] = super().decode(data, message_type)
        return reply
