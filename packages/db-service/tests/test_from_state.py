"""InitRequest.from_state: a trial created from an initial state the store already holds, by full hash."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tolokaforge.core.stable_hash import full_hash, stable_hash
from tolokaforge.db import LocalStateClient
from tolokaforge.db.client import StateClient
from tolokaforge.db.errors import NotFoundError, ValidationFailedError
from tolokaforge.db.memory import MemoryStore
from tolokaforge.db.store import Store

TABLES: dict[str, Any] = {
    "orders": [{"id": i, "status": "open", "created_at": f"t{i}"} for i in range(300)],
    "users": {"U-1": {"name": "Mia"}},
}
UNSTABLE = [{"table_name": "orders", "field_name": "created_at"}]
SCHEMA = {
    "table_name": "orders",
    "record_schema": {"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}},
}


@pytest.fixture
def store_kind() -> str:
    """The memory store shares initial states; the PostgreSQL store's answer is tested on its own below."""
    return "memory"


async def test_the_postgres_store_holds_none_and_says_so(
    make_store: Callable[[str], Store], new_trial_id: Callable[[], str]
) -> None:
    client = await LocalStateClient.open(make_store("postgres"))
    try:
        hashes = await client.init_trial(new_trial_id(), copy.deepcopy(TABLES))
        with pytest.raises(NotFoundError) as refused:
            await client.init_trial(new_trial_id(), None, from_state=hashes.full_hash)
        assert refused.value.details["from_state"] == hashes.full_hash
    finally:
        await client.aclose()
        await client.service.store.close()


async def test_from_state_starts_a_trial_equal_to_one_given_the_tables(
    client: StateClient, new_trial_id: Callable[[], str]
) -> None:
    first, second = new_trial_id(), new_trial_id()
    hashes = await client.init_trial(first, copy.deepcopy(TABLES), unstable_fields=UNSTABLE)
    assert hashes.full_hash == full_hash(TABLES)
    shared = await client.init_trial(second, None, from_state=hashes.full_hash, unstable_fields=UNSTABLE)
    assert (shared.version, shared.stable_hash, shared.full_hash) == (0, hashes.stable_hash, hashes.full_hash)
    assert (await client.get_state(second)).tables == TABLES
    # The two trials share the initial state, never each other's changes.
    await client.patch(
        second,
        [
            {
                "table_name": "orders",
                "operations": [{"op": "upsert", "index": 0, "record": {"id": 0, "status": "paid"}}],
            }
        ],
    )
    assert (await client.get_state(first)).tables == TABLES
    await client.reset(second)
    assert (await client.get_state(second)).tables == TABLES


async def test_other_unstable_fields_give_their_own_stable_hash(
    client: StateClient, new_trial_id: Callable[[], str]
) -> None:
    hashes = await client.init_trial(new_trial_id(), copy.deepcopy(TABLES))
    variant = await client.init_trial(
        new_trial_id(), None, from_state=hashes.full_hash, unstable_fields=UNSTABLE
    )
    assert variant.stable_hash == stable_hash(TABLES, [("orders", "created_at")])
    assert variant.stable_hash != hashes.stable_hash
    assert variant.full_hash == hashes.full_hash


async def test_record_schemas_hold_for_a_shared_state_too(
    client: StateClient, new_trial_id: Callable[[], str]
) -> None:
    hashes = await client.init_trial(new_trial_id(), copy.deepcopy(TABLES))
    strict = {**SCHEMA, "record_schema": {"type": "object", "required": ["total"]}}
    with pytest.raises(ValidationFailedError):
        await client.init_trial(new_trial_id(), None, from_state=hashes.full_hash, schemas=[strict])
    for _ in range(2):  # the second time the check is remembered, and still holds
        await client.init_trial(new_trial_id(), None, from_state=hashes.full_hash, schemas=[SCHEMA])


async def test_a_state_not_held_is_a_404_naming_it(
    client: StateClient, new_trial_id: Callable[[], str]
) -> None:
    unknown = "ab" * 32
    trial = new_trial_id()
    with pytest.raises(NotFoundError) as refused:
        await client.init_trial(trial, None, from_state=unknown)
    assert refused.value.details["from_state"] == unknown
    await client.init_trial(trial, copy.deepcopy(TABLES))  # nothing was left under the id


@pytest.mark.parametrize("body", [{"tables": {}, "from_state": "ab" * 32}, {}], ids=["both", "neither"])
async def test_exactly_one_of_tables_and_from_state(
    client: StateClient, new_trial_id: Callable[[], str], body: dict[str, Any]
) -> None:
    with pytest.raises(ValidationFailedError):
        await client.init_trial(new_trial_id(), body.get("tables"), from_state=body.get("from_state"))


async def test_the_memory_store_forgets_initial_states_no_trial_uses() -> None:
    client = await LocalStateClient.open(MemoryStore())
    held: list[str] = []
    for n in range(6):  # six distinct initial states, each trial deleted at once
        trial = f"t{n}:0"
        held.append((await client.init_trial(trial, {"t": [{"n": n}]})).full_hash)
        await client.delete_trial(trial)
    # The last four are kept for the next run of the same tasks; older ones are gone.
    await client.init_trial("recent:0", None, from_state=held[-1])
    with pytest.raises(NotFoundError):
        await client.init_trial("old:0", None, from_state=held[0])
    await client.aclose()
