"""A trial's state at one version: its tables, its unstable fields, its encodings and hashes.

A :class:`TrialState` is immutable. A mutation makes a new one sharing every untouched table (and every
untouched chunk of the touched ones), so the memory store's snapshots are references. Hashes are
memoised on the state object: restoring a snapshot brings its hashes back for free.

The encodings are the reference ones (:mod:`tolokaforge.core.stable_hash`): tables are composed in
sorted name order from their cached chunk encodings, and hashed without joining the pieces.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence

from tolokaforge.core.stable_hash import encode_key
from tolokaforge.db.tables import NO_FIELDS, Table

__all__ = ["TrialState", "encode_tables", "hash_pieces"]


def encode_tables(tables: Mapping[str, Iterable[bytes]]) -> Iterator[bytes]:
    """``{"name":<table>,...}`` in sorted name order, from each table's encoded pieces."""
    yield b"{"
    for position, name in enumerate(sorted(tables)):
        yield b',"' if position else b'"'
        # Table names are ASCII identifiers (TableName pattern): encode_key would add the same quotes.
        yield encode_key(name)[1:]
        yield b":"
        yield from tables[name]
    yield b"}"


def hash_pieces(pieces: Iterable[bytes]) -> str:
    """SHA-256 hex of the concatenated pieces, without building the concatenation."""
    digest = hashlib.sha256()
    for piece in pieces:
        digest.update(piece)
    return digest.hexdigest()


class TrialState:
    """Tables (never mutated once here) plus the fields the stable view drops from each table."""

    __slots__ = ("__weakref__", "_full_hash", "_stable_hash", "tables", "unstable")

    def __init__(self, tables: Mapping[str, Table], unstable: Mapping[str, frozenset[str]]) -> None:
        self.tables: Mapping[str, Table] = tables
        self.unstable = unstable
        self._full_hash: str | None = None
        self._stable_hash: str | None = None

    def with_unstable(self, unstable: Mapping[str, frozenset[str]]) -> TrialState:
        """The same tables under other unstable fields: the full hash carries over, the stable one not."""
        if dict(unstable) == dict(self.unstable):
            return self
        state = TrialState(self.tables, unstable)
        state._full_hash = self._full_hash
        return state

    def replace_tables(self, changed: Mapping[str, Table]) -> TrialState:
        """A new state with ``changed`` tables swapped in; everything else is shared."""
        return TrialState({**self.tables, **changed}, self.unstable)

    def _fields(self, name: str, stable: bool) -> frozenset[str]:
        return self.unstable.get(name, NO_FIELDS) if stable else NO_FIELDS

    def pieces(self, *, stable: bool, names: Sequence[str] | None = None) -> Iterator[bytes]:
        """The canonical encoding of the (stable) state, or of only the ``names`` tables."""
        chosen = self.tables if names is None else {name: self.tables[name] for name in names}
        return encode_tables(
            {name: table.pieces(self._fields(name, stable)) for name, table in chosen.items()}
        )

    def encode(self, *, stable: bool, names: Sequence[str] | None = None) -> bytes:
        return b"".join(self.pieces(stable=stable, names=names))

    def table_encoding(self, name: str, *, stable: bool) -> bytes:
        return self.tables[name].encode(self._fields(name, stable))

    @property
    def stable_hash(self) -> str:
        if self._stable_hash is None:
            self._stable_hash = hash_pieces(self.pieces(stable=True))
        return self._stable_hash

    @property
    def full_hash(self) -> str:
        if self._full_hash is None:
            if not any(self.unstable.get(name) for name in self.tables):
                self._full_hash = self.stable_hash
            else:
                self._full_hash = hash_pieces(self.pieces(stable=False))
        return self._full_hash
