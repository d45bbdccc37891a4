"""The shared suite: every store, through both clients, behaves the same way."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from tolokaforge.core.stable_hash import canonical_bytes, full_hash, stable_hash
from tolokaforge.db.client import StateClient
from tolokaforge.db.errors import ConflictError, NotFoundError, ValidationFailedError

TABLES: dict[str, Any] = {
    "users": {"U-1": {"name": "Mia", "tier": "gold", "seen": 1}, "U-2": {"name": "Zoë", "tier": "basic"}},
    "orders": [
        {"id": 1, "user": "U-1", "total": 10.5, "created_at": "t0"},
        {"id": 2, "user": "U-2", "total": 0.1},
    ],
    "empty_list": [],
    "empty_keyed": {},
}
UNSTABLE = [
    {"table_name": "orders", "field_name": "created_at", "reason": "timestamp"},
    {"table_name": "users", "field_name": "seen"},
]
UNSTABLE_PAIRS = [("orders", "created_at"), ("users", "seen")]


async def _init(client: StateClient, trial_id: str, tables: dict[str, Any] | None = None) -> None:
    await client.init_trial(trial_id, copy.deepcopy(tables or TABLES), unstable_fields=UNSTABLE)


def _ops(table: str, *operations: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"table_name": table, "operations": list(operations)}]


async def test_init_preserves_shapes_and_hashes_like_the_reference(
    client: StateClient, new_trial_id: Callable[[], str]
) -> None:
    trial = new_trial_id()
    hashes = await client.init_trial(trial, copy.deepcopy(TABLES), unstable_fields=UNSTABLE)
    assert hashes.version == 0
    assert hashes.stable_hash == stable_hash(TABLES, UNSTABLE_PAIRS)
    assert hashes.full_hash == full_hash(TABLES)
    state = await client.get_state(trial)
    assert state.tables == TABLES
    assert isinstance(state.tables["empty_list"], list) and isinstance(state.tables["empty_keyed"], dict)
    assert canonical_bytes(state.tables) == canonical_bytes(TABLES)


async def test_stable_state_drops_unstable_fields_from_every_record(
    client: StateClient, new_trial_id: Callable[[], str]
) -> None:
    trial = new_trial_id()
    await _init(client, trial)
    stable = await client.get_state(trial, stable=True)
    assert "created_at" not in stable.tables["orders"][0]
    assert "seen" not in stable.tables["users"]["U-1"]
    assert stable.tables["orders"][1]["total"] == 0.1
    only = await client.get_state(trial, tables=["orders"], stable=True)
    assert set(only.tables) == {"orders"}
    with pytest.raises(NotFoundError):
        await client.get_state(trial, tables=["nope"])


async def test_every_operation_kind_and_selector(
    client: StateClient, new_trial_id: Callable[[], str]
) -> None:
    trial = new_trial_id()
    await _init(client, trial)
    version = await client.patch(
        trial,
        [
            {
                "table_name": "orders",
                "operations": [
                    {"op": "insert", "record": {"id": 0}, "index": 0},
                    {"op": "insert", "record": {"id": 3, "user": "U-1"}},
                    {"op": "update", "where": {"user": "U-1"}, "set": {"flag": True}, "unset": ["total"]},
                    {"op": "delete", "index": 2},
                    {"op": "upsert", "where": {"id": 9}, "record": {"id": 9}},
                    {"op": "upsert", "index": 0, "record": {"id": -1}},
                ],
            },
            {
                "table_name": "users",
                "operations": [
                    {"op": "insert", "key": "U-0", "record": {"name": "Ann"}},
                    {"op": "update", "key": "U-2", "set": {"tier": "gold"}},
                    {"op": "delete", "where": {"name": "Mia"}},
                    {"op": "upsert", "key": "U-3", "record": {"name": "New"}},
                ],
            },
        ],
    )
    assert version == 1
    state = await client.get_state(trial)
    assert state.tables["orders"] == [
        {"id": -1},
        {"id": 1, "user": "U-1", "created_at": "t0", "flag": True},
        {"id": 3, "user": "U-1", "flag": True},
        {"id": 9},
    ]
    assert state.tables["users"] == {
        "U-0": {"name": "Ann"},
        "U-2": {"name": "Zoë", "tier": "gold"},
        "U-3": {"name": "New"},
    }
    assert (await client.get_hashes(trial)).stable_hash == stable_hash(state.tables, UNSTABLE_PAIRS)


async def test_selector_errors(client: StateClient, new_trial_id: Callable[[], str]) -> None:
    trial = new_trial_id()
    await _init(client, trial)
    cases: list[tuple[type[Exception], str, dict[str, Any]]] = [
        (NotFoundError, "orders", {"op": "update", "index": 5, "set": {}}),
        (NotFoundError, "orders", {"op": "delete", "where": {"id": 77}}),
        (NotFoundError, "users", {"op": "delete", "key": "U-9"}),
        (ConflictError, "users", {"op": "insert", "key": "U-1", "record": {}}),
        (ConflictError, "orders", {"op": "upsert", "where": {"total": {"x": 1}} | {}, "record": {}}),
        (ValidationFailedError, "orders", {"op": "update", "key": "K", "set": {}}),
        (ValidationFailedError, "users", {"op": "update", "index": 0, "set": {}}),
        (ValidationFailedError, "users", {"op": "insert", "record": {}}),
        (ValidationFailedError, "orders", {"op": "insert", "record": {}, "index": 3}),
        (ValidationFailedError, "orders", {"op": "delete"}),
        (ValidationFailedError, "orders", {"op": "delete", "index": 0, "where": {"id": 1}}),
        (ValidationFailedError, "orders", {"op": "truncate"}),
        (ValidationFailedError, "orders", {"op": "delete", "index": False}),
    ]
    # An ambiguous upsert needs two matches: make both orders share a field.
    await client.patch(trial, _ops("orders", {"op": "update", "where": {"user": "U-1"}, "set": {"k": 1}}))
    await client.patch(trial, _ops("orders", {"op": "update", "where": {"user": "U-2"}, "set": {"k": 1}}))
    cases[4] = (ConflictError, "orders", {"op": "upsert", "where": {"k": 1}, "record": {}})
    before = await client.get_hashes(trial)
    for error, table, operation in cases:
        with pytest.raises(error):
            await client.patch(trial, _ops(table, operation))
    assert await client.get_hashes(trial) == before


async def test_json_equality_in_where_keeps_booleans_apart(
    client: StateClient, new_trial_id: Callable[[], str]
) -> None:
    trial = new_trial_id()
    await client.init_trial(trial, {"t": [{"v": True}, {"v": 1}, {"v": 1.0}, {"v": "1"}]})
    await client.patch(trial, _ops("t", {"op": "delete", "where": {"v": 1}}))
    assert (await client.get_state(trial)).tables["t"] == [{"v": True}, {"v": "1"}]


async def test_a_failed_batch_changes_nothing(client: StateClient, new_trial_id: Callable[[], str]) -> None:
    trial = new_trial_id()
    await _init(client, trial)
    before_state = await client.get_state(trial)
    before = await client.get_hashes(trial)
    with pytest.raises(NotFoundError):
        await client.patch(
            trial,
            [
                {"table_name": "orders", "operations": [{"op": "insert", "record": {"id": 5}}]},
                {"table_name": "users", "operations": [{"op": "delete", "key": "U-1"}]},
                {"table_name": "missing_table", "operations": [{"op": "delete", "index": 0}]},
            ],
        )
    assert await client.get_hashes(trial) == before
    assert (await client.get_state(trial)).tables == before_state.tables


async def test_versions_bump_on_every_mutation_and_guard_stale_writes(
    client: StateClient, new_trial_id: Callable[[], str]
) -> None:
    trial = new_trial_id()
    await _init(client, trial)
    assert await client.patch(trial, _ops("orders", {"op": "delete", "index": 0}), expected_version=0) == 1
    with pytest.raises(ConflictError):
        await client.patch(trial, _ops("orders", {"op": "delete", "index": 0}), expected_version=0)
    assert await client.create_snapshot(trial, "s") == 1
    assert (await client.restore_snapshot(trial, "s")).version == 2
    assert (await client.reset(trial)).version == 3


async def test_restore_after_several_mutations_returns_the_snapshot_exactly(
    client: StateClient, new_trial_id: Callable[[], str]
) -> None:
    trial = new_trial_id()
    await _init(client, trial)
    await client.patch(trial, _ops("orders", {"op": "insert", "record": {"id": 7, "note": "☃ 6.19e-05"}}))
    saved_state = await client.get_state(trial)
    saved = await client.get_hashes(trial)
    await client.create_snapshot(trial, "pre_golden")
    for index in range(5):
        await client.patch(
            trial, _ops("users", {"op": "upsert", "key": f"K-{index}", "record": {"n": index}})
        )
        if index < 3:
            await client.patch(trial, _ops("orders", {"op": "delete", "index": 0}))
    restored = await client.restore_snapshot(trial, "pre_golden")
    assert (restored.stable_hash, restored.full_hash) == (saved.stable_hash, saved.full_hash)
    assert canonical_bytes((await client.get_state(trial)).tables) == canonical_bytes(saved_state.tables)
    with pytest.raises(ConflictError):
        await client.create_snapshot(trial, "pre_golden")
    await client.delete_snapshot(trial, "pre_golden")
    with pytest.raises(NotFoundError):
        await client.restore_snapshot(trial, "pre_golden")


async def test_reset_returns_the_initial_hash(client: StateClient, new_trial_id: Callable[[], str]) -> None:
    trial = new_trial_id()
    await _init(client, trial)
    initial = await client.get_hashes(trial)
    await client.patch(trial, _ops("users", {"op": "update", "key": "U-1", "set": {"tier": "x"}}))
    await client.create_snapshot(trial, "kept")
    reset = await client.reset(trial)
    assert (reset.stable_hash, reset.full_hash) == (initial.stable_hash, initial.full_hash)
    assert (await client.get_state(trial)).tables == TABLES
    assert (await client.restore_snapshot(trial, "kept")).stable_hash != initial.stable_hash


async def test_concurrent_patches_serialize_and_lose_nothing(
    client: StateClient, new_trial_id: Callable[[], str]
) -> None:
    trial = new_trial_id()
    await _init(client, trial)
    writers = 40

    async def write(index: int) -> int:
        return await client.patch(
            trial,
            [
                {"table_name": "empty_list", "operations": [{"op": "insert", "record": {"n": index}}]},
                {
                    "table_name": "empty_keyed",
                    "operations": [{"op": "insert", "key": f"k{index}", "record": {}}],
                },
            ],
        )

    versions = await asyncio.gather(*(write(index) for index in range(writers)))
    assert sorted(versions) == list(range(1, writers + 1))
    state = await client.get_state(trial)
    assert sorted(record["n"] for record in state.tables["empty_list"]) == list(range(writers))
    assert len(state.tables["empty_keyed"]) == writers

    async def guarded() -> bool:
        try:
            await client.patch(trial, _ops("orders", {"op": "delete", "index": 0}), expected_version=writers)
        except ConflictError:
            return False
        return True

    outcomes = await asyncio.gather(*(guarded() for _ in range(8)))
    assert outcomes.count(True) == 1


async def test_two_trials_never_see_each_others_writes(
    client: StateClient, new_trial_id: Callable[[], str]
) -> None:
    first, second = new_trial_id(), new_trial_id()
    await _init(client, first)
    await _init(client, second)
    await client.patch(first, _ops("orders", {"op": "delete", "where": {"id": 1}}))
    await client.create_snapshot(first, "only_first")
    assert (await client.get_state(second)).tables == TABLES
    with pytest.raises(NotFoundError):
        await client.restore_snapshot(second, "only_first")
    await client.delete_trial(first)
    assert (await client.get_state(second)).tables == TABLES
    with pytest.raises(NotFoundError):
        await client.get_hashes(first)


async def test_trial_lifecycle_errors(client: StateClient, new_trial_id: Callable[[], str]) -> None:
    trial = new_trial_id()
    with pytest.raises(NotFoundError):
        await client.get_state(trial)
    with pytest.raises(NotFoundError):
        await client.reset(trial)
    with pytest.raises(NotFoundError):
        await client.delete_trial(trial)
    with pytest.raises(NotFoundError):
        await client.create_snapshot(trial, "s")
    await _init(client, trial)
    with pytest.raises(ConflictError):
        await _init(client, trial)
    await client.delete_trial(trial)
    await _init(client, trial)  # a deleted trial's id can be used again
    assert (await client.get_hashes(trial)).version == 0
    for bad in ("../etc", "a/b", "", "x\n", ".hidden"):
        with pytest.raises(ValidationFailedError):
            await client.get_state(bad)
    with pytest.raises(ValidationFailedError):
        await client.create_snapshot(trial, "../../x")


async def test_record_schemas_are_enforced_at_init_and_on_every_write(
    client: StateClient, new_trial_id: Callable[[], str]
) -> None:
    schema = {
        "table_name": "orders",
        "record_schema": {"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}},
    }
    with pytest.raises(ValidationFailedError):
        await client.init_trial(new_trial_id(), {"orders": [{"id": "x"}]}, schemas=[schema])
    await client.init_trial(new_trial_id(), {"orders": []}, schemas=[{**schema, "table_name": "absent"}])
    with pytest.raises(ValidationFailedError):
        bad = {"table_name": "orders", "record_schema": {"type": 12}}
        await client.init_trial(new_trial_id(), {"orders": []}, schemas=[bad])
    with pytest.raises(ValidationFailedError):  # a reference the service must never fetch
        remote = {"table_name": "orders", "record_schema": {"$ref": "file:///etc/passwd"}}
        await client.init_trial(new_trial_id(), {"orders": [{"id": 1}]}, schemas=[remote])
    trial = new_trial_id()
    await client.init_trial(trial, {"orders": [{"id": 1}]}, schemas=[schema])
    with pytest.raises(ValidationFailedError):
        await client.patch(trial, _ops("orders", {"op": "update", "index": 0, "unset": ["id"]}))
    await client.patch(trial, _ops("orders", {"op": "insert", "record": {"id": 2}}))
    assert (await client.get_state(trial)).tables == {"orders": [{"id": 1}, {"id": 2}]}


async def test_callers_objects_never_alias_stored_state(
    client: StateClient, new_trial_id: Callable[[], str]
) -> None:
    trial = new_trial_id()
    tables = copy.deepcopy(TABLES)
    await client.init_trial(trial, tables)
    tables["orders"].append({"id": "sneaky"})
    read = await client.get_state(trial)
    read.tables["orders"].clear()
    assert (await client.get_state(trial)).tables == TABLES


async def test_numbers_and_text_round_trip_exactly(
    client: StateClient, new_trial_id: Callable[[], str]
) -> None:
    trial = new_trial_id()
    tricky = json.loads(
        '{"t":[{"n":1e16,"f":0.1,"i":-0,"s":6.19e-05,"big":123456789012345678901234567890,'
        '"u":"☃😀\\u007f","neg":-0.0,"int_float":3.0}]}'
    )
    await client.init_trial(trial, tricky)
    assert canonical_bytes((await client.get_state(trial)).tables) == canonical_bytes(tricky)
    assert (await client.get_hashes(trial)).full_hash == full_hash(tricky)
