"""The SQL view behind ``sql_query`` and ``get_db_schema``: an in-memory SQLite copy of the list tables.

Shipped with db_tools.py (see builtin_tools.py). One view per process, kept as long as the trial's
worker: a table is copied into SQLite when a query first names it; afterwards only the records that
changed since are rewritten (the runner replaces a changed record, never edits it, so an identity
check finds them), and the whole table is copied again only when a change brings a new column or
column type, or removes a column's last holder.
"""

from __future__ import annotations

import _thread
import json
import operator
import re
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

__all__ = ["LOCK", "VIEW", "Refused", "SqlView", "committed"]


def committed(data: Mapping[str, Any], name: str) -> Any:
    """The table as committed: a copy-on-write view's base, so reading copies nothing."""
    value = data[name]
    return getattr(value, "base", value)


_IDENTIFIER = re.compile(r'"((?:[^"]|"")*)"|`([^`]*)`|\[([^\]]*)\]|([A-Za-z_][A-Za-z0-9_$]*)')
_ALLOWED = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    getattr(sqlite3, "SQLITE_RECURSIVE", 33),
}
_READ_PRAGMAS = {"table_info", "table_xinfo", "table_list", "index_list", "index_info", "foreign_key_list"}


class Refused(Exception):
    """The statement would change the view (or attach a file); the view is read-only."""


def _sql_type(value: Any) -> str:
    if isinstance(value, bool | int):
        return "INTEGER"
    if isinstance(value, float):
        return "REAL"
    return "TEXT"


@dataclass
class _Shape:
    """The SQL shape of some records: columns and their types, the columns holding lists or objects,
    and how many records hold each column."""

    columns: dict[str, str]
    structured: set[str]
    holders: dict[str, int]


def _infer_shape(records: Iterable[Any]) -> _Shape:
    """Every key of every record, in order of first sight, typed by the first value that is not null.

    A column first typed TEXT takes the type of a later non-null value that is a number (as the public
    service infers it).
    """
    columns: dict[str, str] = {}
    structured: set[str] = set()
    holders: dict[str, int] = {}
    for record in records:
        if type(record) is not dict:
            continue
        for key, value in cast(dict[str, Any], record).items():
            holders[key] = holders.get(key, 0) + 1
            if isinstance(value, str):
                columns.setdefault(key, "TEXT")
                continue
            if isinstance(value, list | dict):
                structured.add(key)
            known = columns.get(key)
            if known is None or (known == "TEXT" and value is not None):
                columns[key] = _sql_type(value)
    return _Shape(columns, structured, holders)


def _rows(
    records: Iterable[tuple[int, Any]], columns: list[str], structured: set[str]
) -> Iterable[list[Any] | None]:
    """Each (position, record) as an SQL row with its rowid (position + 1) last, or None for a record that
    is not an object (it has no row). A missing key is null, a list or object its JSON text; bools bind
    as 0/1."""
    fixed = [index for index, column in enumerate(columns) if column in structured]
    for position, record in records:
        if type(record) is not dict:
            yield None
            continue
        row = list(map(cast(dict[str, Any], record).get, columns))
        for index in fixed:
            value = row[index]
            if isinstance(value, list | dict):
                row[index] = _JSON(value)
        row.append(position + 1)
        yield row


_JSON = json.JSONEncoder(default=str).encode
"""A list or object column's text, as ``json.dumps(value, default=str)`` writes it (one encoder, reused)."""


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _insert(table: str, columns: list[str], verb: str = "INSERT") -> str:
    names = ", ".join(map(_quoted, columns))
    return f"{verb} INTO {table} ({names}, rowid) VALUES ({', '.join('?' for _ in columns)}, ?)"


@dataclass
class _Copied:
    """One table as last seen: the trial's list, and its records then (held, so their ids are not reused).

    The SQLite copy (when ``in_sqlite``) has one row per record, its rowid the record's position + 1.
    """

    base: list[Any]
    records: list[Any]
    shape: _Shape
    in_sqlite: bool = False


class SqlView:
    """An in-memory SQLite database holding the tables queries have named, kept in step record by record."""

    def __init__(self) -> None:
        self._connection: sqlite3.Connection | None = None
        self._copied: dict[str, _Copied] = {}
        self._refused: str | None = None

    def _sqlite(self) -> sqlite3.Connection:
        if self._connection is None:
            self._connection = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        return self._connection

    def columns(self, name: str, table: Any) -> dict[str, str]:
        """The SQL columns of table ``name`` (none: it is not a list of records, so it has no SQL table)."""
        if not isinstance(table, list):
            return {}
        return self._refresh(name, cast(list[Any], table)).shape.columns

    def select(self, data: Mapping[str, Any], query: str) -> list[dict[str, Any]]:
        connection = self._sqlite()
        by_folded = {name.casefold(): name for name in data}
        named = {
            by_folded[word.casefold()]
            for match in _IDENTIFIER.finditer(query)
            for word in [next(group for group in match.groups() if group is not None).replace('""', '"')]
            if word.casefold() in by_folded
        }
        for name in sorted(named):
            table = committed(data, name)
            if isinstance(table, list):
                self._copy(connection, name, self._refresh(name, cast(list[Any], table)))
            else:  # a keyed table or a plain value has no SQL table (as in the public service)
                self._copied.pop(name, None)
                connection.execute(f"DROP TABLE IF EXISTS {_quoted(name)}")
        self._refused = None
        connection.set_authorizer(self._authorize)
        try:
            cursor = connection.execute(query)
            names = [column[0] for column in cursor.description or ()]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        except sqlite3.DatabaseError:
            if self._refused is not None:
                raise Refused(self._refused) from None
            raise
        finally:
            connection.set_authorizer(None)

    def _refresh(self, name: str, base: list[Any]) -> _Copied:
        """The entry of ``name`` in step with ``base``: the positions whose record changed are rewritten.

        The whole table is copied again only when it is new to this worker, or a changed record brings
        a column (or a column type) the copy does not have.
        """
        entry = self._copied.get(name)
        if entry is not None and entry.base is base:
            old = entry.records
            if len(old) == len(base) and all(map(operator.is_, old, base)):
                return entry
            changed = [index for index in range(min(len(old), len(base))) if old[index] is not base[index]]
            changed.extend(range(len(old), len(base)))
            gone = [old[index] for index in changed if index < len(old)] + old[len(base) :]
            if self._fits(entry.shape, gone, [base[index] for index in changed if index < len(base)]):
                if entry.in_sqlite:
                    self._rewrite(name, entry, changed, base)
                entry.records = list(base)
                return entry
            self._sqlite().execute(f"DROP TABLE IF EXISTS {_quoted(name)}")
        entry = self._copied[name] = _Copied(base, list(base), _infer_shape(base))
        return entry

    @staticmethod
    def _fits(shape: _Shape, gone: list[Any], came: list[Any]) -> bool:
        """Whether replacing the records ``gone`` by ``came`` keeps the columns and their types; if so,
        ``shape`` now describes the new records (else the table is copied anew).

        Kept: a column typed by a record that is gone keeps its type (the public service would infer it
        again from the records left).
        """
        new = _infer_shape(came)
        for column, kind in new.columns.items():
            known = shape.columns.get(column)
            if known is None or (known == "TEXT" and kind != "TEXT"):
                return False
        holders = dict(shape.holders)
        for column, count in new.holders.items():
            holders[column] += count
        for record in gone:
            if type(record) is dict:
                for column in cast(dict[str, Any], record):
                    holders[column] -= 1
        if any(count <= 0 for count in holders.values()):
            return False  # a column no record holds any more disappears: copy the table anew
        shape.holders = holders
        shape.structured |= new.structured
        return True

    def _rewrite(self, name: str, entry: _Copied, changed: list[int], base: list[Any]) -> None:
        connection = self._sqlite()
        columns = list(entry.shape.columns)
        table = _quoted(name)
        kept = [index for index in changed if index < len(base)]
        rows = list(_rows(((index, base[index]) for index in kept), columns, entry.shape.structured))
        gone = [(index + 1,) for index, row in zip(kept, rows, strict=True) if row is None]
        connection.execute("BEGIN")
        try:
            connection.executemany(
                _insert(table, columns, "INSERT OR REPLACE"), [row for row in rows if row is not None]
            )
            connection.executemany(f"DELETE FROM {table} WHERE rowid = ?", gone)
            connection.execute(f"DELETE FROM {table} WHERE rowid > ?", (len(base),))
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")

    def _copy(self, connection: sqlite3.Connection, name: str, entry: _Copied) -> None:
        if entry.in_sqlite:
            return
        connection.execute(f"DROP TABLE IF EXISTS {_quoted(name)}")
        shape = entry.shape
        if (
            shape.columns
        ):  # an empty table, or one without records, has no SQL table (as in the public service)
            columns = list(shape.columns)
            declared = ", ".join(f"{_quoted(column)} {shape.columns[column]}" for column in columns)
            connection.execute("BEGIN")
            try:
                connection.execute(f"CREATE TABLE {_quoted(name)} ({declared})")
                rows = _rows(enumerate(entry.records), columns, shape.structured)
                connection.executemany(
                    _insert(_quoted(name), columns), (row for row in rows if row is not None)
                )
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
        entry.in_sqlite = True

    def _authorize(self, action: int, first: str | None, second: str | None, *_: Any) -> int:
        if action in _ALLOWED:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA and (first or "").lower() in _READ_PRAGMAS:
            return sqlite3.SQLITE_OK
        self._refused = "only SELECT statements and reading pragmas are allowed"
        return sqlite3.SQLITE_DENY


VIEW = SqlView()
LOCK = _thread.allocate_lock()
"""One SQL call at a time per process: a worker makes one anyway; trusted mode runs tools on threads."""
