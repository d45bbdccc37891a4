"""The PostgreSQL store's schema: the asyncpg surface it uses, its row shapes, and its migrations.

The schema comes from ``migrations/*.sql`` in this package, applied in name order on start under an
advisory lock (so several service processes starting together migrate once), each once, recorded in
``tf_migrations``. Tables of the 0001 layout (one row per whole table) are then converted to the 0002
layout of chunks and directories (postgres.py's docstring describes it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from importlib.resources import files
from typing import Any, Protocol, cast

from tolokaforge.db.tables import NO_FIELDS, Chunk, build_table

__all__ = [
    "CHUNK_COLUMNS",
    "DIRECTORY_COLUMNS",
    "ChunkRow",
    "Connection",
    "Pool",
    "Record",
    "chunk_row",
    "migrate",
    "migrations",
    "unstable_fields",
]

_MIGRATION_LOCK = 0x746F6C6F6B61  # any constant shared by every process migrating this database
CHUNK_COLUMNS = ["trial_id", "chunk_id", "full_enc", "stable_enc"]
DIRECTORY_COLUMNS = ["trial_id", "slot", "table_name", "shape", "chunk_ids"]
Record = Mapping[str, Any]
ChunkRow = tuple[str, int, bytes, bytes | None]


class Connection(Protocol):
    """The part of asyncpg's Connection used here (asyncpg ships no type information)."""

    async def execute(self, query: str, *args: Any) -> str: ...
    async def executemany(self, command: str, args: Iterable[Sequence[Any]]) -> None: ...
    async def fetch(self, query: str, *args: Any) -> list[Record]: ...
    async def fetchrow(self, query: str, *args: Any) -> Record | None: ...
    async def fetchval(self, query: str, *args: Any) -> Any: ...
    async def copy_records_to_table(
        self, table_name: str, *, records: Iterable[Sequence[Any]], columns: Sequence[str]
    ) -> str: ...
    def transaction(
        self, *, isolation: str | None = None, readonly: bool = False
    ) -> AbstractAsyncContextManager[Any]: ...


class Pool(Protocol):
    """The part of asyncpg's Pool used here."""

    def acquire(self) -> AbstractAsyncContextManager[Connection]: ...
    async def fetchval(self, query: str, *args: Any) -> Any: ...
    async def execute(self, query: str, *args: Any) -> str: ...
    async def close(self) -> None: ...


def migrations() -> list[tuple[str, str]]:
    """``(name, sql)`` of every migration shipped in this package, in the order they apply."""
    folder = files("tolokaforge.db").joinpath("migrations")
    entries = sorted(
        (entry for entry in folder.iterdir() if entry.name.endswith(".sql")), key=lambda entry: entry.name
    )
    return [(entry.name, entry.read_text(encoding="utf-8")) for entry in entries]


def unstable_fields(text: str) -> dict[str, frozenset[str]]:
    return {name: frozenset(fields) for name, fields in cast(dict[str, list[str]], json.loads(text)).items()}


def chunk_row(trial_id: str, chunk_id: int, chunk: Chunk, fields: frozenset[str]) -> ChunkRow:
    full = chunk.encoded(NO_FIELDS)
    stable = chunk.encoded(fields) if fields else None
    return (trial_id, chunk_id, full, stable if stable != full else None)


async def migrate(conn: Connection) -> None:
    """Apply every migration this database lacks, then convert tables of the 0001 layout (one transaction)."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS tf_migrations "
            "(name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {record["name"] for record in await conn.fetch("SELECT name FROM tf_migrations")}
        for name, sql in migrations():
            if name not in done:
                await conn.execute(sql)
                await conn.execute("INSERT INTO tf_migrations (name) VALUES ($1)", name)
        if await conn.fetchval("SELECT to_regclass('tf_tables') IS NOT NULL"):
            await _convert_whole_tables(conn)


async def _convert_whole_tables(conn: Connection) -> None:
    """Move tables stored whole (the 0001 layout, tf_tables) into chunks and directories, then drop tf_tables."""
    rows = await conn.fetch(
        "SELECT t.trial_id, t.slot, t.table_name, t.full_enc, r.unstable FROM tf_tables t "
        "JOIN tf_trials r USING (trial_id) ORDER BY t.trial_id, t.slot, t.table_name"
    )
    next_ids: dict[str, int] = {}
    chunk_rows: list[ChunkRow] = []
    directory: list[tuple[str, str, str, str, list[int]]] = []
    for row in rows:
        trial_id = cast(str, row["trial_id"])
        table = build_table(json.loads(row["full_enc"]))
        fields = unstable_fields(row["unstable"]).get(row["table_name"], NO_FIELDS)
        first = next_ids.get(trial_id, 0)
        ids = list(range(first, first + len(table.chunks)))
        next_ids[trial_id] = first + len(ids)
        chunk_rows.extend(
            chunk_row(trial_id, chunk_id, chunk, fields)
            for chunk_id, chunk in zip(ids, table.chunks, strict=True)
        )
        directory.append((trial_id, row["slot"], row["table_name"], table.shape, ids))
    await conn.copy_records_to_table("tf_chunks", records=chunk_rows, columns=CHUNK_COLUMNS)
    await conn.copy_records_to_table("tf_directory", records=directory, columns=DIRECTORY_COLUMNS)
    await conn.executemany("UPDATE tf_trials SET next_chunk = $2 WHERE trial_id = $1", list(next_ids.items()))
    await conn.execute("DROP TABLE tf_tables")
