"""The PostgreSQL store (asyncpg): durable, shareable by several service processes.

Each table is one row holding its canonical JSON encoding (and its stable encoding when unstable fields
differ), under a slot: ``current``, ``initial`` or ``s:<snapshot>``. Reads and hashes stream those bytes;
a batch loads only the tables it touches, applies the same operations as the memory store and writes
them back. Every mutating call is one transaction that first locks the trial's row (``FOR UPDATE``), so
calls on one trial serialize across processes and a failed batch leaves nothing behind. A committed
call survives a kill of the service: PostgreSQL has it on disk before the answer goes out.

The schema comes from ``migrations/*.sql`` in this package, applied in name order on start under an
advisory lock, each once (recorded in ``tf_migrations``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from importlib.resources import files
from typing import Any, Protocol, cast

import asyncpg  # pyright: ignore[reportMissingTypeStubs]

from tolokaforge.db.errors import ConflictError, NotFoundError
from tolokaforge.db.operations import TableChange, apply_changes
from tolokaforge.db.record_schemas import RecordValidator, compile_schemas
from tolokaforge.db.state import encode_tables, hash_pieces
from tolokaforge.db.store import Hashes, TrialInit
from tolokaforge.db.tables import Table, build_table

__all__ = ["PostgresStore", "migrations"]

_MIGRATION_LOCK = 0x746F6C6F6B61  # any constant shared by every process migrating this database
_CURRENT, _INITIAL = "current", "initial"
_COPY_SLOT = """
    INSERT INTO tf_tables (trial_id, slot, table_name, shape, full_enc, stable_enc)
    SELECT trial_id, $3, table_name, shape, full_enc, stable_enc FROM tf_tables
    WHERE trial_id = $1 AND slot = $2
"""
Row = tuple[str, str, str, str, bytes, bytes | None]
Record = Mapping[str, Any]


class _Connection(Protocol):
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


class _Pool(Protocol):
    """The part of asyncpg's Pool used here."""

    def acquire(self) -> AbstractAsyncContextManager[_Connection]: ...
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


def _snapshot_slot(name: str) -> str:
    return "s:" + name


def _rows(trial_id: str, slot: str, tables: dict[str, Table], unstable: dict[str, list[str]]) -> list[Row]:
    rows: list[Row] = []
    for name, table in tables.items():
        fields = frozenset(unstable.get(name, ()))
        full = table.encode()
        stable = table.encode(fields) if fields else None
        rows.append((trial_id, slot, name, table.shape, full, stable if stable != full else None))
    return rows


class PostgresStore:
    """Trials in a PostgreSQL database reached by ``dsn``."""

    kind = "postgres"

    def __init__(self, dsn: str, *, max_connections: int = 8) -> None:
        self._dsn = dsn
        self._max = max_connections
        self._pool: _Pool | None = None
        self._validators: dict[str, dict[str, RecordValidator]] = {}

    async def start(self) -> None:
        create_pool: Any = asyncpg.create_pool  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        self._pool = cast(_Pool, await create_pool(self._dsn, min_size=1, max_size=self._max))
        async with self._pool.acquire() as conn, conn.transaction():
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

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    @property
    def pool(self) -> _Pool:
        if self._pool is None:
            raise RuntimeError("the postgres store is not started")
        return self._pool

    async def count_trials(self) -> int:
        return cast(int, await self.pool.fetchval("SELECT count(*) FROM tf_trials"))

    async def _lock(self, conn: _Connection, trial_id: str) -> Record:
        row = await conn.fetchrow(
            "SELECT version, schemas, unstable FROM tf_trials WHERE trial_id = $1 FOR UPDATE", trial_id
        )
        if row is None:
            raise NotFoundError(f"no trial {trial_id!r}", {"trial_id": trial_id})
        return row

    async def _hashes(self, conn: _Connection, trial_id: str, version: int) -> Hashes:
        rows = await conn.fetch(
            "SELECT table_name, full_enc, stable_enc FROM tf_tables WHERE trial_id = $1 AND slot = $2",
            trial_id,
            _CURRENT,
        )
        full = {row["table_name"]: (row["full_enc"],) for row in rows}
        stable = {row["table_name"]: (row["stable_enc"] or row["full_enc"],) for row in rows}
        stable_hash = hash_pieces(encode_tables(stable))
        same = all(row["stable_enc"] is None for row in rows)
        return Hashes(version, stable_hash, stable_hash if same else hash_pieces(encode_tables(full)))

    async def init_trial(self, trial_id: str, init: TrialInit) -> Hashes:
        unstable = {name: sorted(fields) for name, fields in init.unstable.items()}
        tables = dict(init.tables)
        async with self.pool.acquire() as conn, conn.transaction():
            created = await conn.fetchval(
                "INSERT INTO tf_trials (trial_id, version, schemas, unstable) VALUES ($1, 0, $2, $3) "
                "ON CONFLICT (trial_id) DO NOTHING RETURNING version",
                trial_id,
                json.dumps(list(init.schemas)),
                json.dumps(unstable),
            )
            if created is None:
                raise ConflictError(f"trial {trial_id!r} exists", {"trial_id": trial_id})
            current = _rows(trial_id, _CURRENT, tables, unstable)
            initial = [(trial_id, _INITIAL, *row[2:]) for row in current]
            await conn.copy_records_to_table(
                "tf_tables",
                records=[*current, *initial],
                columns=["trial_id", "slot", "table_name", "shape", "full_enc", "stable_enc"],
            )
            return await self._hashes(conn, trial_id, 0)

    async def read_state(
        self, trial_id: str, *, stable: bool, names: Sequence[str] | None
    ) -> tuple[int, bytes]:
        async with self.pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
            version = await conn.fetchval("SELECT version FROM tf_trials WHERE trial_id = $1", trial_id)
            if version is None:
                raise NotFoundError(f"no trial {trial_id!r}", {"trial_id": trial_id})
            rows = await conn.fetch(
                "SELECT table_name, full_enc, stable_enc FROM tf_tables "
                "WHERE trial_id = $1 AND slot = $2 AND ($3::text[] IS NULL OR table_name = ANY($3::text[]))",
                trial_id,
                _CURRENT,
                None if names is None else list(names),
            )
        encoded = {
            row["table_name"]: ((row["stable_enc"] if stable else None) or row["full_enc"],) for row in rows
        }
        for name in names or ():
            if name not in encoded:
                raise NotFoundError(f"no table {name!r} in trial {trial_id!r}", {"table_name": name})
        return cast(int, version), b"".join(encode_tables(encoded))

    async def hashes(self, trial_id: str) -> Hashes:
        async with self.pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
            version = await conn.fetchval("SELECT version FROM tf_trials WHERE trial_id = $1", trial_id)
            if version is None:
                raise NotFoundError(f"no trial {trial_id!r}", {"trial_id": trial_id})
            return await self._hashes(conn, trial_id, cast(int, version))

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
                raise ConflictError(
                    f"trial {trial_id!r} is at version {version}, not {expected_version}",
                    {"version": version, "expected_version": expected_version},
                )
            rows = await conn.fetch(
                "SELECT table_name, full_enc FROM tf_tables WHERE trial_id = $1 AND slot = $2 "
                "AND table_name = ANY($3::text[])",
                trial_id,
                _CURRENT,
                names,
            )
            loaded = {row["table_name"]: build_table(json.loads(row["full_enc"])) for row in rows}
            edited, applied = apply_changes(loaded.get, changes, self._compiled(trial["schemas"]))
            unstable = cast(dict[str, list[str]], json.loads(trial["unstable"]))
            await conn.executemany(
                "UPDATE tf_tables SET full_enc = $5, stable_enc = $6 "
                "WHERE trial_id = $1 AND slot = $2 AND table_name = $3 AND shape = $4",
                _rows(trial_id, _CURRENT, edited, unstable),
            )
            await conn.execute("UPDATE tf_trials SET version = $2 WHERE trial_id = $1", trial_id, version + 1)
        return version + 1, applied

    async def create_snapshot(self, trial_id: str, name: str) -> int:
        async with self.pool.acquire() as conn, conn.transaction():
            version = cast(int, (await self._lock(conn, trial_id))["version"])
            taken = await conn.fetchval(
                "INSERT INTO tf_snapshots (trial_id, snapshot_name, version) VALUES ($1, $2, $3) "
                "ON CONFLICT DO NOTHING RETURNING 1",
                trial_id,
                name,
                version,
            )
            if taken is None:
                raise ConflictError(f"snapshot {name!r} exists", {"snapshot_name": name})
            await conn.execute(_COPY_SLOT, trial_id, _CURRENT, _snapshot_slot(name))
            return version

    async def _replace_current(self, trial_id: str, source: str, snapshot: str | None) -> Hashes:
        async with self.pool.acquire() as conn, conn.transaction():
            version = cast(int, (await self._lock(conn, trial_id))["version"]) + 1
            if snapshot is not None:
                found = await conn.fetchval(
                    "SELECT 1 FROM tf_snapshots WHERE trial_id = $1 AND snapshot_name = $2",
                    trial_id,
                    snapshot,
                )
                if found is None:
                    raise NotFoundError(f"no snapshot {snapshot!r}", {"snapshot_name": snapshot})
            await conn.execute("DELETE FROM tf_tables WHERE trial_id = $1 AND slot = $2", trial_id, _CURRENT)
            await conn.execute(_COPY_SLOT, trial_id, source, _CURRENT)
            await conn.execute("UPDATE tf_trials SET version = $2 WHERE trial_id = $1", trial_id, version)
            return await self._hashes(conn, trial_id, version)

    async def restore_snapshot(self, trial_id: str, name: str) -> Hashes:
        return await self._replace_current(trial_id, _snapshot_slot(name), name)

    async def reset(self, trial_id: str) -> Hashes:
        return await self._replace_current(trial_id, _INITIAL, None)

    async def delete_snapshot(self, trial_id: str, name: str) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            await self._lock(conn, trial_id)
            gone = await conn.fetchval(
                "DELETE FROM tf_snapshots WHERE trial_id = $1 AND snapshot_name = $2 RETURNING 1",
                trial_id,
                name,
            )
            if gone is None:
                raise NotFoundError(f"no snapshot {name!r}", {"snapshot_name": name})
            await conn.execute(
                "DELETE FROM tf_tables WHERE trial_id = $1 AND slot = $2", trial_id, _snapshot_slot(name)
            )

    async def delete_trial(self, trial_id: str) -> None:
        gone = await self.pool.fetchval("DELETE FROM tf_trials WHERE trial_id = $1 RETURNING 1", trial_id)
        if gone is None:
            raise NotFoundError(f"no trial {trial_id!r}", {"trial_id": trial_id})
