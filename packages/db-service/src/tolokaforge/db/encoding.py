"""Canonical JSON encoding, fast: orjson where it provably agrees with the reference, stdlib otherwise.

The reference is :func:`tolokaforge.core.stable_hash.canonical_bytes` (``json.dumps`` with sorted keys,
compact separators, ``ensure_ascii`` and Python's float repr). orjson is ~10x faster but differs from it
in three places, each handled here so that :func:`encode` returns the reference bytes exactly:

* non-ASCII text and DEL (0x7f) are written raw: re-escaped to ``\\uXXXX`` (surrogate pairs above the BMP),
  which only ever occur inside strings, so a textual substitution is exact;
* floats below 1e-4 are written ``0.0000…`` or with a one-digit exponent (``1e-7``, reference ``1e-07``):
  any output holding ``0.0000`` or ``e-`` is re-encoded by the reference (rare, and never wrong, merely
  slower when a string happens to contain those characters);
* what orjson refuses (integers beyond 64 bits, lone surrogates, nesting past 255) goes to the reference.

tests/test_encoding.py proves the equality with hypothesis over arbitrary JSON values.
"""

from __future__ import annotations

from json.encoder import encode_basestring_ascii  # pyright: ignore[reportUnknownVariableType]
from typing import Any

import orjson

from tolokaforge.core.stable_hash import canonical_bytes

__all__ = ["encode", "encode_members"]

_OPTIONS = orjson.OPT_SORT_KEYS


def _ascii(out: bytes) -> bytes:
    """``out`` (orjson's UTF-8 JSON) with every non-ASCII character and DEL written as ``\\uXXXX``.

    The stdlib's C string escaper does the work in one pass over the whole document: it writes non-ASCII
    and DEL exactly as ``ensure_ascii`` does, and also escapes ``\\`` and ``"``, which is undone after.
    Both undo steps are exact: every ``"`` it saw was preceded by its own new backslash, and the
    backslashes it doubled form aligned pairs, so left-to-right replacement restores the original.
    """
    escaped: str = encode_basestring_ascii(out.decode("utf-8"))[1:-1]
    return escaped.replace('\\"', '"').replace("\\\\", "\\").encode("ascii")


def _agree(out: bytes, value: Any) -> bytes:
    if b"0.0000" in out or b"e-" in out:
        return canonical_bytes(value)
    if not out.isascii() or b"\x7f" in out:
        return _ascii(out)
    return out


def encode(value: Any) -> bytes:
    """``canonical_bytes(value)``, computed faster where that is safe."""
    try:
        out = orjson.dumps(value, option=_OPTIONS)
    except (orjson.JSONEncodeError, TypeError):
        return canonical_bytes(value)
    return _agree(out, value)


def encode_members(value: list[Any] | dict[str, Any]) -> bytes:
    """The canonical encoding of a list or object without its brackets: its members joined by commas.

    For a list of records this is what a chunk of a list table contributes to the table's encoding; for
    an object whose keys are a contiguous sorted run, what a chunk of a keyed table contributes.
    """
    return encode(value)[1:-1]
