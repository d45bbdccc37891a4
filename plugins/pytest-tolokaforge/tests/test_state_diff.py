"""Differences between two states, named by table, record and field."""

from __future__ import annotations

from pytest_tolokaforge.state_diff import diff_states


def test_list_and_keyed_tables_name_the_record_and_field_and_mark_declared_ones() -> None:
    first = {
        "tickets": [{"id": "T-1", "at": "10:00:01"}, {"id": "T-2", "at": "x"}],
        "orders": {"O-1": {"status": "open"}, "O-2": {"status": "paid"}},
    }
    second = {
        "tickets": [{"id": "T-9", "at": "10:00:02"}, {"id": "T-2", "at": "x"}, {"id": "T-3"}],
        "orders": {"O-1": {"status": "cancelled"}},
    }
    found = [str(d) for d in diff_states(first, second, {("tickets", "id")})]
    assert found == [
        "orders['O-1'].status: 'open' vs 'cancelled'",
        "orders['O-2']: {'status': 'paid'} vs (absent)",
        "tickets[0].at: '10:00:01' vs '10:00:02'",
        "tickets[0].id: 'T-1' vs 'T-9'",
        "tickets[2]: (absent) vs {'id': 'T-3'}",
    ]
    declared = {str(d) for d in diff_states(first, second, {("tickets", "id")}) if d.declared_unstable}
    assert declared == {"tickets[0].id: 'T-1' vs 'T-9'"}


def test_equal_states_have_no_differences() -> None:
    state = {"t": [{"a": 1}], "k": {"x": {"b": [1, 2]}}}
    assert diff_states(state, {"t": [{"a": 1}], "k": {"x": {"b": [1, 2]}}}, ()) == []
