"""The PostgreSQL store's chunked layout: what a write stores, what is collected, two processes on one
database, and tables stored whole by the 0001 layout converted on start."""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from typing import Any

import asyncpg  # pyright: ignore[reportMissingTypeStubs]
import pytest

from tolokaforge.db.memory import MemoryStore
from tolokaforge.db.operations import TableChange
from tolokaforge.db.postgres import PostgresStore
from tolokaforge.db.postgres_schema import migrations
from tolokaforge.db.store import Store, TrialInit
from tolokaforge.db.tables import CHUNK, build_table

from .conftest import ADMIN_DSN, with_database

ROWS = 10_000  # 157 chunks: large enough that a whole-table write would show


def _records(count: int) -> list[dict[str, Any]]:
    return [{"id": f"R-{i}", "value": i, "at": f"t{i}"} for i in range(count)]


def _init(records: list[dict[str, Any]], keyed: dict[str, Any] | None = None) -> TrialInit:
    tables = {"rows": build_table(records), "users": build_table(keyed or {"u1": {"name": "a"}})}
    return TrialInit(tables, {"rows": frozenset({"at"})}, [], {})


def _upsert(index: int, record: dict[str, Any]) -> list[TableChange]:
    return [TableChange("rows", [{"op": "upsert", "index": index, "record": record}])]


async def _sql(dsn: str, query: str, *args: Any) -> Any:
    connect: Any = asyncpg.connect  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    connection: Any = await connect(dsn)
    try:
        if not args and ";" in query.strip().rstrip(";"):
            return await connection.execute(query)  # a script of several statements
        return await connection.fetchval(query, *args)
    finally:
        await connection.close()


async def _chunk_count(dsn: str, trial_id: str) -> int:
    return int(await _sql(dsn, "SELECT count(*) FROM tf_chunks WHERE trial_id = $1", trial_id))


async def _unnamed_chunks(dsn: str, trial_id: str) -> int:
    return int(
        await _sql(
            dsn,
            "SELECT count(*) FROM tf_chunks WHERE trial_id = $1 AND chunk_id NOT IN "
            "(SELECT unnest(chunk_ids) FROM tf_directory WHERE trial_id = $1)",
            trial_id,
        )
    )


@pytest.fixture
async def postgres(pg_dsn: str) -> AsyncIterator[PostgresStore]:
    store = PostgresStore(pg_dsn)
    await store.start()
    yield store
    await store.close()


async def _same_as_memory(store: Store, memory: Store, trial_id: str) -> None:
    """Both stores hold the same state: same encodings (full and stable) and hashes."""
    for stable in (False, True):
        assert (await store.read_state(trial_id, stable=stable, names=None))[1] == (
            await memory.read_state(trial_id, stable=stable, names=None)
        )[1]
    mine, theirs = await store.hashes(trial_id), await memory.hashes(trial_id)
    assert (mine.stable_hash, mine.full_hash) == (theirs.stable_hash, theirs.full_hash)


async def test_a_write_into_a_large_table_stores_only_the_chunk_it_changed(
    postgres: PostgresStore, pg_dsn: str
) -> None:
    trial_id = f"w-{secrets.token_hex(4)}"
    memory = MemoryStore()
    await postgres.init_trial(trial_id, _init(_records(ROWS)))
    await memory.init_trial(trial_id, _init(_records(ROWS)))
    stored = await _chunk_count(pg_dsn, trial_id)
    assert stored == -(-ROWS // CHUNK) + 1  # every chunk once, shared by the current and initial slots
    for store in (postgres, memory):
        await store.patch(trial_id, _upsert(4321, {"id": "R-4321", "value": -1, "at": "now"}), None)
    assert await _chunk_count(pg_dsn, trial_id) == stored + 1
    await _same_as_memory(postgres, memory, trial_id)


async def test_replaced_chunks_are_collected(postgres: PostgresStore, pg_dsn: str) -> None:
    trial_id = f"gc-{secrets.token_hex(4)}"
    memory = MemoryStore()
    for store in (postgres, memory):
        await store.init_trial(trial_id, _init(_records(3 * CHUNK)))
        await store.create_snapshot(trial_id, "before")
    for n in range(600):  # crosses a collection point
        for store in (postgres, memory):
            await store.patch(trial_id, _upsert(n % (3 * CHUNK), {"id": "x", "value": n, "at": "-"}), None)
    assert await _unnamed_chunks(pg_dsn, trial_id) < 600 - 500  # collected on the way
    await _same_as_memory(postgres, memory, trial_id)
    for store in (postgres, memory):
        await store.restore_snapshot(trial_id, "before")
    assert await _unnamed_chunks(pg_dsn, trial_id) == 0
    await _same_as_memory(postgres, memory, trial_id)
    for store in (postgres, memory):
        await store.delete_snapshot(trial_id, "before")
        await store.reset(trial_id)
    assert await _unnamed_chunks(pg_dsn, trial_id) == 0
    assert await _chunk_count(pg_dsn, trial_id) == 3 + 1  # only the initial chunks remain (rows, users)
    await _same_as_memory(postgres, memory, trial_id)


async def test_two_processes_on_one_database_never_serve_each_other_stale_tables(pg_dsn: str) -> None:
    """Each store instance keeps its own cache, as two service processes would."""
    first, second = PostgresStore(pg_dsn), PostgresStore(pg_dsn)
    await first.start()
    await second.start()
    memory = MemoryStore()
    trial_id = f"two-{secrets.token_hex(4)}"
    try:
        await first.init_trial(trial_id, _init(_records(2 * CHUNK)))
        await memory.init_trial(trial_id, _init(_records(2 * CHUNK)))
        writes = [first, second, first, second, second, first]
        for n, store in enumerate(writes):
            for target in (store, memory):
                await target.patch(trial_id, _upsert(n, {"id": f"w{n}", "value": n, "at": "-"}), None)
        await _same_as_memory(first, memory, trial_id)
        await _same_as_memory(second, memory, trial_id)
        # The trial deleted and created again by the other process is a new trial for this one.
        await second.delete_trial(trial_id)
        await memory.delete_trial(trial_id)
        for store in (second, memory):
            await store.init_trial(trial_id, _init(_records(CHUNK)))
        for store in (first, memory):
            await store.patch(trial_id, _upsert(1, {"id": "again", "value": 0, "at": "-"}), None)
        await _same_as_memory(first, memory, trial_id)
        await _same_as_memory(second, memory, trial_id)
    finally:
        await first.close()
        await second.close()


async def test_tables_stored_whole_by_the_first_layout_are_converted_on_start() -> None:
    name = f"tf_db_legacy_{secrets.token_hex(4)}"
    await _sql(ADMIN_DSN, f'CREATE DATABASE "{name}"')
    dsn = with_database(ADMIN_DSN, name)
    try:
        first_name, first_sql = migrations()[0]
        assert first_name == "0001_initial.sql"
        await _sql(dsn, first_sql)
        await _sql(
            dsn,
            "CREATE TABLE tf_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
        )
        await _sql(dsn, "INSERT INTO tf_migrations (name) VALUES ($1)", first_name)
        records = _records(2 * CHUNK + 5)
        keyed = {f"u{i}": {"name": f"user {i}"} for i in range(70)}
        init = _init(records, keyed)
        await _sql(
            dsn,
            "INSERT INTO tf_trials (trial_id, version, schemas, unstable) VALUES ('old', 7, '[]', $1)",
            json.dumps({"rows": ["at"]}),
        )
        for slot in ("current", "initial", "s:kept"):
            for table_name, table in init.tables.items():
                fields = init.unstable.get(table_name, frozenset())
                stable = table.encode(fields) if fields else None
                await _sql(
                    dsn,
                    "INSERT INTO tf_tables VALUES ('old', $1, $2, $3, $4, $5)",
                    slot,
                    table_name,
                    table.shape,
                    table.encode(),
                    stable,
                )
        await _sql(dsn, "INSERT INTO tf_snapshots VALUES ('old', 'kept', 3)")
        store = PostgresStore(dsn)
        await store.start()
        try:
            assert await _sql(dsn, "SELECT to_regclass('tf_tables') IS NULL")
            memory = MemoryStore()
            await memory.init_trial("old", _init(records, keyed))
            await _same_as_memory(store, memory, "old")
            assert (await store.hashes("old")).version == 7
            for target in (store, memory):
                await target.patch("old", _upsert(0, {"id": "new", "value": 1, "at": "-"}), None)
            await _same_as_memory(store, memory, "old")
            await store.restore_snapshot("old", "kept")
            await memory.reset("old")
            await _same_as_memory(store, memory, "old")
        finally:
            await store.close()
    finally:
        await _sql(ADMIN_DSN, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
