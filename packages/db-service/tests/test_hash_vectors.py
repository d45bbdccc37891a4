"""The hash vectors (docs/protocol/db-service.md#the-stable-hash), through the service (both stores,
both clients)."""

from __future__ import annotations

import json
from collections.abc import Callable

from tolokaforge.db.client import StateClient

VECTOR_1 = (
    '{"accounts":[{"id":"A-1","owner":"Zoë Ångström","balance":10.5,"tags":["x","y"],'
    '"opened":"2026-01-02T03:04:05"}],"log":[]}'
)
VECTOR_2 = '{"t":[{"n":1e16,"f":0.1,"i":-0,"b":true,"z":null,"u":"☃"}]}'


async def test_vector_1(client: StateClient, new_trial_id: Callable[[], str]) -> None:
    plain, with_unstable = new_trial_id(), new_trial_id()
    hashes = await client.init_trial(plain, json.loads(VECTOR_1))
    assert hashes.stable_hash == hashes.full_hash
    assert hashes.stable_hash == "ef681125a99d06763f5f5697d5ea548753ae8e93316a01fa91b5d87fbdfc1b9f"
    unstable = [{"table_name": "accounts", "field_name": "opened", "reason": "timestamp"}]
    hashes = await client.init_trial(with_unstable, json.loads(VECTOR_1), unstable_fields=unstable)
    assert hashes.stable_hash == "e47aa8e8c947f04006f5fea15b1a803da4207ff642542bdba6134ffaaa5d9e9b"
    assert hashes.full_hash == "ef681125a99d06763f5f5697d5ea548753ae8e93316a01fa91b5d87fbdfc1b9f"
    assert "opened" in (await client.get_state(with_unstable)).tables["accounts"][0]
    assert "opened" not in (await client.get_state(with_unstable, stable=True)).tables["accounts"][0]


async def test_vector_2(client: StateClient, new_trial_id: Callable[[], str]) -> None:
    trial = new_trial_id()
    hashes = await client.init_trial(trial, json.loads(VECTOR_2))
    assert hashes.full_hash == "34bed28df37bc5c382f9ce87ea60f41e62bf071142d7d63dd993d7ffdeba17df"
