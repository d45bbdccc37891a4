"""The hash vectors (docs/protocol/db-service.md#the-stable-hash), and the composition rule stores
rely on for cached encodings."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tolokaforge.core.stable_hash import (
    canonical_bytes,
    compose_object,
    full_hash,
    stable_hash,
    strip_unstable,
)

VECTOR_1 = (
    '{"accounts":[{"id":"A-1","owner":"Zoë Ångström","balance":10.5,"tags":["x","y"],'
    '"opened":"2026-01-02T03:04:05"}],"log":[]}'
)
VECTOR_2 = '{"t":[{"n":1e16,"f":0.1,"i":-0,"b":true,"z":null,"u":"☃"}]}'


def test_vector_1_full_state() -> None:
    assert (
        stable_hash(json.loads(VECTOR_1))
        == "ef681125a99d06763f5f5697d5ea548753ae8e93316a01fa91b5d87fbdfc1b9f"
    )


def test_vector_1_with_unstable_field() -> None:
    state = json.loads(VECTOR_1)
    assert (
        stable_hash(state, [("accounts", "opened")])
        == "e47aa8e8c947f04006f5fea15b1a803da4207ff642542bdba6134ffaaa5d9e9b"
    )
    assert "opened" in state["accounts"][0], "stripping must not mutate the caller's state"


def test_vector_2_canonical_text_and_hash() -> None:
    state = json.loads(VECTOR_2)
    assert canonical_bytes(state) == b'{"t":[{"b":true,"f":0.1,"i":0,"n":1e+16,"u":"\\u2603","z":null}]}'
    assert full_hash(state) == "34bed28df37bc5c382f9ce87ea60f41e62bf071142d7d63dd993d7ffdeba17df"


def test_unstable_fields_leave_keyed_tables_and_other_tables_alone() -> None:
    tables = {"users": {"U-1": {"id": "U-1", "seen": 5}}, "log": [{"seen": 1}]}
    assert strip_unstable(tables, [("users", "seen")]) == {
        "users": {"U-1": {"id": "U-1"}},
        "log": [{"seen": 1}],
    }


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=8), JSON, max_size=6))
def test_composing_cached_members_equals_encoding_the_whole(obj: dict[str, Any]) -> None:
    pieces = compose_object((key, canonical_bytes(value)) for key, value in obj.items())
    assert b"".join(pieces) == canonical_bytes(obj)
