"""The one state diff: records matched the same way on both sides, named by table, record and field."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tolokaforge.core import state_diff
from tolokaforge.core.state_diff import ABSENT, diff_states


def test_one_changed_record_reads_as_one_modified_record_not_adds_and_removes() -> None:
    # A regression: identity was chosen per side, so one side matched by position and the other by id.
    golden = {"loans": [{"id": "B-1", "due": 1}, {"id": "B-2", "due": 2}]}
    trial = {"loans": [{"id": "B-2", "due": 2}, {"id": "B-1", "due": 9}]}
    diff = diff_states(golden, trial)
    assert [str(d) for d in diff.differences] == ["loans[B-1].due: 1 vs 9"]
    assert diff.summary() == "1 modified (loans[B-1].due)"
    assert diff.to_json()["modified"] == [
        {"table": "loans", "record": "B-1", "fields": {"due": {"expected": 1, "actual": 9}}}
    ]


def test_a_field_ending_in_id_is_the_identity_when_there_is_no_id() -> None:
    golden = {"orders": [{"order_id": "O-1", "status": "open"}, {"order_id": "O-2", "status": "open"}]}
    trial = {"orders": [{"order_id": "O-2", "status": "open"}, {"order_id": "O-3", "status": "new"}]}
    diff = diff_states(golden, trial)
    assert diff.to_json()["diff_lines"] == [
        '- orders[O-1]: {"order_id": "O-1", "status": "open"} (missing from the trial)',
        '+ orders[O-3]: {"order_id": "O-3", "status": "new"} (not in the golden state)',
    ]
    assert diff.summary() == "1 added (orders[O-3]), 1 removed (orders[O-1])"


def test_declared_unstable_ids_are_never_the_identity_and_are_marked() -> None:
    first = {
        "tickets": [{"id": "T-1", "at": "10:00:01"}, {"id": "T-2", "at": "x"}],
        "orders": {"O-1": {"status": "open"}, "O-2": {"status": "paid"}},
    }
    second = {
        "tickets": [{"id": "T-9", "at": "10:00:02"}, {"id": "T-2", "at": "x"}, {"id": "T-3"}],
        "orders": {"O-1": {"status": "cancelled"}},
    }
    diff = diff_states(first, second, {("tickets", "id")})
    assert [str(d) for d in diff.differences] == [
        'orders[O-1].status: "open" vs "cancelled"',
        'orders[O-2]: {"status": "paid"} vs (absent)',
        'tickets[#0].at: "10:00:01" vs "10:00:02"',
        'tickets[#0].id: "T-1" vs "T-9"',
        'tickets[#2]: (absent) vs {"id": "T-3"}',
    ]
    assert [d.where for d in diff.differences if d.declared_unstable] == ["tickets[#0].id"]


def test_duplicate_or_missing_ids_fall_back_to_position_on_both_sides() -> None:
    golden = {"t": [{"id": 1, "v": "a"}, {"id": 1, "v": "b"}]}
    trial = {"t": [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]}
    assert [d.where for d in diff_states(golden, trial).differences] == ["t[#1].id"]


def test_whole_tables_and_non_object_records() -> None:
    diff = diff_states({"a": [1, 2], "gone": []}, {"a": [1, 3], "new": {}})
    assert [(d.kind, d.where) for d in diff.differences] == [
        ("modified", "a[#1]"),
        ("removed", "gone"),
        ("added", "new"),
    ]
    assert diff.differences[1].actual is ABSENT


_records = st.lists(st.fixed_dictionaries({"id": st.integers(0, 5), "v": st.integers(0, 2)}), max_size=5).map(
    lambda rows: list({row["id"]: row for row in rows}.values())
)


@given(_records, _records)
def test_no_difference_exactly_when_the_states_are_equal(
    first: list[dict[str, Any]], second: list[dict[str, Any]]
) -> None:
    diff = diff_states({"t": first}, {"t": second})
    assert bool(diff) == ({r["id"]: r for r in first} != {r["id"]: r for r in second})
    # A record is modified, added or removed: never both added and removed under one name.
    names = [(d.kind, d.record) for d in diff.differences if d.kind != "modified"]
    assert len({record for _, record in names}) == len(names)


def test_shared_records_are_skipped_and_the_result_is_the_same_as_for_copies() -> None:
    base = [{"id": f"R-{i}", "n": i} for i in range(500)]
    golden = list(base)
    golden[3] = {**base[3], "n": -1}
    trial = list(base)
    trial[7] = {**base[7], "n": -7}
    trial[9] = {**base[9], "n": -9}
    shared = diff_states({"r": golden, "k": {"a": base[0]}}, {"r": trial, "k": {"a": base[0]}})
    copied = diff_states(
        copy.deepcopy({"r": golden, "k": {"a": base[0]}}), copy.deepcopy({"r": trial, "k": {"a": base[0]}})
    )
    assert shared == copied
    assert [d.where for d in shared.differences] == ["r[R-3].n", "r[R-7].n", "r[R-9].n"]


def test_stable_leaves_out_unstable_fields() -> None:
    golden: dict[str, Any] = {"r": [{"id": 1, "at": "t1", "v": 1}], "k": {}}
    trial: dict[str, Any] = {"r": [{"id": 1, "at": "t2", "v": 1}, {"id": 2, "at": "t3", "v": 2}], "k": {}}
    unstable = {("r", "at")}
    marked = diff_states(golden, trial, unstable)
    assert [(d.where, d.declared_unstable) for d in marked.differences] == [
        ("r[1].at", True),
        ("r[2]", False),
    ]
    stable = diff_states(golden, trial, unstable, stable=True)
    assert [d.where for d in stable.differences] == ["r[2]"]
    assert stable.differences[0].actual == {"id": 2, "v": 2}


_EDITS = st.lists(
    st.tuples(st.integers(0, 39), st.integers(0, 45), st.sampled_from(("keep_id", "new_id", "other_key"))),
    max_size=6,
)


@given(_EDITS, _EDITS)
def test_a_common_ancestor_never_changes_the_result(
    golden_edits: list[tuple[int, int, str]], trial_edits: list[tuple[int, int, str]]
) -> None:
    base: list[dict[str, Any]] = [{"id": i, "v": 0} for i in range(40)]

    def edited(edits: list[tuple[int, int, str]]) -> list[dict[str, Any]]:
        side = list(base)
        for position, new_id, how in edits:  # the first record too; new ids may collide with kept ones
            if how == "other_key":  # no "id" at all: another field ending in _id
                side[position] = {"ref_id": new_id, "v": position + 1}
            else:
                side[position] = {
                    "id": base[position]["id"] if how == "keep_id" else new_id,
                    "v": position + 1,
                }
        return side

    golden, trial = edited(golden_edits), edited(trial_edits)
    assert diff_states({"t": golden}, {"t": trial}, common={"t": base}) == diff_states(
        {"t": golden}, {"t": trial}
    )


def test_a_replaced_first_record_still_takes_the_ancestors_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    base: list[dict[str, Any]] = [{"id": i, "v": 0} for i in range(5)]
    golden, trial = list(base), list(base)
    golden[0] = {"id": 0, "v": 1}  # a golden path that changes the first record
    trial[1] = {"id": 1, "v": 2}
    diff_states({"t": list(base)}, {"t": trial}, common={"t": base})  # the ancestor is analysed here, once
    walked: list[int] = []
    whole = state_diff._identity_field  # pyright: ignore[reportPrivateUsage]

    def counting(table: str, first: list[Any], second: list[Any], unstable: Any) -> str | None:
        walked.append(len(first) + len(second))
        return whole(table, first, second, unstable)

    monkeypatch.setattr(state_diff, "_identity_field", counting)
    diff = diff_states({"t": golden}, {"t": trial}, common={"t": base})
    assert [(d.record, d.field) for d in diff.differences] == [("0", "v"), ("1", "v")]
    assert walked == []  # decided from the replaced records alone, not by walking both states
