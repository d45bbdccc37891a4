"""The built-in database tools: ``db_query``, ``db_update``, ``sql_query`` and ``get_db_schema``.

This file ships, as text, inside the tool code of every task that enables one of them (see
builtin_tools.py), and runs like a pack's own python tools: in the trial's worker, inside its
sandbox, over ``data`` (the trial's tables). Writes go through ``data``, so the runner's usual path
commits them (one batch per call, hashed, diffed, undone on failure). It imports only the standard
library, ``jsonpath_ng`` (the grader's JSONPath dialect) and :mod:`tolokaforge.sdk.tool_result`.

Semantics follow the public Tolokaforge tools (docs/pack-format.md#tools, "Database tools"): JSONPath
is rooted at the tables (``$.orders[0]``); ``db_update`` applies ``replace`` / ``add`` / ``remove``
operations in order; ``sql_query`` reads an in-memory SQLite view in which every list table of
records is a table whose columns are the union of its records' keys.

The SQL view (sql_view.py, shipped beside this file) is kept per worker and follows the changes
record by record, so a call costs what its query reads and what changed since, not the state's size.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Mapping, MutableMapping
from typing import Any, cast

from jsonpath_ng.ext.parser import parse  # pyright: ignore[reportMissingTypeStubs]

from tolokaforge.sdk.tool_result import ReportedError

from .sql_view import LOCK, VIEW, Refused, committed

__all__ = ["TOOLS", "DbQuery", "DbSchema", "DbUpdate", "SqlQuery", "UpdateFailed"]


class UpdateFailed(Exception):
    """A ``db_update`` operation could not be applied; the call's changes are all discarded."""


@functools.lru_cache(maxsize=1024)
def _compiled(path: str) -> Any:
    # The extended parser rebuilds its tables on every parse (milliseconds); a path is only read by find.
    return parse(path)


def _function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


class DbQuery:
    category = "read"
    timeout_s = 10.0

    @staticmethod
    def get_info() -> dict[str, Any]:
        return _function(
            "db_query",
            "Query the JSON database using JSONPath",
            {"jsonpath": {"type": "string", "description": "JSONPath query (e.g., '$.users[?(@.id==5)]')"}},
            ["jsonpath"],
        )

    @staticmethod
    def invoke(data: Mapping[str, Any], jsonpath: str) -> str | ReportedError:
        try:
            expression = _compiled(jsonpath)
        except Exception as error:  # the parser's errors have no common base class
            return ReportedError(f"Query failed: {jsonpath!r} is not a JSONPath ({error})")
        document = {name: committed(data, name) for name in data}
        try:
            values = [match.value for match in expression.find(document)]
        except Exception as error:  # e.g. a filter comparing values of different types
            return ReportedError(f"Query failed: {error}")
        return json.dumps(values, indent=2)


class DbUpdate:
    category = "write"
    timeout_s = 10.0

    @staticmethod
    def get_info() -> dict[str, Any]:
        operation = {
            "type": "object",
            "properties": {
                "op": {"type": "string", "enum": ["replace", "add", "remove"]},
                "path": {"type": "string"},
                "value": {},
            },
            "required": ["op", "path"],
        }
        return _function(
            "db_update",
            "Update the JSON database with operations",
            {"ops": {"type": "array", "description": "Array of update operations", "items": operation}},
            ["ops"],
        )

    @staticmethod
    def invoke(data: MutableMapping[str, Any], ops: list[dict[str, Any]]) -> str:
        for index, op in enumerate(ops):
            kind, path = op.get("op"), op.get("path")
            where = f"operation {index} ({kind} {path})"
            if not isinstance(path, str):
                raise UpdateFailed(f"{where}: path must be a string")
            try:
                expression = _compiled(path)
            except Exception as error:
                raise UpdateFailed(f"{where}: not a JSONPath ({error})") from error
            if kind == "replace":
                _replace(data, expression, op.get("value"), where)
            elif kind == "add":
                _add(data, path, op.get("value"), where)
            elif kind == "remove":
                _remove(data, expression)
            else:
                raise UpdateFailed(f"{where}: unknown operation (replace, add or remove)")
        return f"Database updated successfully. Operations applied: {len(ops)}"


def _replace(data: MutableMapping[str, Any], expression: Any, value: Any, where: str) -> None:
    matches = expression.find(data)
    if not matches:
        raise UpdateFailed(f"{where}: path not found")
    for match in matches:
        match.full_path.update(data, value)


def _add(data: MutableMapping[str, Any], path: str, value: Any, where: str) -> None:
    # As the public tool: the last dot-separated segment is the key; under a list it appends instead.
    parent_path, _, key = path.rpartition(".")
    if not parent_path or parent_path == "$":
        if key not in data:
            raise UpdateFailed(f"{where}: no table {key!r} (the trial's tables are fixed)")
        data[key] = value
        return
    try:
        parents = _compiled(parent_path).find(data)
    except Exception as error:
        raise UpdateFailed(f"{where}: {parent_path!r} is not a JSONPath ({error})") from error
    if not parents:
        raise UpdateFailed(f"{where}: {parent_path!r} matches nothing to add to")
    for parent in parents:
        container = parent.value
        if isinstance(container, dict):
            cast(dict[str, Any], container)[key] = value
        elif isinstance(container, list):
            cast(list[Any], container).append(value)
        else:
            raise UpdateFailed(
                f"{where}: {parent_path!r} holds a {type(container).__name__}, not an object or list"
            )


def _remove(data: MutableMapping[str, Any], expression: Any) -> None:
    for match in expression.find(data):
        parent = match.context.value if match.context is not None else None
        fields = getattr(match.path, "fields", None)
        if isinstance(parent, dict) and fields:
            cast(dict[str, Any], parent).pop(fields[0], None)
        elif isinstance(parent, list):
            cast(list[Any], parent).remove(match.value)


class SqlQuery:
    category = "read"
    timeout_s = 30.0

    @staticmethod
    def get_info() -> dict[str, Any]:
        return _function(
            "sql_query",
            "Execute SQL queries on the CRM database. Use standard SQL syntax (SQLite dialect). "
            "Tables are automatically created from the database schema.",
            {
                "query": {
                    "type": "string",
                    "description": "SQL query to execute (e.g., 'SELECT * FROM customers WHERE region = \"West\"')",
                }
            },
            ["query"],
        )

    @staticmethod
    def invoke(data: Mapping[str, Any], query: str) -> str | ReportedError:
        with LOCK:
            try:
                rows = VIEW.select(data, query)
            except Refused as refused:
                return ReportedError(f"SQL query failed: sql_query is read-only ({refused}); use db_update")
            except (sqlite3.Error, sqlite3.Warning, OverflowError, ValueError) as error:
                return ReportedError(f"SQL query failed: {error}")
        return json.dumps(rows, indent=2)


class DbSchema:
    category = "read"
    timeout_s = 10.0

    @staticmethod
    def get_info() -> dict[str, Any]:
        return _function(
            "get_db_schema",
            "Get the database schema showing all tables and their columns. "
            "Use this to understand what data is available before writing SQL queries.",
            {},
            [],
        )

    @staticmethod
    def invoke(data: Mapping[str, Any]) -> str:
        with LOCK:
            tables = {name: VIEW.columns(name, committed(data, name)) for name in sorted(data)}
        schema = {
            name: [
                {"name": column, "type": kind, "notnull": False, "pk": False}
                for column, kind in columns.items()
            ]
            for name, columns in tables.items()
            if columns
        }
        return "Database Schema:\n" + json.dumps(schema, indent=2)


TOOLS = {"db_query": DbQuery, "db_update": DbUpdate, "sql_query": SqlQuery, "get_db_schema": DbSchema}
