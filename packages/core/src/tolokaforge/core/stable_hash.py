"""The one state-hash algorithm (docs/protocol/db-service.md#the-stable-hash), and its canonical encoding.

``sha256_hex(json.dumps(state, sort_keys=True, separators=(",", ":"), default=str).encode("utf-8"))``
with ``ensure_ascii`` on and Python's float repr. Unstable fields ``(table_name, field_name)`` are
removed from every record of that table before hashing the *stable* state.

This module is the reference. A store may cache encodings per table or per chunk of records, but the
bytes it hashes must equal :func:`canonical_bytes` of the same state; :func:`compose_object` is the
one way to assemble a JSON object from already-encoded members so that they do.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any, cast

__all__ = [
    "UnstableFieldSpec",
    "canonical_bytes",
    "compose_object",
    "encode_key",
    "full_hash",
    "stable_hash",
    "strip_unstable",
]

UnstableFieldSpec = tuple[str, str]
"""``(table_name, field_name)``: a field excluded from every record of that table."""

_encoder = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)


def canonical_bytes(value: Any) -> bytes:
    """The canonical JSON encoding of ``value``: sorted keys, no spaces, ASCII-escaped, UTF-8."""
    return _encoder.encode(value).encode("utf-8")


def encode_key(key: str) -> bytes:
    """A JSON object key, encoded exactly as :func:`canonical_bytes` encodes it inside an object."""
    return _encoder.encode(key).encode("utf-8")


def compose_object(members: Iterable[tuple[str, bytes]]) -> Iterable[bytes]:
    """Yield the canonical encoding of an object whose members are already encoded.

    ``members`` are ``(key, canonical_bytes(value))`` pairs in any order; they are emitted sorted by
    key, as ``sort_keys`` sorts them, so ``b"".join(compose_object(...))`` equals
    ``canonical_bytes(dict(...))``. Yields pieces so a caller can feed a hash without joining.
    """
    yield b"{"
    first = True
    for key, encoded in sorted(members, key=lambda member: member[0]):
        if not first:
            yield b","
        first = False
        yield encode_key(key)
        yield b":"
        yield encoded
    yield b"}"


def strip_unstable(tables: Mapping[str, Any], unstable: Iterable[UnstableFieldSpec]) -> dict[str, Any]:
    """A copy of ``tables`` without the unstable fields; ``tables`` itself is not changed.

    Records are the items of a list table or the values of a keyed table. Only records that hold an
    unstable field are copied; everything else is shared with the input.
    """
    by_table: dict[str, set[str]] = {}
    for table_name, field_name in unstable:
        by_table.setdefault(table_name, set()).add(field_name)
    stable = dict(tables)
    for table_name, fields in by_table.items():
        table = tables.get(table_name)
        if isinstance(table, list):
            stable[table_name] = [_without(record, fields) for record in table]  # pyright: ignore[reportUnknownVariableType]
        elif isinstance(table, dict):
            stable[table_name] = {key: _without(record, fields) for key, record in table.items()}  # pyright: ignore[reportUnknownVariableType]
    return stable


def _without(record: Any, fields: set[str]) -> Any:
    if not isinstance(record, dict):
        return record
    as_dict = cast(dict[str, Any], record)
    if fields.isdisjoint(as_dict):
        return as_dict
    return {key: value for key, value in as_dict.items() if key not in fields}


def full_hash(tables: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical encoding of the whole state."""
    return hashlib.sha256(canonical_bytes(tables)).hexdigest()


def stable_hash(tables: Mapping[str, Any], unstable: Iterable[UnstableFieldSpec] = ()) -> str:
    """SHA-256 (hex) of the canonical encoding of the state without its unstable fields."""
    return full_hash(strip_unstable(tables, unstable))
