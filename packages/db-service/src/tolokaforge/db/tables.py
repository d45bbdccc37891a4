"""Immutable, chunked tables: copy-on-write edits and cached canonical encodings.

A table is a tuple of chunks of at most ``2 * CHUNK`` records. An edit copies the one chunk it touches and
the (short) tuple of chunk references, never the records: a snapshot is a reference to a table, so taking
or restoring one costs nothing, and an edit costs ``O(CHUNK + len / CHUNK)`` whatever the table's size.

Each chunk caches its canonical encoding (the members of the table's JSON, without brackets), full and
stable (unstable fields removed). Hashing after an edit re-encodes one chunk and feeds sha256 the cached
bytes of the others. Keyed tables keep their chunks sorted by key, which is the order ``sort_keys`` writes
them in, so the chunk encodings concatenate to exactly the reference encoding.

Records are never mutated in place: tables, snapshots and the initial state share them.
"""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import accumulate
from typing import Any, ClassVar

from tolokaforge.db.encoding import encode_members

__all__ = ["CHUNK", "Chunk", "KeyedTable", "ListTable", "Record", "Table", "build_table", "table_of_shape"]

Record = dict[str, Any]
CHUNK = 64
"""Records per chunk when a table is built; a chunk splits when an edit takes it past twice this."""

NO_FIELDS: frozenset[str] = frozenset()


class _Chunk:
    """Records (and, in a keyed table, their sorted keys), with lazily cached encodings."""

    __slots__ = ("_full", "_stable", "keys", "records")

    def __init__(self, records: tuple[Record, ...], keys: tuple[str, ...] = ()) -> None:
        self.records = records
        self.keys = keys
        self._full: bytes | None = None
        self._stable: tuple[frozenset[str], bytes] | None = None

    @classmethod
    def stored(cls, shape: str, full: bytes, fields: frozenset[str], stable: bytes | None) -> _Chunk:
        """A chunk read back from its canonical encoding (the PostgreSQL store keeps only that)."""
        if shape == "list":
            chunk = cls(tuple(json.loads(b"[" + full + b"]")))
        else:
            keyed: dict[str, Record] = json.loads(b"{" + full + b"}")  # keys come back in stored order
            chunk = cls(tuple(keyed.values()), tuple(keyed))
        chunk._full = full
        if fields:
            chunk._stable = (fields, full if stable is None else stable)
        return chunk

    def encoded(self, fields: frozenset[str]) -> bytes:
        if not fields:
            if self._full is None:
                self._full = encode_members(self._payload(self.records))
            return self._full
        cached = self._stable
        if cached is None or cached[0] != fields:
            stripped = tuple(_strip(record, fields) for record in self.records)
            cached = (fields, encode_members(self._payload(stripped)))
            self._stable = cached
        return cached[1]

    def _payload(self, records: tuple[Record, ...]) -> list[Any] | dict[str, Any]:
        if self.keys:
            return dict(zip(self.keys, records, strict=True))
        return list(records)


Chunk = _Chunk


def _strip(record: Record, fields: frozenset[str]) -> Record:
    # copy + pop runs in C; a comprehension over every member costs several times more per record.
    stripped = record.copy()
    for name in fields:
        stripped.pop(name, None)
    return stripped


def _split(records: list[Record], keys: list[str] | None = None) -> list[_Chunk]:
    """One chunk, or two halves when an edit grew it past ``2 * CHUNK``; none when it emptied."""
    if not records:
        return []
    if len(records) <= 2 * CHUNK:
        return [_Chunk(tuple(records), tuple(keys) if keys else ())]
    half = len(records) // 2
    if keys:
        return [
            _Chunk(tuple(records[:half]), tuple(keys[:half])),
            _Chunk(tuple(records[half:]), tuple(keys[half:])),
        ]
    return [_Chunk(tuple(records[:half])), _Chunk(tuple(records[half:]))]


class Table:
    """Common part of both shapes: chunk storage, size, encoding."""

    shape: ClassVar[str] = ""
    open_bracket: ClassVar[bytes] = b""
    close_bracket: ClassVar[bytes] = b""

    __slots__ = ("_chunks", "_size")

    def __init__(self, chunks: tuple[_Chunk, ...]) -> None:
        self._chunks = chunks
        self._size = sum(len(chunk.records) for chunk in chunks)

    def __len__(self) -> int:
        return self._size

    @property
    def chunks(self) -> tuple[_Chunk, ...]:
        """The chunks, in order. Immutable: an edit returns a table sharing every untouched one."""
        return self._chunks

    def pieces(self, fields: frozenset[str] = NO_FIELDS) -> Iterator[bytes]:
        """The canonical encoding of the table in pieces (feed them to a hash, or join them)."""
        yield self.open_bracket
        first = True
        for chunk in self._chunks:
            if not first:
                yield b","
            first = False
            yield chunk.encoded(fields)
        yield self.close_bracket

    def encode(self, fields: frozenset[str] = NO_FIELDS) -> bytes:
        return b"".join(self.pieces(fields))

    def to_json(self) -> list[Record] | dict[str, Record]:
        """The table as plain JSON values. The records are shared: copy before handing them out."""
        raise NotImplementedError

    def located(self) -> Iterator[tuple[int | str, Record]]:
        """Every record with its locator: its index in a list table, its key in a keyed table."""
        raise NotImplementedError


class ListTable(Table):
    """A list of records, addressed by index."""

    shape = "list"
    open_bracket = b"["
    close_bracket = b"]"
    __slots__ = ("_starts",)

    def __init__(self, chunks: tuple[_Chunk, ...]) -> None:
        super().__init__(chunks)
        # Index of each chunk's first record: bisect finds the chunk holding any index.
        self._starts = [0, *accumulate(len(chunk.records) for chunk in chunks)][:-1]

    @classmethod
    def build(cls, records: Iterable[Record]) -> ListTable:
        items = list(records)
        return cls(tuple(_Chunk(tuple(items[at : at + CHUNK])) for at in range(0, len(items), CHUNK)))

    def to_json(self) -> list[Record]:
        return [record for chunk in self._chunks for record in chunk.records]

    def located(self) -> Iterator[tuple[int | str, Record]]:
        index = 0
        for chunk in self._chunks:
            for record in chunk.records:
                yield index, record
                index += 1

    def _find(self, index: int) -> tuple[int, int]:
        at = bisect_right(self._starts, index) - 1
        return at, index - self._starts[at]

    def get(self, index: int) -> Record | None:
        if not 0 <= index < self._size:
            return None
        at, offset = self._find(index)
        return self._chunks[at].records[offset]

    def _edit(self, at: int, change: Callable[[list[Record]], None]) -> ListTable:
        records = list(self._chunks[at].records)
        change(records)
        return ListTable((*self._chunks[:at], *_split(records), *self._chunks[at + 1 :]))

    def replace(self, index: int, record: Record) -> ListTable:
        at, offset = self._find(index)
        records = list(self._chunks[at].records)
        records[offset] = record
        # Same size, same chunk boundaries: reuse the index instead of recounting every chunk, so
        # replacing one record in a 100k-record table costs one chunk, not a pass over all of them.
        table = ListTable.__new__(ListTable)
        table._chunks = (*self._chunks[:at], _Chunk(tuple(records)), *self._chunks[at + 1 :])
        table._size = self._size
        table._starts = self._starts
        return table

    def insert(self, index: int, record: Record) -> ListTable:
        """Insert before ``index`` (``len(self)`` appends)."""
        if not self._chunks:
            return ListTable((_Chunk((record,)),))
        if index >= self._size:
            at, offset = len(self._chunks) - 1, len(self._chunks[-1].records)
        else:
            at, offset = self._find(index)
        return self._edit(at, lambda records: records.insert(offset, record))

    def delete(self, indexes: Iterable[int]) -> ListTable:
        by_chunk: dict[int, set[int]] = {}
        for index in indexes:
            at, offset = self._find(index)
            by_chunk.setdefault(at, set()).add(offset)
        chunks: list[_Chunk] = []
        for at, chunk in enumerate(self._chunks):
            gone = by_chunk.get(at)
            if gone is None:
                chunks.append(chunk)
            else:
                chunks.extend(_split([r for i, r in enumerate(chunk.records) if i not in gone]))
        return ListTable(tuple(chunks))


class KeyedTable(Table):
    """An object mapping keys to records, stored sorted by key (the canonical order)."""

    shape = "keyed"
    open_bracket = b"{"
    close_bracket = b"}"
    __slots__ = ("_firsts",)

    def __init__(self, chunks: tuple[_Chunk, ...]) -> None:
        super().__init__(chunks)
        self._firsts = [chunk.keys[0] for chunk in chunks]

    @classmethod
    def build(cls, records: Mapping[str, Record]) -> KeyedTable:
        keys = sorted(records)
        return cls(
            tuple(
                _Chunk(tuple(records[key] for key in keys[at : at + CHUNK]), tuple(keys[at : at + CHUNK]))
                for at in range(0, len(keys), CHUNK)
            )
        )

    def to_json(self) -> dict[str, Record]:
        return {
            key: record
            for chunk in self._chunks
            for key, record in zip(chunk.keys, chunk.records, strict=True)
        }

    def located(self) -> Iterator[tuple[int | str, Record]]:
        for chunk in self._chunks:
            yield from zip(chunk.keys, chunk.records, strict=True)

    def _chunk_for(self, key: str) -> int:
        return max(bisect_right(self._firsts, key) - 1, 0)

    def get(self, key: str) -> Record | None:
        if not self._chunks:
            return None
        chunk = self._chunks[self._chunk_for(key)]
        offset = bisect_left(chunk.keys, key)
        if offset < len(chunk.keys) and chunk.keys[offset] == key:
            return chunk.records[offset]
        return None

    def put(self, key: str, record: Record) -> KeyedTable:
        """Insert ``record`` under ``key``, or replace the record there."""
        if not self._chunks:
            return KeyedTable((_Chunk((record,), (key,)),))
        at = self._chunk_for(key)
        chunk = self._chunks[at]
        keys, records = list(chunk.keys), list(chunk.records)
        offset = bisect_left(keys, key)
        if offset < len(keys) and keys[offset] == key:
            records[offset] = record
        else:
            keys.insert(offset, key)
            records.insert(offset, record)
        return KeyedTable((*self._chunks[:at], *_split(records, keys), *self._chunks[at + 1 :]))

    def delete(self, keys: Iterable[str]) -> KeyedTable:
        by_chunk: dict[int, set[str]] = {}
        for key in keys:
            by_chunk.setdefault(self._chunk_for(key), set()).add(key)
        chunks: list[_Chunk] = []
        for at, chunk in enumerate(self._chunks):
            gone = by_chunk.get(at)
            if gone is None:
                chunks.append(chunk)
                continue
            kept = [(k, r) for k, r in zip(chunk.keys, chunk.records, strict=True) if k not in gone]
            chunks.extend(_split([r for _, r in kept], [k for k, _ in kept]))
        return KeyedTable(tuple(chunks))


def table_of_shape(shape: str, chunks: tuple[_Chunk, ...]) -> Table:
    """A table of ``shape`` ("list" or "keyed") made of ``chunks``."""
    return ListTable(chunks) if shape == "list" else KeyedTable(chunks)


def build_table(value: list[Record] | dict[str, Record]) -> Table:
    """A table of the shape ``value`` has: a JSON array is a list table, a JSON object a keyed one."""
    if isinstance(value, list):
        return ListTable.build(value)
    return KeyedTable.build(value)
