"""The PostgreSQL store's in-process view of the chunked tables it has read or written.

PostgreSQL keeps each table as a directory of chunk ids (migrations/0002). To apply a write, the store
needs the touched table as a :class:`~tolokaforge.db.tables.Table` (the same structure the memory
store uses) and the id of each of its chunks, so that it can tell the chunks an edit made (to insert)
from the ones it kept (referenced by id again). Loading that from PostgreSQL costs a pass over the
table; this cache keeps it, per trial and slot, so consecutive writes cost only what they change.

An entry is valid for one incarnation and version of a trial: the store looks it up under the trial's
row lock with the version it just read, so a write by another process (a different version) or a trial
deleted and created again (a different incarnation) is never served stale; the entry is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from cachetools import LRUCache

from tolokaforge.db.store import Hashes
from tolokaforge.db.tables import Chunk, Table

__all__ = ["CURRENT", "ChunkCache", "StoredTable", "TrialEntry", "new_chunks"]


@dataclass(frozen=True, slots=True)
class StoredTable:
    """A table and the id of each of its chunks, in order."""

    table: Table
    chunk_ids: tuple[int, ...]


CURRENT = "current"


@dataclass(slots=True)
class TrialEntry:
    """What this process holds of one trial, at ``version`` of incarnation ``incarnation``.

    ``slots`` maps a slot ("current", "initial", "s:<snapshot>") to the tables of it loaded so far;
    ``names`` is every table of the trial once known; ``hashes`` are the current slot's, once computed,
    and ``slot_hashes`` those of other slots taken when they were copied from the current one.
    """

    incarnation: str
    version: int
    slots: dict[str, dict[str, StoredTable]] = field(default_factory=dict[str, dict[str, StoredTable]])
    names: frozenset[str] | None = None
    hashes: Hashes | None = None
    slot_hashes: dict[str, Hashes | None] = field(default_factory=dict[str, Hashes | None])

    def tables(self, slot: str) -> dict[str, StoredTable]:
        return self.slots.setdefault(slot, {})

    def complete(self, slot: str) -> dict[str, Table] | None:
        """Every table of ``slot``, if all of them are loaded."""
        tables = self.slots.get(slot)
        if tables is None or self.names is None or not self.names <= tables.keys():
            return None
        return {name: tables[name].table for name in self.names}

    def advance(self, version: int) -> None:
        """The current slot was written (its tables updated by the caller): now at ``version``."""
        self.version = version
        self.hashes = None

    def restore(self, source: str, version: int) -> None:
        """The current slot became a copy of ``source``, at ``version``."""
        self.version = version
        self.slots[CURRENT] = dict(self.slots.get(source, {}))
        known = self.slot_hashes.get(source)
        self.hashes = Hashes(version, known.stable_hash, known.full_hash) if known is not None else None


class ChunkCache:
    """Trial entries, least recently used dropped first beyond ``max_trials``."""

    def __init__(self, max_trials: int = 256) -> None:
        self._entries: LRUCache[str, TrialEntry] = LRUCache(maxsize=max_trials)

    def get(self, trial_id: str, incarnation: str, version: int) -> TrialEntry:
        """The entry for exactly this incarnation and version; a new, empty one if this process's is stale."""
        entry = self._entries.get(trial_id)
        if entry is None or entry.incarnation != incarnation or entry.version != version:
            entry = TrialEntry(incarnation, version)
            self._entries[trial_id] = entry
        return entry

    def peek(self, trial_id: str, incarnation: str, version: int) -> TrialEntry | None:
        """The entry for exactly this incarnation and version, or None; never replaces one (a found
        one counts as used, like one :meth:`get` returns)."""
        entry = self._entries.get(trial_id)
        if entry is None or entry.incarnation != incarnation or entry.version != version:
            return None
        return entry

    def drop(self, trial_id: str) -> None:
        self._entries.pop(trial_id, None)

    def clear(self) -> None:
        self._entries.clear()


def new_chunks(
    before: StoredTable | None, after: Table, next_id: int
) -> tuple[tuple[int, ...], list[tuple[int, Chunk]]]:
    """Ids for ``after``'s chunks: kept chunks keep their ids, new ones get ids from ``next_id`` on.

    Returns (the ids in order, the new chunks with their ids).
    """
    known: Mapping[int, int] = (
        {id(chunk): chunk_id for chunk, chunk_id in zip(before.table.chunks, before.chunk_ids, strict=True)}
        if before is not None
        else {}
    )
    ids: list[int] = []
    created: list[tuple[int, Chunk]] = []
    for chunk in after.chunks:
        chunk_id = known.get(id(chunk))
        if chunk_id is None:
            chunk_id = next_id
            next_id += 1
            created.append((chunk_id, chunk))
        ids.append(chunk_id)
    return tuple(ids), created
