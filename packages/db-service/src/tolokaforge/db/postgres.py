"""The PostgreSQL store (asyncpg): durable, shareable by several service processes.

Tables are stored as the memory store holds them (tables.py): immutable chunks of records, each kept as
its canonical encoding (and its stable encoding when unstable fields differ), and per slot --
``current``, ``initial`` or ``s:<snapshot>`` -- a directory listing each table's chunk ids in order
(migrations/0002). So a batch writes the chunks it changed and the new directory, never a whole table;
a snapshot, restore or reset copies directories and shares chunks; chunks no directory names any more
are deleted in the same transaction. Reads and hashes stream chunk encodings in directory order.

The chunked tables this process has read or written stay in a :class:`~tolokaforge.db.chunk_cache.ChunkCache`,
checked against the trial's incarnation and version under its row lock, so consecutive writes to a
large table load nothing from the database.

Every mutating call is one transaction that first locks the trial's row (``FOR UPDATE``), so calls on one
trial serialize across processes and a failed batch leaves nothing behind. A committed call survives a
kill of the service: PostgreSQL has it on disk before the answer goes out.

The schema is brought up to date on start by postgres_schema.py (migrations, the 0001 layout's conversion).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

import asyncpg  # pyright: ignore[reportMissingTypeStubs]

from tolokaforge.db.chunk_cache import CURRENT, ChunkCache, StoredTable, TrialEntry, new_chunks
from tolokaforge.db.errors import ConflictError, NotFoundError, VersionConflictError
from tolokaforge.db.operations import TableChange, apply_changes
from tolokaforge.db.postgres_schema import (
    CHUNK_COLUMNS,
    DIRECTORY_COLUMNS,
    ChunkRow,
    Connection,
    Pool,
    Record,
    chunk_row,
    migrate,
    unstable_fields,
)
from tolokaforge.db.record_schemas import RecordValidator, compile_schemas
from tolokaforge.db.state import TrialState, encode_tables, hash_pieces
from tolokaforge.db.store import Hashes, TrialInit
from tolokaforge.db.tables import NO_FIELDS, Chunk, Table, table_of_shape

__all__ = ["PostgresStore"]

_CURRENT, _INITIAL = CURRENT, "initial"
_COPY_SLOT = """
    INSERT INTO tf_directory (trial_id, slot, table_name, shape, chunk_ids)
    SELECT trial_id, $3, table_name, shape, chunk_ids FROM tf_directory WHERE trial_id = $1 AND slot = $2
"""
# Every chunk of the slot's tables (optionally only the named ones), in table name and directory order;
# an empty table gives one row with NULL chunk columns.
_SLOT_CHUNKS = """
    SELECT d.table_name, d.shape, u.chunk_id, c.full_enc, c.stable_enc
    FROM tf_directory d
    LEFT JOIN LATERAL unnest(d.chunk_ids) WITH ORDINALITY AS u (chunk_id, position) ON true
    LEFT JOIN tf_chunks c ON c.trial_id = d.trial_id AND c.chunk_id = u.chunk_id
    WHERE d.trial_id = $1 AND d.slot = $2 AND ($3::text[] IS NULL OR d.table_name = ANY($3::text[]))
    ORDER BY d.table_name, u.position
"""
# Chunks of the trial that no directory names (after a restore, reset or snapshot deletion).
_COLLECT_ALL = """
    DELETE FROM tf_chunks WHERE trial_id = $1
    AND chunk_id NOT IN (SELECT unnest(chunk_ids) FROM tf_directory WHERE trial_id = $1)
"""
_COLLECT_EVERY = 512
"""A write collects the trial's unnamed chunks when its chunk ids cross a multiple of this: replaced
chunks are garbage, but finding them scans every directory of the trial, so writes share that cost."""


def _snapshot_slot(name: str) -> str:
    return "s:" + name


def _hashes_of(version: int, tables: Mapping[str, Table], unstable: Mapping[str, frozenset[str]]) -> Hashes:
    state = TrialState(tables, unstable)
    return Hashes(version, state.stable_hash, state.full_hash)


class PostgresStore:
    """Trials in a PostgreSQL database reached by ``dsn``."""

    kind = "postgres"

    def __init__(self, dsn: str, *, max_connections: int = 8, cache_trials: int = 256) -> None:
        self._dsn = dsn
        self._max = max_connections
        self._pool: Pool | None = None
        self._validators: dict[str, dict[str, RecordValidator]] = {}
        self._cache = ChunkCache(cache_trials)

    async def start(self) -> None:
        create_pool: Any = asyncpg.create_pool  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        self._pool = cast(Pool, await create_pool(self._dsn, min_size=1, max_size=self._max))
        async with self._pool.acquire() as conn:
            await migrate(conn)

    async def close(self) -> None:
        self._cache.clear()
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    @property
    def pool(self) -> Pool:
        if self._pool is None:
            raise RuntimeError("the postgres store is not started")
        return self._pool

    async def count_trials(self) -> int:
        return cast(int, await self.pool.fetchval("SELECT count(*) FROM tf_trials"))

    async def _lock(self, conn: Connection, trial_id: str) -> Record:
        row = await conn.fetchrow(
            "SELECT version, schemas, unstable, next_chunk, created_at::text AS incarnation "
            "FROM tf_trials WHERE trial_id = $1 FOR UPDATE",
            trial_id,
        )
        if row is None:
            raise NotFoundError(f"no trial {trial_id!r}", {"trial_id": trial_id})
        return row

    async def _head(self, conn: Connection, trial_id: str) -> Record:
        """Version, incarnation and unstable fields, without locking (inside a read transaction)."""
        row = await conn.fetchrow(
            "SELECT version, unstable, created_at::text AS incarnation FROM tf_trials WHERE trial_id = $1",
            trial_id,
        )
        if row is None:
            raise NotFoundError(f"no trial {trial_id!r}", {"trial_id": trial_id})
        return row

    # -- reading chunked tables ---------------------------------------------------------------------
    async def _load(
        self,
        conn: Connection,
        trial_id: str,
        slot: str,
        names: Sequence[str] | None,
        unstable: Mapping[str, frozenset[str]],
    ) -> dict[str, StoredTable]:
        """The slot's tables (or only ``names``) rebuilt from their chunks."""
        chunks: dict[str, list[Chunk]] = {}
        ids: dict[str, list[int]] = {}
        shapes: dict[str, str] = {}
        for row in await conn.fetch(_SLOT_CHUNKS, trial_id, slot, None if names is None else list(names)):
            name = cast(str, row["table_name"])
            shape = shapes[name] = cast(str, row["shape"])
            found = chunks.setdefault(name, [])
            found_ids = ids.setdefault(name, [])
            if row["full_enc"] is not None:
                found.append(
                    Chunk.stored(shape, row["full_enc"], unstable.get(name, NO_FIELDS), row["stable_enc"])
                )
                found_ids.append(cast(int, row["chunk_id"]))
        return {
            name: StoredTable(table_of_shape(shape, tuple(chunks[name])), tuple(ids[name]))
            for name, shape in shapes.items()
        }

    async def _encodings(
        self, conn: Connection, trial_id: str, names: Sequence[str] | None
    ) -> tuple[dict[str, tuple[bytes]], dict[str, tuple[bytes]]]:
        """Each current table's (full, stable) canonical encoding, straight from the chunk rows."""
        full_parts: dict[str, list[bytes]] = {}
        stable_parts: dict[str, list[bytes]] = {}
        brackets: dict[str, tuple[bytes, bytes]] = {}
        for row in await conn.fetch(_SLOT_CHUNKS, trial_id, _CURRENT, None if names is None else list(names)):
            name = cast(str, row["table_name"])
            brackets[name] = (b"[", b"]") if row["shape"] == "list" else (b"{", b"}")
            full = full_parts.setdefault(name, [])
            stable = stable_parts.setdefault(name, [])
            if row["full_enc"] is not None:
                full.append(row["full_enc"])
                stable.append(row["stable_enc"] or row["full_enc"])

        def joined(parts: dict[str, list[bytes]]) -> dict[str, tuple[bytes]]:
            return {
                name: (brackets[name][0] + b",".join(pieces) + brackets[name][1],)
                for name, pieces in parts.items()
            }

        return joined(full_parts), joined(stable_parts)

    async def _current_hashes(
        self, conn: Connection, trial_id: str, entry: TrialEntry, unstable: Mapping[str, frozenset[str]]
    ) -> Hashes:
        if entry.hashes is not None:
            return entry.hashes
        cached = entry.complete(_CURRENT)
        if cached is not None:
            hashes = _hashes_of(entry.version, cached, unstable)
        else:
            full, stable = await self._encodings(conn, trial_id, None)
            stable_hash = hash_pieces(encode_tables(stable))
            full_hash = stable_hash if full == stable else hash_pieces(encode_tables(full))
            hashes = Hashes(entry.version, stable_hash, full_hash)
        entry.hashes = hashes
        return hashes

    # -- the Store interface ------------------------------------------------------------------------
    async def init_trial(self, trial_id: str, init: TrialInit) -> Hashes:
        unstable = {name: sorted(fields) for name, fields in init.unstable.items()}
        tables = dict(init.tables)
        chunk_rows: list[ChunkRow] = []
        directory: list[tuple[str, str, str, str, list[int]]] = []
        stored: dict[str, StoredTable] = {}
        for name in sorted(tables):
            table = tables[name]
            fields = init.unstable.get(name, NO_FIELDS)
            first = len(chunk_rows)
            ids = tuple(range(first, first + len(table.chunks)))
            chunk_rows.extend(
                chunk_row(trial_id, chunk_id, chunk, fields)
                for chunk_id, chunk in zip(ids, table.chunks, strict=True)
            )
            for slot in (_CURRENT, _INITIAL):
                directory.append((trial_id, slot, name, table.shape, list(ids)))
            stored[name] = StoredTable(table, ids)
        async with self.pool.acquire() as conn, conn.transaction():
            # A trial whose owner's lease ran out is reclaimed: deleted (chunks and directories cascade)
            # in the same transaction that creates its successor.
            await conn.execute(
                "DELETE FROM tf_trials WHERE trial_id = $1 AND owner IS NOT NULL AND lease_expires <= now()",
                trial_id,
            )
            incarnation = await conn.fetchval(
                "INSERT INTO tf_trials (trial_id, version, schemas, unstable, next_chunk, owner, "
                "lease_seconds, lease_expires) VALUES ($1, 0, $2, $3, $4, $5, $6, "
                "now() + make_interval(secs => $6)) "
                "ON CONFLICT (trial_id) DO NOTHING RETURNING created_at::text",
                trial_id,
                json.dumps(list(init.schemas)),
                json.dumps(unstable),
                len(chunk_rows),
                init.owner,
                init.lease_seconds,
            )
            if incarnation is None:
                raise await _held(conn, trial_id)
            await conn.copy_records_to_table("tf_chunks", records=chunk_rows, columns=CHUNK_COLUMNS)
            await conn.copy_records_to_table("tf_directory", records=directory, columns=DIRECTORY_COLUMNS)
        hashes = _hashes_of(0, tables, init.unstable)
        entry = self._cache.get(trial_id, cast(str, incarnation), 0)
        entry.names = frozenset(stored)
        entry.slots = {_CURRENT: stored, _INITIAL: dict(stored)}
        entry.hashes = hashes
        entry.slot_hashes[_INITIAL] = hashes
        return hashes

    async def initial_tables(self, full_hash: str) -> Mapping[str, Table]:
        # Chunks are stored per trial, so there is nothing to share: callers send the tables.
        raise NotFoundError(
            "this store (postgres) holds no shared initial states; send the tables", {"from_state": full_hash}
        )

    async def read_state(
        self, trial_id: str, *, stable: bool, names: Sequence[str] | None
    ) -> tuple[int, bytes]:
        async with self.pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
            head = await self._head(conn, trial_id)
            version = cast(int, head["version"])
            unstable = unstable_fields(head["unstable"])
            entry = self._cache.peek(trial_id, head["incarnation"], version)
            cached = entry.complete(_CURRENT) if entry is not None else None
            if cached is not None:
                chosen = cached if names is None else {name: cached[name] for name in names if name in cached}
                encoded = {
                    name: tuple(table.pieces(unstable.get(name, NO_FIELDS) if stable else NO_FIELDS))
                    for name, table in chosen.items()
                }
            else:
                full, stable_encodings = await self._encodings(conn, trial_id, names)
                encoded = stable_encodings if stable else full
        for name in names or ():
            if name not in encoded:
                raise NotFoundError(f"no table {name!r} in trial {trial_id!r}", {"table_name": name})
        return version, b"".join(encode_tables(encoded))

    async def hashes(self, trial_id: str) -> Hashes:
        async with self.pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
            head = await self._head(conn, trial_id)
            version = cast(int, head["version"])
            entry = self._cache.peek(trial_id, head["incarnation"], version)
            if entry is None:
                entry = TrialEntry(head["incarnation"], version)  # not kept: another process's version
            return await self._current_hashes(conn, trial_id, entry, unstable_fields(head["unstable"]))

    def _compiled(self, schemas_text: str) -> dict[str, RecordValidator]:
        compiled = self._validators.get(schemas_text)
        if compiled is None:
            if len(self._validators) > 256:  # bounded: one entry per distinct schema set in use
                self._validators.clear()
            compiled = compile_schemas(json.loads(schemas_text))
            self._validators[schemas_text] = compiled
        return compiled

    async def patch(
        self, trial_id: str, changes: Sequence[TableChange], expected_version: int | None
    ) -> tuple[int, int]:
        names = sorted({change.table_name for change in changes})
        async with self.pool.acquire() as conn, conn.transaction():
            trial = await self._lock(conn, trial_id)
            version = cast(int, trial["version"])
            if expected_version is not None and expected_version != version:
                raise VersionConflictError(
                    f"trial {trial_id!r} is at version {version}, not {expected_version}",
                    {"version": version, "expected_version": expected_version},
                )
            unstable = unstable_fields(trial["unstable"])
            entry = self._cache.get(trial_id, trial["incarnation"], version)
            current = entry.tables(_CURRENT)
            missing = [name for name in names if name not in current]
            if missing:
                current.update(await self._load(conn, trial_id, _CURRENT, missing, unstable))

            def lookup(name: str) -> Table | None:
                found = current.get(name)
                return found.table if found is not None else None

            edited, applied = apply_changes(lookup, changes, self._compiled(trial["schemas"]))
            next_id = cast(int, trial["next_chunk"])
            written: dict[str, StoredTable] = {}
            chunk_rows: list[ChunkRow] = []
            for name, table in edited.items():
                before = current.get(name)
                ids, created = new_chunks(before, table, next_id)
                next_id += len(created)
                fields = unstable.get(name, NO_FIELDS)
                chunk_rows.extend(chunk_row(trial_id, chunk_id, chunk, fields) for chunk_id, chunk in created)
                written[name] = StoredTable(table, ids)
            if chunk_rows:
                await conn.copy_records_to_table("tf_chunks", records=chunk_rows, columns=CHUNK_COLUMNS)
            await self._write_directories(conn, trial_id, current, written)
            if next_id // _COLLECT_EVERY != cast(int, trial["next_chunk"]) // _COLLECT_EVERY:
                await conn.execute(_COLLECT_ALL, trial_id)
            await conn.execute(
                "UPDATE tf_trials SET version = $2, next_chunk = $3 WHERE trial_id = $1",
                trial_id,
                version + 1,
                next_id,
            )
        entry.advance(version + 1)
        current.update(written)
        return version + 1, applied

    @staticmethod
    async def _write_directories(
        conn: Connection, trial_id: str, before: Mapping[str, StoredTable], after: Mapping[str, StoredTable]
    ) -> None:
        """Store the new chunk lists of the current slot's written tables.

        An edit that kept the chunk count (the common one: records replaced in place) sets only the
        changed elements, so the directory of a large table is never sent or re-encoded whole.
        """
        whole: list[tuple[str, str, str, list[int]]] = []
        elements: list[tuple[str, str, str, int, int]] = []
        for name, stored in after.items():
            old = before.get(name)
            if old is not None and len(old.chunk_ids) == len(stored.chunk_ids):
                changed = [
                    (trial_id, _CURRENT, name, position + 1, chunk_id)  # SQL arrays count from 1
                    for position, (was, chunk_id) in enumerate(
                        zip(old.chunk_ids, stored.chunk_ids, strict=True)
                    )
                    if was != chunk_id
                ]
                if len(changed) <= 8:
                    elements.extend(changed)
                    continue
            whole.append((trial_id, _CURRENT, name, list(stored.chunk_ids)))
        if whole:
            await conn.executemany(
                "UPDATE tf_directory SET chunk_ids = $4 WHERE trial_id = $1 AND slot = $2 AND table_name = $3",
                whole,
            )
        if elements:
            await conn.executemany(
                "UPDATE tf_directory SET chunk_ids[$4] = $5 WHERE trial_id = $1 AND slot = $2 AND table_name = $3",
                elements,
            )

    async def create_snapshot(self, trial_id: str, name: str) -> int:
        slot = _snapshot_slot(name)
        async with self.pool.acquire() as conn, conn.transaction():
            trial = await self._lock(conn, trial_id)
            version = cast(int, trial["version"])
            taken = await conn.fetchval(
                "INSERT INTO tf_snapshots (trial_id, snapshot_name, version) VALUES ($1, $2, $3) "
                "ON CONFLICT DO NOTHING RETURNING 1",
                trial_id,
                name,
                version,
            )
            if taken is None:
                raise ConflictError(f"snapshot {name!r} exists", {"snapshot_name": name})
            await conn.execute(_COPY_SLOT, trial_id, _CURRENT, slot)
        entry = self._cache.peek(trial_id, trial["incarnation"], version)
        if entry is not None:
            entry.slots[slot] = dict(entry.tables(_CURRENT))
            entry.slot_hashes[slot] = entry.hashes
        return version

    async def _replace_current(self, trial_id: str, source: str, snapshot: str | None) -> Hashes:
        async with self.pool.acquire() as conn, conn.transaction():
            trial = await self._lock(conn, trial_id)
            version = cast(int, trial["version"]) + 1
            if snapshot is not None:
                found = await conn.fetchval(
                    "SELECT 1 FROM tf_snapshots WHERE trial_id = $1 AND snapshot_name = $2",
                    trial_id,
                    snapshot,
                )
                if found is None:
                    raise NotFoundError(f"no snapshot {snapshot!r}", {"snapshot_name": snapshot})
            await conn.execute(
                "DELETE FROM tf_directory WHERE trial_id = $1 AND slot = $2", trial_id, _CURRENT
            )
            await conn.execute(_COPY_SLOT, trial_id, source, _CURRENT)
            await conn.execute(_COLLECT_ALL, trial_id)
            await conn.execute("UPDATE tf_trials SET version = $2 WHERE trial_id = $1", trial_id, version)
            entry = self._cache.get(trial_id, trial["incarnation"], version - 1)
            entry.restore(source, version)
            hashes = await self._current_hashes(conn, trial_id, entry, unstable_fields(trial["unstable"]))
        return hashes

    async def restore_snapshot(self, trial_id: str, name: str) -> Hashes:
        return await self._replace_current(trial_id, _snapshot_slot(name), name)

    async def reset(self, trial_id: str) -> Hashes:
        return await self._replace_current(trial_id, _INITIAL, None)

    async def delete_snapshot(self, trial_id: str, name: str) -> None:
        slot = _snapshot_slot(name)
        async with self.pool.acquire() as conn, conn.transaction():
            trial = await self._lock(conn, trial_id)
            gone = await conn.fetchval(
                "DELETE FROM tf_snapshots WHERE trial_id = $1 AND snapshot_name = $2 RETURNING 1",
                trial_id,
                name,
            )
            if gone is None:
                raise NotFoundError(f"no snapshot {name!r}", {"snapshot_name": name})
            await conn.execute("DELETE FROM tf_directory WHERE trial_id = $1 AND slot = $2", trial_id, slot)
            await conn.execute(_COLLECT_ALL, trial_id)
        entry = self._cache.peek(trial_id, trial["incarnation"], cast(int, trial["version"]))
        if entry is not None:
            entry.slots.pop(slot, None)
            entry.slot_hashes.pop(slot, None)

    async def delete_trial(self, trial_id: str, owner: str | None = None) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            gone = await conn.fetchval(
                "DELETE FROM tf_trials WHERE trial_id = $1 AND ($2::text IS NULL OR owner IS NULL "
                "OR owner = $2 OR lease_expires <= now()) RETURNING 1",
                trial_id,
                owner,
            )
            exists = gone is None and await conn.fetchval(
                "SELECT 1 FROM tf_trials WHERE trial_id = $1", trial_id
            )
            if exists:
                raise await _held(conn, trial_id)
        self._cache.drop(trial_id)
        if gone is None:
            raise NotFoundError(f"no trial {trial_id!r}", {"trial_id": trial_id})

    async def renew_lease(self, owner: str, trial_ids: Sequence[str] | None = None) -> tuple[int, list[str]]:
        if trial_ids is None:
            renewed = await self.pool.execute(
                "UPDATE tf_trials SET lease_expires = now() + make_interval(secs => lease_seconds) "
                "WHERE owner = $1",
                owner,
            )
            return int(renewed.rsplit(" ", 1)[-1]), []
        named = list(dict.fromkeys(trial_ids))
        # One statement: the primary key finds each named row; rows of the owner not named are untouched.
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(
                "UPDATE tf_trials SET lease_expires = now() + make_interval(secs => lease_seconds) "
                "WHERE owner = $1 AND trial_id = ANY($2::text[]) RETURNING trial_id",
                owner,
                named,
            )
        renewed_ids = {cast(str, row["trial_id"]) for row in rows}
        return len(renewed_ids), [trial_id for trial_id in named if trial_id not in renewed_ids]


async def _held(conn: Connection, trial_id: str) -> ConflictError:
    row = await conn.fetchrow(
        "SELECT owner, extract(epoch FROM lease_expires - now())::float8 AS left FROM tf_trials "
        "WHERE trial_id = $1",
        trial_id,
    )
    if row is None or row["owner"] is None:
        return ConflictError(f"trial {trial_id!r} exists", {"trial_id": trial_id, "owner": None})
    return ConflictError(
        f"trial {trial_id!r} exists, held by {row['owner']!r} (lease expires in {row['left']:.1f}s)",
        {"trial_id": trial_id, "owner": row["owner"]},
    )
