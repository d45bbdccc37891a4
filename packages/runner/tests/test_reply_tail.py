"""A Reply keeps a bounded tail of a call's streamed output, and none of it when the terminal event has it."""

from __future__ import annotations

from tolokaforge.runner.tools.remote import STREAM_TAIL_BYTES, Reply


def test_the_streamed_tail_is_bounded_whatever_the_chunking() -> None:
    reply = Reply()
    for index in range(100_000):
        reply.add_chunk(1, bytes([65 + index % 26]) * 7)
    reply.add_chunk(2, b"")  # an empty chunk keeps nothing more
    kept = b"".join(data for _, data in reply.chunks)
    assert len(kept) == reply.chunk_bytes == STREAM_TAIL_BYTES
    assert kept.endswith(bytes([65 + 99_999 % 26]) * 7)
    reply.add_chunk(2, b"x" * (3 * STREAM_TAIL_BYTES))
    assert [(stream, len(data)) for stream, data in reply.chunks] == [(2, STREAM_TAIL_BYTES)]


def test_forgetting_the_bytes_keeps_that_chunks_came() -> None:
    reply = Reply()
    reply.add_chunk(1, b"out")
    reply.add_chunk(2, b"err")
    reply.add_chunk(1, b"more")
    reply.forget_chunk_bytes()
    assert list(reply.chunks) == [(1, b""), (2, b"")] and reply.chunk_bytes == 0
