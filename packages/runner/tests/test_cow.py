"""Copy-on-write table views: tools see real lists/dicts, the base never changes, the diff is exact."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tolokaforge.runner.state.cow import CowTables, TableShapeError, apply_changes


def _state() -> dict[str, Any]:
    return {
        "orders": [{"id": f"O-{i}", "status": "open", "items": [{"sku": "A", "qty": i}]} for i in range(5)],
        "users": {f"U-{i}": {"name": f"user {i}", "balance": 10.0 * i, "tags": ["x"]} for i in range(4)},
        "log": [],
    }


def _run(tool: Any) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """Run ``tool(data)`` on a view; return (base after, expected, changes) and check the diff replays."""
    base = _state()
    pristine = copy.deepcopy(base)
    expected = copy.deepcopy(base)
    tool(expected)  # what the tool does to plain tables
    view = CowTables(base)
    tool(view)
    assert base == pristine, "the view must never write through to the base"
    changes = view.changes()
    replayed = copy.deepcopy(base)
    apply_changes(replayed, changes)
    assert replayed == expected
    return base, expected, changes


def test_read_only_tool_changes_nothing() -> None:
    def tool(data: dict[str, Any]) -> None:
        json.dumps(data["orders"])
        _ = [o["status"] for o in data["orders"] if o["id"] == "O-1"]
        _ = data["users"]["U-1"]["balance"], list(data["users"].values()), dict(data["users"])

    _, _, changes = _run(tool)
    assert changes == []


def test_in_place_record_edit_is_one_upsert() -> None:
    def tool(data: dict[str, Any]) -> None:
        for order in data["orders"]:
            if order["id"] == "O-3":
                order["status"] = "paid"
                order["items"][0]["qty"] = 99

    _, expected, changes = _run(tool)
    assert changes == [
        {
            "table_name": "orders",
            "operations": [{"op": "upsert", "index": 3, "record": expected["orders"][3]}],
        }
    ]


def test_keyed_table_edit_insert_delete() -> None:
    def tool(data: dict[str, Any]) -> None:
        data["users"]["U-2"]["balance"] -= 5
        data["users"]["U-9"] = {"name": "new", "balance": 0.0, "tags": []}
        del data["users"]["U-0"]
        data["users"].pop("U-3")

    _, _, changes = _run(tool)
    (change,) = changes
    assert change["table_name"] == "users"
    assert [(op["op"], op["key"]) for op in change["operations"]] == [
        ("delete", "U-0"),
        ("upsert", "U-2"),
        ("delete", "U-3"),
        ("upsert", "U-9"),
    ]


def test_append_is_an_insert_at_the_end() -> None:
    def tool(data: dict[str, Any]) -> None:
        data["log"].append({"event": "x"})
        data["orders"].append({"id": "O-9", "status": "new", "items": []})

    _, _, changes = _run(tool)
    assert changes == [
        {"table_name": "log", "operations": [{"op": "insert", "index": 0, "record": {"event": "x"}}]},
        {
            "table_name": "orders",
            "operations": [
                {"op": "insert", "index": 5, "record": {"id": "O-9", "status": "new", "items": []}}
            ],
        },
    ]


def test_nested_list_in_a_record_is_isolated() -> None:
    def tool(data: dict[str, Any]) -> None:
        data["users"]["U-1"]["tags"].append("vip")

    base, _, changes = _run(tool)
    assert base["users"]["U-1"]["tags"] == ["x"]
    assert changes[0]["operations"][0]["record"]["tags"] == ["x", "vip"]


def _order_id(order: dict[str, Any]) -> str:
    return order["id"]


def test_structural_edits_then_reads() -> None:
    def tool(data: dict[str, Any]) -> None:
        orders = data["orders"]
        orders.insert(0, {"id": "O-new", "status": "new", "items": []})
        del orders[3]
        orders.sort(key=_order_id, reverse=True)
        for order in orders:
            order["status"] = order["status"].upper()

    _run(tool)


def test_replacing_a_table_object_is_diffed() -> None:
    def tool(data: dict[str, Any]) -> None:
        data["orders"] = [o for o in data["orders"] if o["id"] != "O-2"]
        data["users"] = {k: v for k, v in data["users"].items() if k != "U-1"}

    _run(tool)


def test_adding_a_table_is_refused() -> None:
    view = CowTables(_state())
    view["new_table"] = []
    with pytest.raises(TableShapeError, match="new_table"):
        view.changes()


def test_changing_a_table_shape_is_refused() -> None:
    view = CowTables(_state())
    view["users"] = [{"name": "flat"}]
    with pytest.raises(TableShapeError, match="users"):
        view.changes()


def test_views_are_real_lists_and_dicts() -> None:
    view = CowTables(_state())
    assert isinstance(view["orders"], list) and isinstance(view["users"], dict)
    assert json.loads(json.dumps(view)) == _state()
    assert len(view["orders"]) == 5 and "U-1" in view["users"]
    assert view["orders"][-1]["id"] == "O-4" and [o["id"] for o in view["orders"][1:3]] == ["O-1", "O-2"]


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 100)),
        st.tuples(st.just("set_field"), st.integers(0, 10)),
        st.tuples(st.just("delete"), st.integers(0, 10)),
        st.tuples(st.just("insert"), st.integers(0, 10)),
        st.tuples(st.just("reverse"), st.just(0)),
        st.tuples(st.just("key_set"), st.integers(0, 6)),
        st.tuples(st.just("key_del"), st.integers(0, 6)),
        st.tuples(st.just("key_edit"), st.integers(0, 6)),
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_any_sequence_of_edits_round_trips_through_the_diff(ops: list[tuple[str, int]]) -> None:
    def tool(data: dict[str, Any]) -> None:
        orders: list[Any] = data["orders"]
        users: dict[str, Any] = data["users"]
        for name, arg in ops:
            if name == "append":
                orders.append({"id": f"N-{arg}"})
            elif name == "set_field" and orders:
                orders[arg % len(orders)]["status"] = f"s{arg}"
            elif name == "delete" and orders:
                del orders[arg % len(orders)]
            elif name == "insert":
                orders.insert(arg, {"id": f"I-{arg}"})
            elif name == "reverse":
                orders.reverse()
            elif name == "key_set":
                users[f"U-{arg}"] = {"name": f"set {arg}"}
            elif name == "key_del":
                users.pop(f"U-{arg}", None)
            elif name == "key_edit" and f"U-{arg}" in users:
                users[f"U-{arg}"]["balance"] = arg

    _run(tool)
