"""Chunked tables against a plain Python model: same contents, reference encodings, after any edits."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tolokaforge.core.stable_hash import canonical_bytes, strip_unstable
from tolokaforge.db import tables as tables_module
from tolokaforge.db.state import TrialState
from tolokaforge.db.tables import KeyedTable, ListTable

RECORD = st.dictionaries(
    st.sampled_from(["id", "name", "ts", "n", "é"]),
    st.none() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=4),
    max_size=4,
)
EDITS = st.lists(
    st.tuples(st.sampled_from(["insert", "replace", "delete"]), st.integers(0, 60), RECORD), max_size=40
)


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 2 (split past 4), so a few records already exercise splitting and emptying."""
    monkeypatch.setattr(tables_module, "CHUNK", 2)


def _check(state: TrialState, model: dict[str, Any]) -> None:
    unstable = [("list", "ts"), ("keyed", "ts")]
    assert state.encode(stable=False) == canonical_bytes(model)
    assert state.encode(stable=True) == canonical_bytes(strip_unstable(model, unstable))


@settings(max_examples=150)
@given(st.lists(RECORD, max_size=12), EDITS)
def test_list_table_edits_match_a_python_list(initial: list[dict[str, Any]], edits: list[Any]) -> None:
    table = ListTable.build(initial)
    model = list(initial)
    for kind, position, record in edits:
        if kind == "insert":
            index = min(position, len(model))
            table, _ = table.insert(index, record), model.insert(index, record)
        elif model and kind == "replace":
            index = position % len(model)
            table, model[index] = table.replace(index, record), record
        elif model:
            index = position % len(model)
            table, _ = table.delete([index]), model.pop(index)
        assert table.to_json() == model
        assert len(table) == len(model)
    state = TrialState({"list": table, "keyed": KeyedTable.build({})}, {"list": frozenset({"ts"})})
    _check(state, {"list": model, "keyed": {}})


@settings(max_examples=150)
@given(st.dictionaries(st.text(max_size=3), RECORD, max_size=12), EDITS)
def test_keyed_table_edits_match_a_python_dict(initial: dict[str, dict[str, Any]], edits: list[Any]) -> None:
    table = KeyedTable.build(initial)
    model = dict(initial)
    for kind, position, record in edits:
        key = str(position % 17)
        if kind in ("insert", "replace"):
            table, model[key] = table.put(key, record), record
        elif key in model:
            table, _ = table.delete([key]), model.pop(key)
        assert table.to_json() == model
        assert all(table.get(k) == v for k, v in model.items())
    state = TrialState({"keyed": table, "list": ListTable.build([])}, {"keyed": frozenset({"ts"})})
    _check(state, {"keyed": model, "list": []})


def test_snapshots_share_records_and_keep_their_bytes() -> None:
    table = ListTable.build([{"n": n} for n in range(50)])
    before = table.encode()
    edited = table.replace(10, {"n": -1}).insert(0, {"n": "first"}).delete([30, 31])
    assert table.encode() == before
    assert edited.to_json()[0] == {"n": "first"}
    assert edited.to_json()[11] == {"n": -1}
