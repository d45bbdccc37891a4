"""Plain top-level values (``{counter: 0}``) kept as value tables: what tools, syncing servers and checks see.

The store holds ``counter`` as the keyed table ``{"$value": {"value": 0}}``; a python tool reads and
writes the plain value, and its change reaches the store as one upsert of that record.
"""

from __future__ import annotations

import copy
from typing import Any

from tolokaforge.core.models import JsonPathCheck
from tolokaforge.core.value_tables import VALUE_KEY, present, value_table, wrap_values
from tolokaforge.runner.grading.jsonpath_checks import evaluate_jsonpaths
from tolokaforge.runner.state.cow import CowDict, CowTables, TableView, apply_changes
from tolokaforge.runner.tools.state_sync import changes_to


def _state() -> dict[str, Any]:
    return wrap_values({"counter": 0, "notes": ["opened"], "label": "door", "operations": []})


def test_wrapping_keeps_tables_and_wraps_everything_else() -> None:
    assert _state() == {
        "counter": value_table(0),
        "notes": value_table(["opened"]),
        "label": value_table("door"),
        "operations": [],
    }
    assert present(_state()) == {"counter": 0, "notes": ["opened"], "label": "door", "operations": []}


def test_a_tool_writes_the_plain_value_and_the_store_gets_one_upsert() -> None:
    base = _state()
    before = copy.deepcopy(base)
    data = CowTables(base)
    data["counter"] += 5
    data["notes"].append("added 5")
    data["operations"].append({"op": "add", "amount": 5})
    changes = data.changes()
    assert changes == [
        {"table_name": "counter", "operations": [{"op": "upsert", "key": VALUE_KEY, "record": {"value": 5}}]},
        {
            "table_name": "notes",
            "operations": [{"op": "upsert", "key": VALUE_KEY, "record": {"value": ["opened", "added 5"]}}],
        },
        {
            "table_name": "operations",
            "operations": [{"op": "insert", "index": 0, "record": {"op": "add", "amount": 5}}],
        },
    ]
    assert base == before  # nothing changes until the commit applies the batch
    apply_changes(base, changes)
    assert present(base) == {
        "counter": 5,
        "notes": ["opened", "added 5"],
        "label": "door",
        "operations": [{"op": "add", "amount": 5}],
    }


def test_reading_or_rewriting_an_equal_value_changes_nothing() -> None:
    data = CowTables(_state())
    assert (data["counter"], data.get("label"), dict(data.items())["notes"]) == (0, "door", ["opened"])
    data["label"] = "door"
    assert data.changes() == []


def test_a_true_is_not_a_one() -> None:
    data = CowTables(wrap_values({"flag": 1}))
    data["flag"] = True
    assert data.changes() == [
        {"table_name": "flag", "operations": [{"op": "upsert", "key": VALUE_KEY, "record": {"value": True}}]}
    ]


def test_a_view_built_ahead_for_a_value_table_is_not_handed_to_the_tool() -> None:
    # A worker zygote builds views for every keyed table before it forks; a value table's is bypassed.
    base = _state()
    views: dict[str, TableView] = {"counter": CowDict(base["counter"])}
    data = CowTables(base, views)
    assert data["counter"] == 0 and type(data["counter"]) is int


def test_a_syncing_server_returns_plain_values_and_they_become_upserts() -> None:
    current = _state()
    assert changes_to(current, present(current)) == []
    changes = changes_to(current, {**present(current), "counter": 2})
    assert changes == [
        {"table_name": "counter", "operations": [{"op": "upsert", "key": VALUE_KEY, "record": {"value": 2}}]}
    ]


def test_jsonpaths_read_the_plain_values() -> None:
    checks = [
        JsonPathCheck(path="$.db.counter", greater_or_equal=5, description="reached five"),
        JsonPathCheck(path="$.db.notes", contains="added 5", description="noted"),
        JsonPathCheck(path="$.db.label", equals="door", description="label kept"),
    ]
    state = wrap_values({"counter": 4, "notes": ["opened", "added 5"], "label": "door"})
    result = evaluate_jsonpaths(checks, present(state))
    assert result.score == 2 / 3
    assert "reached five" in result.segment and "noted" not in result.segment
