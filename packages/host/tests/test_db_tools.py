"""The built-in database tools (shipped_tools/db_tools.py) called directly on plain tables.

The runner-side path (a worker in the sandbox, copy-on-write views, the commit) is proved by
tests/compat/test_db_tools.py; here each tool's semantics and error answers.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from tolokaforge.core.models import ToolCode
from tolokaforge.host.packs.builtin_tools import SHIPPED_PACKAGE, shipped_tools, with_shipped_code
from tolokaforge.host.packs.shipped_tools.db_tools import DbQuery, DbSchema, DbUpdate, SqlQuery, UpdateFailed
from tolokaforge.sdk.tool_result import ReportedError


def _tables() -> dict[str, Any]:
    return {
        "books": [
            {"isbn": "B-1", "title": "Dune", "stock": 0, "price": 9.99, "tags": ["sf"], "signed": True},
            {"isbn": "B-2", "title": "Emma", "stock": 3, "price": 5.5, "tags": [], "signed": False},
            {"isbn": "B-3", "title": "Ulysses", "stock": 0, "price": None, "tags": ["classic"]},
        ],
        "orders": [{"order_id": "O-1", "isbn": "B-2", "quantity": 1}],
        "empty": [],
        "settings": {"shop": {"name": "Corner Books"}},
    }


def _json(answer: str | ReportedError) -> Any:
    assert isinstance(answer, str), answer
    return json.loads(answer)


def _error(answer: str | ReportedError) -> str:
    assert isinstance(answer, ReportedError), answer
    return answer.message


# --- db_query ---------------------------------------------------------------------------------


def test_db_query_is_rooted_at_the_tables_and_takes_filters() -> None:
    tables = _tables()
    assert _json(DbQuery.invoke(tables, jsonpath="$.books[?(@.stock == 0)].title")) == ["Dune", "Ulysses"]
    assert _json(DbQuery.invoke(tables, jsonpath="$.orders[0]")) == [tables["orders"][0]]
    assert _json(DbQuery.invoke(tables, jsonpath="$.settings.shop.name")) == ["Corner Books"]
    assert _json(DbQuery.invoke(tables, jsonpath="$.nothing")) == []


def test_db_query_answers_a_bad_path_as_its_own_error() -> None:
    message = _error(DbQuery.invoke(_tables(), jsonpath="$.books[?(@.stock =="))
    assert message.startswith("Query failed: '$.books[?(@.stock ==' is not a JSONPath")


# --- db_update --------------------------------------------------------------------------------


def test_replace_changes_every_match() -> None:
    tables = _tables()
    answer = DbUpdate.invoke(
        tables, ops=[{"op": "replace", "path": "$.books[?(@.stock == 0)].stock", "value": 5}]
    )
    assert answer == "Database updated successfully. Operations applied: 1"
    assert [book["stock"] for book in tables["books"]] == [5, 3, 5]


def test_replace_of_a_missing_path_fails_naming_the_operation() -> None:
    with pytest.raises(UpdateFailed, match=r"operation 1 \(replace \$\.books\[9\]\.stock\): path not found"):
        DbUpdate.invoke(
            _tables(),
            ops=[
                {"op": "replace", "path": "$.books[0].stock", "value": 1},
                {"op": "replace", "path": "$.books[9].stock", "value": 1},
            ],
        )


def test_add_appends_under_a_list_and_sets_a_key_under_an_object() -> None:
    tables = _tables()
    DbUpdate.invoke(
        tables,
        ops=[
            {"op": "add", "path": "$.orders.new", "value": {"order_id": "O-2"}},
            {"op": "add", "path": "$.books[1].note", "value": "reprint due"},
            {"op": "add", "path": "$.settings.shop.open", "value": True},
        ],
    )
    assert tables["orders"][-1] == {"order_id": "O-2"}
    assert tables["books"][1]["note"] == "reprint due"
    assert tables["settings"]["shop"] == {"name": "Corner Books", "open": True}


def test_add_at_the_root_replaces_a_table_and_refuses_a_new_one() -> None:
    tables = _tables()
    DbUpdate.invoke(tables, ops=[{"op": "add", "path": "$.orders", "value": []}])
    assert tables["orders"] == []
    with pytest.raises(UpdateFailed, match="no table 'shelves'"):
        DbUpdate.invoke(tables, ops=[{"op": "add", "path": "$.shelves", "value": []}])


def test_add_needs_something_to_add_to() -> None:
    with pytest.raises(UpdateFailed, match=r"'\$\.ordrs' matches nothing to add to"):
        DbUpdate.invoke(_tables(), ops=[{"op": "add", "path": "$.ordrs.new", "value": {}}])
    with pytest.raises(UpdateFailed, match="holds a str, not an object or list"):
        DbUpdate.invoke(_tables(), ops=[{"op": "add", "path": "$.books[0].title.x", "value": 1}])


def test_remove_takes_records_out_of_lists_and_keys_out_of_records() -> None:
    tables = _tables()
    DbUpdate.invoke(
        tables,
        ops=[
            {"op": "remove", "path": "$.books[?(@.stock == 0)]"},
            {"op": "remove", "path": "$.orders[0].quantity"},
        ],
    )
    assert [book["isbn"] for book in tables["books"]] == ["B-2"]
    assert tables["orders"] == [{"order_id": "O-1", "isbn": "B-2"}]


def test_update_refuses_a_bad_path_and_an_unknown_operation() -> None:
    with pytest.raises(UpdateFailed, match="not a JSONPath"):
        DbUpdate.invoke(_tables(), ops=[{"op": "replace", "path": "$.books[", "value": 1}])
    with pytest.raises(UpdateFailed, match="unknown operation"):
        DbUpdate.invoke(_tables(), ops=[{"op": "move", "path": "$.books[0]"}])


# --- sql_query --------------------------------------------------------------------------------


def test_sql_maps_records_to_rows() -> None:
    rows = _json(
        SqlQuery.invoke(_tables(), query="SELECT isbn, stock, price, tags, signed FROM books ORDER BY isbn")
    )
    assert rows == [
        {"isbn": "B-1", "stock": 0, "price": 9.99, "tags": '["sf"]', "signed": 1},
        {"isbn": "B-2", "stock": 3, "price": 5.5, "tags": "[]", "signed": 0},
        {"isbn": "B-3", "stock": 0, "price": None, "tags": '["classic"]', "signed": None},
    ]


def test_sql_joins_tables_and_finds_them_whatever_their_case() -> None:
    query = 'SELECT b.title, o.quantity FROM "ORDERS" o JOIN Books b ON b.isbn = o.isbn'
    assert _json(SqlQuery.invoke(_tables(), query=query)) == [{"title": "Emma", "quantity": 1}]


def test_sql_sees_a_replaced_record_and_copies_only_the_tables_a_query_names() -> None:
    # Table names no other test uses: the SQL view lives as long as the process (the worker).
    tables = {"shelf_a": [{"n": 1}, {"n": 2}], "shelf_b": [{"n": 3}]}
    assert _json(SqlQuery.invoke(tables, query="SELECT sum(n) AS total FROM shelf_a")) == [{"total": 3}]
    # The runner replaces a changed record (never edits it in place): the next query must see it.
    tables["shelf_a"][1] = {"n": 10}
    assert _json(SqlQuery.invoke(tables, query="SELECT sum(n) AS total FROM shelf_a")) == [{"total": 11}]
    listed = _json(SqlQuery.invoke(tables, query="SELECT name FROM sqlite_master WHERE type = 'table'"))
    assert {"name": "shelf_a"} in listed and {"name": "shelf_b"} not in listed


Edit = Callable[[list[Any]], object]


def _edit(edit: Edit) -> Edit:
    return edit


def _rows_and_schema(tables: dict[str, Any], name: str) -> tuple[Any, Any]:
    rows = _json(SqlQuery.invoke(tables, query=f"SELECT * FROM {name}"))
    schema = json.loads(DbSchema.invoke(tables).removeprefix("Database Schema:\n")).get(name)
    return rows, schema


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(_edit(lambda rows: rows.__setitem__(2, {**rows[2], "n": 99})), id="replace one record"),
        pytest.param(_edit(lambda rows: rows.append({"n": 7, "s": "new"})), id="append"),
        pytest.param(_edit(lambda rows: rows.pop()), id="remove the last"),
        pytest.param(_edit(lambda rows: rows.pop(0)), id="remove the first"),
        pytest.param(_edit(lambda rows: rows.insert(1, {"n": 5, "s": "mid"})), id="insert in the middle"),
        pytest.param(_edit(lambda rows: rows.__setitem__(1, "not a record")), id="a record becomes a string"),
        pytest.param(_edit(lambda rows: rows.__setitem__(0, {**rows[0], "extra": 1})), id="a new column"),
        pytest.param(
            _edit(lambda rows: rows.__setitem__(3, {"n": 4, "s": 12})), id="a text column sees a number"
        ),
        pytest.param(
            _edit(lambda rows: rows.__setitem__(0, {"n": 1, "s": ["a", {"b": True}]})), id="a list value"
        ),
        pytest.param(_edit(lambda rows: rows.clear()), id="emptied"),
    ],
)
def test_the_sql_copy_follows_each_kind_of_change(edit: Edit) -> None:
    rows: list[Any] = [{"n": index, "s": f"r{index}", "flag": index % 2 == 0} for index in range(6)]
    tables = {"follow": rows}
    _rows_and_schema(tables, "follow")  # copied into SQLite, then kept in step with the trial's list
    edit(rows)
    # A fresh list object is copied whole: what the kept copy must equal.
    fresh = {"follow_fresh": list(rows)}
    if rows:
        assert _rows_and_schema(tables, "follow") == _rows_and_schema(fresh, "follow_fresh")
    else:
        assert (
            _error(SqlQuery.invoke(tables, query="SELECT * FROM follow"))
            == "SQL query failed: no such table: follow"
        )


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("SELECT * FROM shelves", "SQL query failed: no such table: shelves"),
        ("SELECT * FROM empty", "SQL query failed: no such table: empty"),
        ("SELECT * FROM settings", "SQL query failed: no such table: settings"),
        ("SELEC * FROM books", 'SQL query failed: near "SELEC": syntax error'),
        ("SELECT 1; SELECT 2", "SQL query failed: You can only execute one statement at a time."),
    ],
)
def test_sql_errors_are_answered_to_the_model(query: str, expected: str) -> None:
    assert _error(SqlQuery.invoke(_tables(), query=query)) == expected


@pytest.mark.parametrize(
    "query",
    [
        "UPDATE books SET stock = 9",
        "INSERT INTO orders (order_id) VALUES ('O-9')",
        "DELETE FROM books",
        "DROP TABLE books",
        "CREATE TABLE notes (x)",
        "ATTACH DATABASE '/tmp/x.db' AS x",
        "PRAGMA journal_mode = OFF",
        "BEGIN",
    ],
)
def test_sql_is_read_only(query: str) -> None:
    tables = _tables()
    before = copy.deepcopy(tables)
    message = _error(SqlQuery.invoke(tables, query=query))
    assert message == (
        "SQL query failed: sql_query is read-only (only SELECT statements and reading pragmas are allowed); "
        "use db_update"
    )
    assert tables == before
    assert _json(SqlQuery.invoke(tables, query="SELECT count(*) AS n FROM books")) == [{"n": 3}]


def test_sql_allows_reading_pragmas() -> None:
    columns = _json(SqlQuery.invoke(_tables(), query="PRAGMA table_info(orders)"))
    assert [column["name"] for column in columns] == ["order_id", "isbn", "quantity"]


# --- get_db_schema ----------------------------------------------------------------------------


def test_schema_lists_the_sql_tables_and_their_inferred_columns() -> None:
    tables = _tables()
    tables["zebra"] = [{"a": None}, {"a": 2, "b": "x"}, {"b": 3}]
    answer = DbSchema.invoke(tables)
    assert answer.startswith("Database Schema:\n")
    schema = json.loads(answer.removeprefix("Database Schema:\n"))
    assert list(schema) == ["books", "orders", "zebra"]  # sorted; empty and keyed tables have no SQL table
    assert [(c["name"], c["type"]) for c in schema["books"]] == [
        ("isbn", "TEXT"),
        ("title", "TEXT"),
        ("stock", "INTEGER"),
        ("price", "REAL"),
        ("tags", "TEXT"),
        ("signed", "INTEGER"),
    ]
    # A column first seen as null (or text) takes the type of a later number, as the public service infers.
    assert [(c["name"], c["type"]) for c in schema["zebra"]] == [("a", "INTEGER"), ("b", "INTEGER")]
    assert schema["orders"][0] == {"name": "order_id", "type": "TEXT", "notnull": False, "pk": False}


# --- how tasks get them -----------------------------------------------------------------------


def test_descriptions_point_at_the_shipped_module_and_the_code_carries_it() -> None:
    described = shipped_tools(["read_file", "db_query", "sql_query"])
    assert [(tool.name, tool.category, tool.source.module_path) for tool in described] == [
        ("db_query", "read", f"{SHIPPED_PACKAGE}.db_tools"),
        ("sql_query", "read", f"{SHIPPED_PACKAGE}.db_tools"),
    ]
    code = ToolCode(files={"tools.py": "x = 1"})
    combined = with_shipped_code(code, described)
    assert combined is not None and combined.files is not None
    assert combined is with_shipped_code(code, described)  # one bundle object per pack bundle
    # Every module of the shipped folder travels (a tool's module may import its neighbours).
    assert {
        "tools.py",
        f"{SHIPPED_PACKAGE}/__init__.py",
        f"{SHIPPED_PACKAGE}/db_tools.py",
        f"{SHIPPED_PACKAGE}/sql_view.py",
        f"{SHIPPED_PACKAGE}/knowledge_base.py",
    } <= set(combined.files)
    assert "class SqlQuery" in combined.files[f"{SHIPPED_PACKAGE}/db_tools.py"]
    assert with_shipped_code(code, []) is code
